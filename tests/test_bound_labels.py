"""The launch-bound label on every raw run in docs/data that kept its idle attribution: the rule's properties
checked stage by stage, and the published old-beside-new table (docs/data/bound_labels_old_new.txt) as its script
prints it, run as a script (`python benchmarks/bound_labels.py`), with the package installed."""
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import bench_core
from bench_core.measure.breakdown import BUSY_THRESHOLD, Bound, bottleneck
from bench_core.measure.idle import host_wait_bound_us
from bench_core.measure.stats import EQUIVALENCE
from bench_core.results.formats import ImportRejected, parse_upload
from bench_core.results.summary import summarize

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "data"


def _attributed():
    """(file, stage summary) for each stage whose profile kept the idle attribution, read by the engine's loader."""
    found = []
    for path in sorted(DATA.glob("*.json")):
        try:
            runs = parse_upload(path.name, path.read_bytes(), max_bytes=64 * 2**20)
        except ImportRejected:
            continue
        for run in runs:
            found += [(path.name, s) for s in summarize(run).stages
                      if s.profile is not None and s.profile.idle is not None and s.timing.median_ms]
    return found


STAGES = _attributed()


def test_there_are_attributed_stages_of_both_labels():
    verdicts = {s.bottleneck.verdict for _, s in STAGES}
    assert {Bound.LAUNCH.value, Bound.GPU.value} <= verdicts, verdicts


@pytest.mark.parametrize(("name", "stage"), STAGES, ids=[f"{n}:{s.result.key}" for n, s in STAGES])
def test_the_label_follows_the_host_wait_and_nothing_else(name, stage):
    idle, median_ms = stage.profile.idle, stage.timing.median_ms
    label = bottleneck(stage.profile, median_ms)
    # launch-bound exactly when the timed steps' host wait, per step, is more than the timestamps' resolution can
    # make of none, per step, and at least the equivalence margin of the step: from the trace's own fields
    profiled_ms = idle.span_us / idle.steps / 1e3
    waited_ms = max(0.0, idle.host_wait_us / idle.steps / 1e3 - max(0.0, profiled_ms - median_ms))
    bound_ms = host_wait_bound_us(idle.gaps, idle.unresolved_us) / idle.steps / 1e3
    assert (label.verdict == Bound.LAUNCH.value) == (waited_ms > bound_ms and waited_ms >= EQUIVALENCE * median_ms)
    # no fitted line: the GPU's busy share does not move the label, at either side of the old threshold
    for kernel_ms in (median_ms * BUSY_THRESHOLD * 0.5, median_ms):
        assert bottleneck(replace(stage.profile, gpu_kernel_ms=kernel_ms), median_ms).verdict == label.verdict
    # more host wait never turns a launch-bound stage GPU-bound; none at all is never launch-bound
    more = replace(idle, host_wait_us=idle.host_wait_us + idle.span_us * 0.01)
    if label.verdict == Bound.LAUNCH.value:
        assert bottleneck(replace(stage.profile, idle=more), median_ms).verdict == Bound.LAUNCH.value
    none = replace(idle, host_wait_us=0.0)
    assert bottleneck(replace(stage.profile, idle=none), median_ms).verdict == Bound.GPU.value


def test_the_published_table_is_what_its_script_prints_from_the_raw_runs():
    # the script imports bench_core as installed; here, the same copy these tests import
    env = dict(os.environ, PYTHONPATH=str(Path(bench_core.__file__).resolve().parents[1]))
    script = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bound_labels.py"), "--data", str(DATA)],
                            capture_output=True, text=True, cwd=ROOT, env=env, check=True, timeout=300)
    assert script.stdout == (DATA / "bound_labels_old_new.txt").read_text()
