"""The Textual terminal UI (`tuner tui`): an engine in this process or a server's."""

DEFAULT_REFRESH_HZ = 2.0  # repaints a second; the engine pays for each one (tuner.ui.bench)
MAX_REFRESH_HZ = 30.0
