"""The UI's screens: one per mode (overview, layers, knobs, presets) and its dialogs."""
