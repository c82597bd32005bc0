"""`python -m punctual.cli`: the same as the `punctual` console script."""

import sys

from punctual.cli.main import main

sys.exit(main())
