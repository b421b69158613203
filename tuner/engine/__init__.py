"""The streaming engine, in four rooms by concern: weights (loading and the model's
compute), memory (where experts live and how they are read and moved), step (one token),
session (a running engine). Imports torch, numpy, safetensors, tokenizers (KvikIO where it
is installed), the standard library, tuner.vocabulary and the plain tuner.config,
tuner.errors and tuner.knobs only (tests/engine/test_imports.py)."""
