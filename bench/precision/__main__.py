"""`python -m bench.precision`: see bench/precision/__init__.py."""

import sys

from bench.precision.main import main

sys.exit(main())
