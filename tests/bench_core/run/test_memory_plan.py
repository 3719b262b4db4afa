"""Whether a run's overlapping processes fit the device's free memory (run.memory_plan)."""
from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.stage import Stage
from bench_core.run.memory_plan import overlap_bytes, overlap_fits
from bench_core.run.runner import new_run
from helpers import TESTS

GIB = 2**30
CALL51 = TESTS.parent / "docs/data/h100_2026-12-07_call51_seed_llama-3.1-8b_d4_1.json"


def _run(cfg: BenchConfig):
    return replace(new_run(cfg, [Stage()], SimpleNamespace(cuda_available=True), "custom"), device="cuda")


def test_the_8b_run_that_ran_out_of_memory_no_longer_overlaps_its_warm_ups():
    """H100 call 51: Llama-3.1-8B cut to 4 layers, one step 38.7 GiB at its peak (the file's own figure), on a card
    of 79.2 GiB (its OOM messages' capacity). Two steps fitted there, and 5 of 14 processes ran out of memory
    with the next worker's weights and three CUDA contexts beside them: the overlap must not be allowed."""
    data = json.loads(CALL51.read_text())
    run = _run(BenchConfig.from_dict({**data["config"], "device": "cuda"}))
    peak = max(s["peak_mem_mib"] or 0 for s in data["summary"]) * 2**20
    capacity = 79.18 * GIB
    assert 2 * peak < capacity                      # what the old rule, two steps, let overlap
    assert overlap_bytes(run) > capacity
    assert not overlap_fits(run, SimpleNamespace(free_bytes={"cuda": int(capacity)}))


def test_a_small_model_still_overlaps_and_unknown_or_cpu_memory_changes_nothing():
    run = _run(BenchConfig(device="cuda", batch_size=2))   # gpt2-small's blocks, batch 2
    assert overlap_bytes(run) < 20 * GIB
    assert overlap_fits(run, SimpleNamespace(free_bytes={"cuda": 79 * GIB}))
    assert overlap_fits(run, SimpleNamespace(free_bytes={}))   # unknown: as before
    assert overlap_fits(replace(run, device="cpu"), SimpleNamespace(free_bytes={"cpu": 1}))
