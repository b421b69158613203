"""The streaming engine. Imports torch, numpy, safetensors, tokenizers, the standard library
and the plain tuner.config, tuner.errors and tuner.knobs only (tests/engine/test_imports.py)."""
