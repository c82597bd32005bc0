"""`python -m bench.burst`: see bench/burst/__init__.py."""

import sys

from bench.burst.main import main

sys.exit(main())
