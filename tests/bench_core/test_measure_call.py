"""components.bench.measure_call: one row measured from a typed RowCall and RowTiming, on the CPU's timer."""
import torch

from bench_core.components.bench import RowCall, RowTiming, measure_call

CPU = RowTiming(cuda=False, warmup=1, repeats=3)


def test_a_row_is_timed_and_judged_from_its_call():
    x = torch.ones(64)
    row, profile = measure_call(torch, RowCall("norm", "layernorm", "LayerNorm", "fp32", lambda: x * 2, nbytes=512,
                                               judge=lambda seen: ("verified", "a note")), CPU)
    assert (row.view, row.name, row.title, row.dtype, row.status) == ("norm", "layernorm", "LayerNorm", "fp32", "ok")
    assert (row.proof, row.reason, row.bytes_moved) == ("verified", "a note", 512)
    assert row.median_ms is not None and row.p10_ms <= row.median_ms <= row.p90_ms
    assert row.copy_fraction is None and profile is not None  # no ceiling given: no share of one


def test_a_call_that_raises_is_a_failed_row_with_its_reason():
    def broken() -> None:
        raise ValueError("no such shape")
    row, profile = measure_call(torch, RowCall("optimizer", "adam", "Adam", "fp32", broken), CPU)
    assert (row.status, row.reason, profile) == ("failed", "ValueError: no such shape", None)

