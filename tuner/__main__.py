"""`python -m tuner`: the `tuner` command, where its script is not on the PATH."""

import sys

from tuner.cli import main

sys.exit(main())
