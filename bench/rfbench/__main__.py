"""`python3 -m rfbench` (from bench/): the same as bench/ringfeed_bench.py."""

import sys

from .cli import main

sys.exit(main())
