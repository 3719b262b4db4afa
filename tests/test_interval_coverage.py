"""The published interval coverage of the H200 sweeps (docs/data/sweep_interval_coverage_calls22-29.txt) is what
benchmarks/sweep_targets.py computes today from the raw sweep files it names: a change to the rule or to a raw
file that is not carried into the published lines fails here."""
from pathlib import Path

from helpers import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "docs" / "data" / "sweep_interval_coverage_calls22-29.txt"


def test_the_published_coverage_is_recomputed_from_the_raw_sweeps():
    targets = load_benchmark("sweep_targets")
    lines = [line for line in PUBLISHED.read_text().splitlines() if not line.startswith("#")]
    assert len(lines) == 7
    for line in lines:
        name, said = line.split(": ", 1)
        result = targets._load(str(ROOT / "docs" / "data" / name))
        assert "; ".join(targets.report(targets.checks([(name, result)], None))[-2:]) == said, name
