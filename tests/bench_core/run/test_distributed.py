"""The multi-GPU path on CPU: 2 gloo processes through the real torchrun launcher; scaling figures by hand."""
import csv
import io
from dataclasses import replace

import pytest

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.presets import across_gpus
from bench_core.levers.stage import Stage
from bench_core.machine.probe import Probe
from bench_core.results.formats import summary_rows, to_csv
from bench_core.results.records import RunResult, Status, initial_stage
from bench_core.results.summary import summarize
from bench_core.run.processes import StageJob
from bench_core.run.runner import new_run, run_all
from helpers import built_event


@pytest.mark.slow
def test_two_gloo_ranks_through_torchrun(tiny_cfg, cpu_probe):
    cfg = replace(tiny_cfg, iters=4)
    stages = across_gpus([Stage("adam-fused")], [1, 2]) + [Stage("zero-adam", gpus=2)]
    run = run_all(new_run(cfg, stages, cpu_probe, "custom"), cpu_probe)
    one, two, zero = run.stages
    assert [s.status for s in run.stages] == [Status.OK] * 3, [s.reason for s in run.stages]
    assert two.key == "adam-fused+layernorm+fp32+gpus2" and len(two.times_ms) == cfg.iters
    assert len(two.rank_peak_mib) == 2 and all(m > 50 for m in two.rank_peak_mib)
    assert two.kernels["aten_fused_adam"] and two.verdict == "verified"
    s1, s2, sz = summarize(run).stages
    # global throughput counts both ranks' tokens; efficiency against the same levers on one process
    assert s2.rates.tokens_per_s == pytest.approx(2 * cfg.tokens_per_step / (s2.timing.median_ms / 1e3))
    assert s2.scaling_efficiency == pytest.approx(s2.rates.tokens_per_s / (2 * s1.rates.tokens_per_s))
    assert s1.scaling_efficiency is None
    assert sz.scaling_efficiency is None  # ZeRO has no one-process twin in this run
    assert len(zero.rank_peak_mib) == 2 and zero.optimizer_class.endswith("ZeroRedundancyOptimizer")
    rows = summary_rows(summarize(run))
    assert [r["gpus"] for r in rows] == ["1", "2", "2"]
    header = to_csv(run).splitlines()[0].split(",")
    assert "scaling_efficiency" in header and "gpus" in header


@pytest.mark.slow
def test_the_thread_count_reaches_a_torchrun_rank(tiny_cfg):
    """Under torchrun the job travels in BENCH_JOB_FILE, and gloo ranks start at OMP_NUM_THREADS=1: the job's
    count must still win."""
    job = StageJob(tiny_cfg, Stage("adam-fused", gpus="2"), "cpu", threads=2)
    built = built_event(job, world=2)
    assert built.world_size == 2 and built.cpu_threads == 2


def hand_made_run(ms_one: float, ms_two: float) -> RunResult:
    cfg = BenchConfig(depth=2, width=64, heads=4, seq_len=32, batch_size=2, vocab_size=256, warmup=1, iters=4,
                      device="cpu")
    stages = [initial_stage(i, s, 4) for i, s in enumerate(across_gpus([Stage("adam-fused")], [1, 2]))]
    stages = [replace(stages[0], status=Status.OK, times_ms=(ms_one,) * 4, rounds=(4,)),
              replace(stages[1], status=Status.OK, times_ms=(ms_two,) * 4, rounds=(4,))]
    return RunResult(config=cfg, machine=Probe.from_dict({}), device="cpu", preset="custom", stages=tuple(stages),
                     status=Status.DONE)


def test_scaling_figures_against_hand_computed_numbers():
    """Batch 2 x sequence 32 = 64 tokens per rank per step. One rank at 40 ms: 64 / 0.040 = 1600 tokens/s.
    Two ranks at 60 ms: 2 x 64 / 0.060 = 2133.33 tokens/s; efficiency 2133.33 / (2 x 1600) = 2/3; and the
    speedup, a throughput ratio when world sizes differ, 2133.33 / 1600 = 4/3."""
    one, two = summarize(hand_made_run(40.0, 60.0)).stages
    assert one.rates.tokens_per_s == pytest.approx(1600.0)
    assert two.rates.tokens_per_s == pytest.approx(2133.3333333)
    assert two.scaling_efficiency == pytest.approx(0.6666667)
    assert two.speedup == pytest.approx(1.3333333) and one.speedup == 1.0
    assert one.scaling_efficiency is None
    rows = list(csv.DictReader(io.StringIO(to_csv(hand_made_run(40.0, 60.0)))))
    assert float(rows[1]["scaling_efficiency"]) == pytest.approx(0.6666667)
    assert float(rows[1]["tokens_per_s"]) == pytest.approx(2133.3333333)
    # perfect scaling: two ranks in the one-rank step time
    assert summarize(hand_made_run(40.0, 40.0)).stages[1].scaling_efficiency == pytest.approx(1.0)


def test_no_efficiency_without_an_ok_one_rank_twin():
    run = hand_made_run(40.0, 60.0)
    run = run.with_stage(replace(run.stages[0], status=Status.FAILED, reason="worker exited with code 1"))
    assert summarize(run).stages[1].scaling_efficiency is None


def test_gpu_counts_are_checked_against_the_machine(cpu_probe):
    assert Stage(gpus=4).unavailable_reason(cpu_probe, "cpu") == "on CPU at most 2 gloo processes"
    assert Stage(gpus=2).unavailable_reason(cpu_probe, "cpu") is None
    one_gpu = Probe.from_dict({"cuda": {"available": True, "device_count": 1}})
    assert Stage(gpus=2).unavailable_reason(one_gpu, "cuda") == "needs 2 GPUs; this machine has 1"
    assert Stage("zero-adam").unavailable_reason(cpu_probe, "cpu").startswith("ZeroRedundancyOptimizer")
    genuine = Probe.from_dict({"cuda": {"available": True, "device_count": 2}, "apex": {"status": "genuine"}})
    assert Stage("apex-distadam", gpus=2).unavailable_reason(genuine, "cuda") == \
        "Apex built without DistributedFusedAdam (rebuild with APEX_DISTRIBUTED_ADAM=1)"
    assert Stage("apex-distadam", gpus=2).unavailable_reason(genuine, "cpu") == \
        "Apex DistributedFusedAdam needs gpus > 1 on CUDA"
