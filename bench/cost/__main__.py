"""`python -m bench.cost`: see bench/cost/__init__.py."""

import sys

from bench.cost.main import main

sys.exit(main())
