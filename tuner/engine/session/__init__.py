"""A running engine: the session thread and its versioned settings, conversations and
workloads, opening a model onto a device, and the snapshot a view reads."""
