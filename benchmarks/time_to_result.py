"""Wall time of a whole preset through the CLI, process starts included.

    python benchmarks/time_to_result.py -- --preset seed --model gpt2-small --warmup 10 --iters 30
Targets: seed on gpt2-small (10 + 30) <= 45 s on an H200; seed with CPU defaults <= 30 s on 2 cores.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    args = sys.argv[1:]
    if args and args[0] == "--":
        args = args[1:]
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench_core", "run", "--quiet", *args], cwd=ROOT)
    elapsed = time.perf_counter() - start
    print(f"time to result: {elapsed:.1f} s (exit code {proc.returncode}) for: {' '.join(args)}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
