"""Measuring fairly: interleaved A/B comparisons with a drift sentinel, and the figures
behind them."""
