"""The default CPU run, twice through the CLI on a machine cache of its own (the first run finds nothing measured,
as on a fresh machine; the second reads what the first measured): the estimate printed before the stages against
the time they then took, and the whole command's time.

    python benchmarks/first_run.py docs/data/cpu_first_run.json
Targets (issue 42): each estimate within ±30% of its run's time, and each run <= 60 s on a 2-core CPU, with and
without BF16 instructions (ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 simulates "without" on a bigger CPU).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time

ESTIMATE = re.compile(r"estimated (\d+) s")
TOLERANCE = 0.30
LIMIT_S = 60.0


def one_run(env: dict[str, str]) -> dict:
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "bench_core", "run", "--no-db"], env=env, text=True,  # noqa: S603
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    estimate_s, estimated_at, lines = None, None, []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.rstrip())
        found = ESTIMATE.search(line)
        if found and estimate_s is None:
            estimate_s, estimated_at = float(found.group(1)), time.monotonic()
    code = proc.wait()
    end = time.monotonic()
    run_s = end - estimated_at if estimated_at is not None else None
    error = (estimate_s - run_s) / run_s if run_s and estimate_s is not None else None
    return {"exit_code": code, "estimate_s": estimate_s, "run_s": run_s, "command_s": end - start,
            "estimate_error": error, "within_30pct": error is not None and abs(error) <= TOLERANCE,
            "within_60s": end - start <= LIMIT_S,
            "estimate_line": next((ln for ln in lines if ESTIMATE.search(ln)), None), "output": lines}


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else None
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "BENCH_CACHE_DIR": cache}
        runs = [one_run(env) for _ in range(2)]
    doc = {"what": "the default CPU run through the CLI, twice, on a fresh machine cache", "cpu": os.cpu_count(),
           "env": {k: os.environ.get(k) for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")},
           "load_before": os.getloadavg(), "runs": runs}
    for i, r in enumerate(runs, 1):
        print(f"run {i}: estimate {r['estimate_s']} s, stages {r['run_s']:.1f} s after it "
              f"({(r['estimate_error'] or 0):+.0%} off), command {r['command_s']:.1f} s")
    if out:
        with open(out, "w") as fh:
            json.dump(doc, fh, indent=1)
    return 0 if all(r["exit_code"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
