"""`python -m tuner`: the `tuner` command, where its script is not on the PATH."""

import sys

from tuner.cli import main

if __name__ == "__main__":  # not when a worker process imports the main module
    sys.exit(main())
