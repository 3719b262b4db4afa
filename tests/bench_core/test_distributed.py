"""The multi-GPU path on CPU: 2 gloo processes through the real torchrun launcher."""
from dataclasses import replace

import pytest

from bench_core.levers import Stage, across_gpus
from bench_core.results import stage_metrics, summary_rows, to_csv
from bench_core.runner import new_run, run_all


def test_two_gloo_ranks_through_torchrun(tiny_cfg, cpu_probe):
    cfg = replace(tiny_cfg, iters=4)
    stages = across_gpus([Stage("adam-fused")], [1, 2]) + [Stage("zero-adam", gpus=2)]
    run = run_all(new_run(cfg, stages, cpu_probe, "custom"), cpu_probe)
    one, two, zero = run.stages
    assert [s.status for s in run.stages] == ["ok", "ok", "ok"], [s.reason for s in run.stages]
    assert two.key == "adam-fused+layernorm+fp32+gpus2" and len(two.times_ms) == cfg.iters
    assert len(two.rank_peak_mib) == 2 and all(m > 50 for m in two.rank_peak_mib)
    assert two.kernels["aten_fused_adam"] and two.verdict == "verified"
    m1, m2 = stage_metrics(run, one), stage_metrics(run, two)
    # global throughput counts both ranks' tokens; efficiency against the same levers on one process
    assert m2["tokens_per_s"] == pytest.approx(2 * cfg.tokens_per_step / (m2["median_ms"] / 1e3))
    assert m2["scaling_efficiency"] == pytest.approx(m2["tokens_per_s"] / (2 * m1["tokens_per_s"]))
    assert m1["scaling_efficiency"] is None
    assert len(zero.rank_peak_mib) == 2
    rows = summary_rows(run)
    assert [r["gpus"] for r in rows] == [1, 2, 2] and "scaling_efficiency" in to_csv(run).splitlines()[0]


def test_gpu_counts_are_checked_against_the_machine(cpu_probe):
    assert Stage(gpus=4).unavailable_reason(cpu_probe, "cpu") == "on CPU at most 2 gloo processes"
    assert Stage(gpus=2).unavailable_reason({"cuda": {"device_count": 1}}, "cuda") == "needs 2 GPUs; this machine has 1"
    assert Stage("zero-adam").unavailable_reason(cpu_probe, "cpu").startswith("ZeroRedundancyOptimizer")
    assert Stage("apex-distadam", gpus=2).unavailable_reason(
        {"cuda": {"device_count": 2}, "apex": {"status": "genuine"}}, "cuda") == \
        "Apex built without DistributedFusedAdam (rebuild with APEX_DISTRIBUTED_ADAM=1)"
