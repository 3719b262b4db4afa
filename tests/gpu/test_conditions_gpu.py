"""The GPU and host during a real stage's timed steps (NVML through pynvml): every figure is there, and the stage's
noise label names a cause exactly where one was seen. Marked gpu: skipped without CUDA."""
import csv
import io

import pytest

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.stage import Stage
from bench_core.machine.conditions import ClocksLocked
from bench_core.machine.probe import run_probe
from bench_core.measure.noise import FILE_FIELDS
from bench_core.results.formats import to_csv
from bench_core.results.summary import summarize
from bench_core.run.runner import new_run, run_all

pytestmark = pytest.mark.gpu

TINY = BenchConfig(depth=2, width=256, heads=4, seq_len=256, batch_size=4, vocab_size=4096, warmup=2, iters=30,
                   repeats=2, device="cuda")


@pytest.fixture(scope="module")
def run():
    pytest.importorskip("pynvml")
    probe = run_probe()
    return run_all(new_run(TINY, [Stage("adam-fused", "layernorm", "bf16")], probe, "custom"), probe)


def test_a_stage_on_the_gpu_carries_its_conditions(run):
    stage = run.stages[0]
    assert stage.status == "ok", stage.reason
    c = summarize(run).stages[0].conditions
    assert c is not None and c.sm_clock_mhz_min > 0 and c.sm_clock_mhz_median >= c.sm_clock_mhz_min
    assert len(stage.conditions.sm_clock_mhz) >= 2 * TINY.repeats   # a first and a last sample in each process
    assert c.power_w_median > 0 and c.temp_c_max > 0
    assert c.host_load_avg is not None and c.host_cores > 0 and 0 < c.worker_cpu_share
    assert c.clocks_locked in {v.value for v in ClocksLocked}


def test_the_noise_label_names_each_cause_seen(run):
    s = summarize(run).stages[0]
    for cause in s.conditions.causes:
        assert cause.text in (s.noise_reason or "")
    if not s.conditions.causes:
        assert "throttled" not in (s.noise_reason or "") and "host busy" not in (s.noise_reason or "")


def test_the_csv_row_has_every_field(run):
    [row] = list(csv.DictReader(io.StringIO(to_csv(run))))
    assert all(name in row for name in FILE_FIELDS)
    assert int(row["sm_clock_mhz_min"]) > 0 and row["clocks_locked"] in ("yes", "no", "unknown")
