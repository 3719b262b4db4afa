"""How much device memory a run's overlapping processes hold, and whether the overlap fits: where it does not, a
stage's warm-up waits for the last stage's process to exit (runner.run_worker's `after_exit`)."""
from __future__ import annotations

from bench_core.machine.probe import Probe
from bench_core.models.families import estimate_memory
from bench_core.results.records import RunResult

# What a worker holds outside PyTorch's allocator (CUDA context, cuBLAS workspace, kernel images): 5.37 GiB in
# use, of which 4.77 GiB allocated and 1.91 MiB reserved by PyTorch, in an H100 out-of-memory message
# (docs/data/h100_2026-12-07_call51_seed_llama-3.1-8b_d4_1.log).
CUDA_CONTEXT_BYTES = 600 * 2**20


def overlap_bytes(run: RunResult) -> int:
    """Device memory held at once when a stage's warm-up overlaps the last stage's exit: two steps (the last
    stage's, still tearing down, and this one's), the next stage's weights (its worker builds once this warm-up
    starts), and the three processes' CUDA contexts."""
    need = estimate_memory(run.config)
    return 2 * need["total_bytes"] + 4 * need["params"] + 3 * CUDA_CONTEXT_BYTES


def overlap_fits(run: RunResult, probe: Probe) -> bool:
    """Whether that overlap (overlap_bytes) fits the device's free memory. Where it does not, a stage's worker
    starts its warm-up only once the last stage's has exited: on an H100 a finished worker's teardown, still holding
    its 47 GiB, overlapped the next one's warm-up at gpt2-small's blocks, batch 32 x 1,024 tokens, and the next
    one ran out of memory (docs/data/h100_2026-12-06_call36_sweep_apex_1.log); two steps of 38.8 GiB fitted, but
    not with the next worker's weights beside them (docs/data/h100_2026-12-07_call51_seed_llama-3.1-8b_d4_1.log)."""
    free = probe.free_bytes.get(run.device)
    return run.device != "cuda" or free is None or overlap_bytes(run) <= free
