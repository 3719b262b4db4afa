"""A real stage's warm-up on the GPU, recorded per process: CUDA-event step times, their starts, and the SM clock
over the warm-up with each sample's time (NVML through pynvml); and the settle rule reads them. Marked gpu."""
import pytest

from bench_core.config.bench_config import WARMUP_MIN_S, BenchConfig
from bench_core.levers.stage import Stage
from bench_core.measure.warmup import settle
from bench_core.results.formats import parse_json, to_json
from bench_core.results.summary import summarize
from bench_core.run.runner import new_run, run_all

pytestmark = pytest.mark.gpu

TINY = BenchConfig(depth=2, width=256, heads=4, seq_len=256, batch_size=4, vocab_size=4096, warmup=2, iters=30,
                   repeats=2, device="cuda")


@pytest.fixture(scope="module")
def run(probe):
    pytest.importorskip("pynvml")
    return run_all(new_run(TINY, [Stage("adam-fused", "layernorm", "bf16")], probe, "custom"), probe)


def test_every_process_warm_up_is_recorded_with_its_clock(run):
    stage = run.stages[0]
    assert stage.status == "ok", stage.reason
    assert len(stage.warmups) == TINY.repeats
    for w in stage.warmups:
        assert w.steps == len(w.step_ms) == len(w.step_start_s) >= TINY.warmup and w.seconds >= WARMUP_MIN_S
        assert all(ms > 0 for ms in w.step_ms) and list(w.step_start_s) == sorted(w.step_start_s)
        assert len(w.clock_mhz) >= 2 and all(mhz > 0 for mhz in w.clock_mhz)   # a first and a last sample
        assert list(w.clock_s) == sorted(w.clock_s) and w.clock_s[-1] <= w.seconds + 1.0


def test_the_record_survives_the_json_and_the_rule_reads_it(run):
    [back] = parse_json(to_json(run).encode())
    assert back.stages[0].warmups == run.stages[0].warmups
    s = summarize(back).stages[0]
    for w in back.stages[0].warmups:
        got = settle(w, s.conditions.sm_clock_mhz_median, (s.timing.p10_ms, s.timing.p90_ms))
        assert got is None or (got.clock_checked and 0 <= got.seconds <= w.seconds and got.steps <= w.steps)
