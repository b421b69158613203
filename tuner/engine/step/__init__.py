"""One token: the Engine and its two strategies (host-driven, device-first), a layer's work
(serve, read ahead, land, retire), prefill, prediction and speculation, the probe, the
quality probe's exact reference, live settings and the clock."""
