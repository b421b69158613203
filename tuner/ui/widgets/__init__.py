"""Widgets of the terminal UI, each fed from snapshot data by the screen that holds it."""
