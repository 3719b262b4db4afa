"""The timing process (sweep.timing.process), for real on a tiny model on CPU: each stage in its family's form, a
compiled stage's parts compiled, each part warmed once."""
import os
import shutil
import threading
import time
from types import SimpleNamespace

import pytest

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.stage import Stage
from bench_core.sweep.core.spec import (
    Axis,
    grid,
    parse_comparison,
)
from bench_core.sweep.timing.timings import Part

BF16 = Stage("adam-fused", "layernorm", "bf16")




@pytest.mark.slow
def test_the_timing_process_times_each_stage_in_its_familys_form():
    """A stage key leaves out llama's own SwiGLU (a plain lever), so a timing process that rebuilt stages from
    their keys timed GELU and left every llama point without a prediction ('activation swiglu@fp32 was not timed
    here', on the H200). The real `python -m bench_core.sweep.timing.process` process, on a tiny llama on CPU."""
    from bench_core.sweep.core.runner import predict_in_process
    # wide enough that a block is a clear share of the step (at width 32 it was 0-40% of it, within the CPU's noise)
    base = BenchConfig(family="llama", depth=1, width=128, heads=4, seq_len=64, batch_size=2, vocab_size=512,
                       device="cpu")
    comparison = parse_comparison("adam-fused+rmsnorm+fp32,adam-fused+rmsnorm+bf16", "llama")
    points = grid((Axis("width", (128,)),), base)
    ((_, timings, missing),) = list(predict_in_process(points, comparison, "cpu", threading.Event(),
                                                       breakdown=True))
    assert missing == () and timings is not None
    assert timings.find(Part.ACTIVATION, "swiglu@fp32") and timings.find(Part.ACTIVATION, "swiglu@bf16")
    assert timings.find(Part.ACTIVATION, "gelu@fp32") is None
    assert all(timings.find(part, stage.key) for part in (Part.STEP_1, Part.STEP_2)
               for stage in (comparison.a, comparison.b))


@pytest.mark.skipif(not (shutil.which("c++") or shutil.which("g++")),
                    reason="inductor's CPU backend needs a C++ compiler (the probe reports compile unusable here)")
@pytest.mark.slow
def test_a_compiled_stages_parts_are_timed_compiled():
    """A compiled stage's parts timed eagerly count its fused work unfused (FP8's casts above all). The real
    timing code on a tiny llama on CPU: its steps and each traced part of its breakdown run as torch.compile's
    graphs."""
    import torch

    from bench_core.sweep.timing.process import time_point
    cfg = BenchConfig(family="llama", depth=1, width=32, heads=2, seq_len=16, batch_size=1, vocab_size=64,
                      device="cpu")
    eager = Stage("adam-fused", "rmsnorm", "bf16").for_family("llama")
    compiled = eager.replace(compile="compile")
    graphs = torch._dynamo.utils.counters["stats"]
    before = graphs["unique_graphs"]
    timings, missing = time_point(cfg, (compiled,), "cpu", warmup=1, repeats=2, breakdown=True)
    assert missing == ()
    assert {t.variant for t in timings.times} == {compiled.key, "bf16+compile", "bf16", "rmsnorm@bf16+compile",
                                                  "swiglu@bf16+compile", "ce@bf16+compile", "adam-fused"}
    # both shallow steps compiled as the worker compiles the model, and the GEMMs, norm, SwiGLU and loss each
    # traced (their backward graphs come with them)
    assert graphs["unique_graphs"] - before >= 6


def test_each_part_is_warmed_once_and_the_profiler_is_told_to_let_go(monkeypatch):
    """A part's warm-up runs once, before its host timing and its timed calls (it ran twice); and the timing
    process asks Kineto to tear CUPTI down after each profile, so no profile slows the next part's launches (the
    H200's enqueue probe read 14.3 us a kernel after profiles, 10.3 before any)."""
    from bench_core.sweep.timing import process as kernels
    calls: list[int] = []

    def counted(*args, **kwargs):
        calls.append(0)
        index = len(calls)

        def fn() -> None:
            calls[index - 1] += 1
        return fn
    monkeypatch.setattr(kernels, "part_fn", counted)
    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    cfg = BenchConfig(depth=1, width=32, heads=2, seq_len=16, batch_size=1, vocab_size=64, device="cpu")
    timings, missing = kernels.time_point(cfg, (BF16,), "cpu", warmup=2, repeats=3, breakdown=True)
    assert missing == () and len(timings.times) == len(calls) == 8
    assert calls == [2 + 3 + 1] * 8        # warm-up, timed calls, the one profiled call
    assert os.environ["TEARDOWN_CUPTI"] == "1"
    # what the breakdown cost the point, on a clock that moves 1 s a reading: its six parts' seconds, not the steps'
    ticks = iter(range(1000))
    monkeypatch.setattr(kernels, "time", SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    calls.clear()
    timings, _ = kernels.time_point(cfg, (BF16,), "cpu", warmup=2, repeats=3, breakdown=True)
    assert timings.breakdown_s == 6.0
    assert [t.wall_s for t in timings.times] == [1.0] * 8   # and each part keeps its own, the steps' too
    monkeypatch.setattr(kernels, "time", time)
    # without the breakdown asked for, only what the prediction is made of: the two shallow steps
    calls.clear()
    timings, _ = kernels.time_point(cfg, (BF16,), "cpu", warmup=2, repeats=3)
    assert [(t.part, t.variant) for t in timings.times] == [(Part.STEP_1, BF16.key), (Part.STEP_2, BF16.key)]
    assert calls == [2 + 3 + 1] * 2
