"""The published interval coverage of the H200 sweeps (docs/data/sweep_interval_coverage_calls22-29.txt) is what the
raw sweep files it names give: each count is recomputed here from the files' points by the method's own definitions
(a prediction's interval holds the measurement; the shown interval widened by the other points' errors alone holds
it), and the published lines are what benchmarks/sweep_targets.py prints today. A change to the rule or to a raw file
that is not carried into the published lines fails here; no count is copied into this test."""
import math
import re
from pathlib import Path

from bench_core.sweep.core import plan
from helpers import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "docs" / "data" / "sweep_interval_coverage_calls22-29.txt"
OWN = re.compile(r"inside the prediction's own interval: (\d+) of (\d+)(?: \((\d+) predicted without an interval)?")
WIDENED = re.compile(r"inside the widened interval, each point widened by the others' errors: (?:(\d+) of (\d+)|(too "
                     r"few points))")


def _published() -> dict[str, str]:
    lines = [line for line in PUBLISHED.read_text().splitlines() if line and not line.startswith("#")]
    found = dict(line.split(": ", 1) for line in lines)
    assert lines and len(found) == len(lines), "each raw file once"
    return found


def _held_out(pairs) -> tuple[int, int] | None:
    """The method written out: each point's interval is its prediction × exp(±z σ), σ² = (its own interval's
    half-width in log / z)² + the mean square log error of the other points, where more than CALIBRATION_POINTS
    points let the others give one."""
    if len(pairs) <= plan.CALIBRATION_POINTS:
        return None
    held = 0
    for i, p in enumerate(pairs):
        others = [math.log(q.measured / q.predicted) for j, q in enumerate(pairs) if j != i]
        error2 = sum(e * e for e in others) / len(others)
        spread = math.log(p.high / p.low) / (2 * plan.Z_95) if p.low and p.high else 0.0
        half = plan.Z_95 * math.sqrt(spread ** 2 + error2)
        held += p.predicted * math.exp(-half) <= p.measured <= p.predicted * math.exp(half)
    return held, len(pairs)


def test_each_published_count_is_what_the_raw_points_give():
    targets = load_benchmark("sweep_targets")
    for name, said in _published().items():
        pairs = [p.paired for p in targets._load(str(ROOT / "docs" / "data" / name)).points if p.paired is not None]
        judged = [p for p in pairs if p.low != p.high]   # a prediction kept without spread holds nothing
        own = OWN.search(said)
        assert own is not None, (name, said)
        inside = sum(p.low <= p.measured <= p.high for p in judged)
        assert (int(own[1]), int(own[2]), int(own[3] or 0)) == (inside, len(judged), len(pairs) - len(judged)), name
        widened = WIDENED.search(said)
        assert widened is not None, (name, said)
        found = _held_out(pairs)
        assert (found is None) == bool(widened[3]), name
        if found is not None:
            assert (int(widened[1]), int(widened[2])) == found and found[0] <= found[1], name


def test_the_published_lines_are_what_sweep_targets_prints():
    targets = load_benchmark("sweep_targets")
    for name, said in _published().items():
        result = targets._load(str(ROOT / "docs" / "data" / name))
        assert "; ".join(targets.report(targets.checks([(name, result)], None))[-2:]) == said, name
