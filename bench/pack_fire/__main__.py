"""`python -m bench.pack_fire`: see bench/pack_fire/__init__.py."""

import sys

from bench.pack_fire.main import main

sys.exit(main())
