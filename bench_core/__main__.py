import sys

from bench_core.cli import main

sys.exit(main())
