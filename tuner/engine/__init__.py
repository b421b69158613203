"""The streaming engine. Imports torch, numpy, safetensors, tokenizers (KvikIO where it is
installed), the standard library and the plain tuner.config, tuner.errors and tuner.knobs
only (tests/engine/test_imports.py)."""
