"""The real engine, real worker processes, a tiny CPU config."""
import math
import os
import threading
import time
from dataclasses import replace

import pytest

from bench_core.levers import PRESETS, Stage
from bench_core.results import stage_metrics
from bench_core.runner import new_run, run_all, run_stage


def test_seed_preset_on_cpu(tiny_cfg, cpu_probe):
    updates = []
    run = run_all(new_run(tiny_cfg, PRESETS["seed"], cpu_probe, "seed"), cpu_probe, on_update=updates.append)
    base, *apex = run.stages
    assert base.status == "ok" and base.verdict == "verified" and base.kernels["aten_native_layer_norm"]
    assert len(base.times_ms) == tiny_cfg.iters and all(0 < t < 5000 for t in base.times_ms)
    assert abs(base.losses[0] - math.log(tiny_cfg.vocab_size)) < 0.3 and base.losses[-1] < base.losses[0]
    assert base.peak_rss_mib and base.peak_rss_mib > 50
    for stage in apex:
        assert stage.status == "unavailable" and "Apex" in stage.reason and not stage.times_ms
    m = stage_metrics(run, base)
    assert m["speedup"] == 1.0 and m["tokens_per_s"] > 0 and m["p10_ms"] <= m["median_ms"] <= m["p90_ms"]
    assert m["mfu"] is None  # no peak figure for a CPU
    # progress streamed while the stage ran, one iteration at a time
    counts = [len(u.stages[0].times_ms) for u in updates]
    assert set(range(tiny_cfg.iters + 1)) <= set(counts)
    assert run.status == "done"


def test_native_preset_on_cpu(tiny_cfg, cpu_probe):
    cfg = replace(tiny_cfg, iters=3)
    run = run_all(new_run(cfg, PRESETS["native"], cpu_probe, "native"), cpu_probe)
    assert [s.status for s in run.stages] == ["ok"] * 4, [s.reason for s in run.stages]
    fused = run.stages[1]
    assert fused.kernels["aten_fused_adam"] and fused.verdict == "verified"
    assert run.stages[2].autocast_dtype == "bfloat16"
    # identical data and init: every stage starts from the same loss
    first = [s.losses[0] for s in run.stages]
    assert max(first) - min(first) < 0.05


def test_fp16_stage_uses_grad_scaler(tiny_cfg, cpu_probe):
    result = run_stage(tiny_cfg, Stage("adam", "layernorm", "fp16"), 0, "cpu", cpu_probe)
    assert result.status == "ok" and result.autocast_dtype == "float16" and result.verdict == "verified"
    assert any("_amp_foreach_non_finite_check_and_unscale" in n for n in result.kernels["grad_scaler"])
    bf16 = run_stage(tiny_cfg, Stage("adam", "layernorm", "bf16"), 0, "cpu", cpu_probe)
    assert bf16.status == "ok" and bf16.kernels["grad_scaler"] == []


@pytest.mark.parametrize("fault,expected", [("abort", "signal SIGABRT"), ("segfault", "signal SIGSEGV"),
                                            ("exit3", "exited with code 3")])
def test_crashing_worker_is_failed_and_next_stage_runs(tiny_cfg, cpu_probe, fault, expected):
    env = {**os.environ, "BENCH_TEST_FAULT": f"{fault}@adam+layernorm+fp32"}
    stages = [Stage("adam"), Stage("adam-fused")]
    run = run_all(new_run(tiny_cfg, stages, cpu_probe, "custom"), cpu_probe, env=env)
    assert run.stages[0].status == "failed" and expected in run.stages[0].reason
    assert run.stages[1].status == "ok"


def test_hanging_worker_times_out(tiny_cfg, cpu_probe):
    env = {**os.environ, "BENCH_TEST_FAULT": "hang"}
    start = time.monotonic()
    result = run_stage(tiny_cfg, Stage(), 0, "cpu", cpu_probe, timeout_s=3, env=env)
    assert result.status == "timeout" and "3 s limit" in result.reason
    assert time.monotonic() - start < 10


def test_cpu_oom_under_memory_cap(tiny_cfg, cpu_probe):
    big = replace(tiny_cfg, width=1024, heads=8, vocab_size=32768, seq_len=256, batch_size=8)
    env = {**os.environ, "BENCH_TEST_RLIMIT_AS_MIB": "1600"}
    result = run_stage(big, Stage(), 0, "cpu", cpu_probe, env=env)
    assert result.status == "oom", result.reason
    assert "allocate" in result.reason or "MemoryError" in result.reason


def test_cancel_kills_the_running_stage(tiny_cfg, cpu_probe):
    cancel = threading.Event()
    env = {**os.environ, "BENCH_TEST_FAULT": "hang"}
    threading.Timer(1.0, cancel.set).start()
    result = run_stage(tiny_cfg, Stage(), 0, "cpu", cpu_probe, cancel=cancel, env=env)
    assert result.status == "cancelled"
