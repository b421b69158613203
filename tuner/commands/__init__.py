"""Subcommands of the `tuner` command line, one module each."""
