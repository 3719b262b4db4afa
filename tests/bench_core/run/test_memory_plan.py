"""Whether a run's overlapping processes fit the device's free memory (run.memory_plan)."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.stage import Stage


def test_the_overlap_is_two_steps_the_next_weights_and_three_contexts():
    """The moment a warm-up overlaps the last stage's teardown, the next worker builds beside them: two steps of
    38.8 GiB fitted the H100's free memory, but not with the next worker's weights (call 51's 8B trimmed to 4
    layers ran out of memory in 5 of 14 processes)."""
    from bench_core.models.families import estimate_memory
    from bench_core.run.memory_plan import CUDA_CONTEXT_BYTES, steps_fit_twice
    from bench_core.run.runner import new_run
    cfg = BenchConfig(device="cuda", batch_size=32)
    need = estimate_memory(cfg)
    run = replace(new_run(cfg, [Stage()], SimpleNamespace(cuda_available=True), "custom"), device="cuda")
    overlap = 2 * need["total_bytes"] + 4 * need["params"] + 3 * CUDA_CONTEXT_BYTES
    assert steps_fit_twice(run, SimpleNamespace(free_bytes={"cuda": overlap}))
    assert not steps_fit_twice(run, SimpleNamespace(free_bytes={"cuda": overlap - 1}))
    assert not steps_fit_twice(run, SimpleNamespace(free_bytes={"cuda": 2 * need["total_bytes"]}))  # the old rule
    assert steps_fit_twice(run, SimpleNamespace(free_bytes={}))   # unknown: as before
    assert steps_fit_twice(replace(run, device="cpu"), SimpleNamespace(free_bytes={"cpu": 1}))
