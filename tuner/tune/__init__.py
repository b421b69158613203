"""Auto-tuning: an Optuna study over the knob table whose trials are live settings changes
of a running engine session, each paired with a baseline measured on the same session.

space (what is searched) -> loop (ask, measure on a worker, guard, tell) -> study (storage,
front, presets); worker (one session, its baseline and sentinel); ray_pool (workers on Ray).
"""
