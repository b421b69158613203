"""The model's weights: checkpoint files and their layout, the quantised formats, the made
demo model, the dense compute (Decoder), the routers and the fused Triton kernels."""
