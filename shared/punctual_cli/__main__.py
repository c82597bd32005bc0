"""`python -m punctual_cli`: the same as the `punctual` console script."""

import sys

from punctual_cli.main import main

sys.exit(main())
