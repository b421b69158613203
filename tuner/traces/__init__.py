"""Routing traces: the exchange format, recording from the engine, importers for other
engines' route logs, statistics, and replay through the engine's own cache policies."""
