"""`python -m tuner`: the `tuner` command, where its script is not on the PATH."""

from tuner.cli import script

if __name__ == "__main__":  # not when a worker process imports the main module
    script()
