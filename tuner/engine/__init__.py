"""The streaming engine. Imports torch, the standard library and tuner.knobs only."""
