"""The words the engine and the control plane share, with no torch: counters and their
snapshot types, slots and cache policies, per-layer budgets, the trace and workload
formats, model configs and the made models' recipes, the names a request checks (a
preset's, a rule set's, a tune objective's), and the reader of every file a user names
(inputs). The control plane, the remote terminal UI and `tuner presets export` load
these without loading the engine (tests/test_architecture.py)."""
