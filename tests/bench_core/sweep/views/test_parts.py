"""A sweep's breakdown (`--breakdown`): each part of a block timed alone, stage A beside stage B per step, on
hand-set timings with known answers; and the HTML report's table of it."""
import html
from dataclasses import replace

import pytest

from bench_core.config.bench_config import BenchConfig
from bench_core.results.records import Status
from bench_core.sweep.core.records import PointPrediction, PointResult, SweepResult
from bench_core.sweep.core.spec import Axis, SweepSpec, grid, parse_comparison
from bench_core.sweep.timing.timings import KernelTime, Part, PointTimings
from bench_core.sweep.views.parts import BREAKDOWN_TITLE, breakdown_rows
from bench_core.sweep.views.report import render_html


def _sweep(compare: str, family: str, times: tuple[KernelTime, ...]) -> SweepResult:
    base = BenchConfig(family=family, depth=2, width=64, heads=2, seq_len=16, batch_size=2, vocab_size=128,
                       device="cpu")
    spec = SweepSpec(parse_comparison(compare, family), base, (Axis("width", (64, 128)),), None, breakdown=True)
    timed, untimed = grid(spec.axes, base)
    prediction = PointPrediction(1.0, 0.9, 1.1, 1.0, 1.0, "gpu-bound", PointTimings(times, 0.0, 2))
    return SweepResult(spec, "cpu", "CPU", (PointResult(timed.index, timed.values, prediction),
                                            PointResult(untimed.index, untimed.values)), Status.DONE)


def _part(part: Part, variant: str, ms: float, calls: int, kernel_ms: float | None = None) -> KernelTime:
    return KernelTime(part, variant, ms, ms, ms, 3, calls, kernel_ms)


def test_each_part_is_a_beside_b_per_step_and_a_part_both_run_alike_is_left_out():
    """Apex's norm against LayerNorm, depth 2: the norm runs 5 times a step (twice a block, once at the end), 0.1 ms
    a call for LayerNorm (0.02 of kernels), 0.3 for Apex's; the optimizer, adam-fused in both, was timed once and
    could only read no difference: left out, as the GEMMs, which were not timed."""
    result = _sweep("adam-fused+layernorm+fp32,adam-fused+apex-fusedln+fp32", "gpt", (
        _part(Part.NORM, "layernorm@fp32", 0.1, 5, kernel_ms=0.02), _part(Part.NORM, "apex-fusedln@fp32", 0.3, 5),
        _part(Part.OPTIMIZER, "adam-fused", 0.5, 1)))
    rows = breakdown_rows(result)
    assert [r.part for r in rows] == [Part.NORM]                   # the second point has no prediction: no rows
    norm = rows[0]
    assert (norm.a_ms, norm.b_ms, norm.change_ms) == (pytest.approx(0.5), pytest.approx(1.5), pytest.approx(1.0))
    assert norm.a_kernel_ms == pytest.approx(0.1) and norm.b_kernel_ms is None   # not traced: none
    assert (norm.a_variant, norm.b_variant, norm.point) == ("layernorm@fp32", "apex-fusedln@fp32", "width=64")
    # the difference leads the row as shown, so a phone's first columns hold it
    assert list(norm.shown())[:3] == ["point", "part", "B - A ms/step alone"]
    assert norm.shown()["B - A ms/step alone"] == 1.0 and all(   # ms to two decimals (the page showed 22.4456)
        v is None or round(v, 2) == v for k, v in norm.shown().items() if "ms" in k)


def test_the_stages_are_taken_in_their_familys_form_and_a_part_timed_for_one_stage_only_keeps_its_row():
    """Liger's SwiGLU on llama: A's activation is llama's own SwiGLU (a key leaves the family's parts out, and read
    as a key it would be GELU); B's Liger kernel could not be timed here, so the row has A's figure and none for B."""
    result = _sweep("liger-swiglu", "llama", (_part(Part.ACTIVATION, "swiglu@bf16", 0.2, 2),
                                              _part(Part.ACTIVATION, "gelu@bf16", 9.0, 2)))
    (row,) = breakdown_rows(result)
    assert (row.part, row.a_variant, row.a_ms) == (Part.ACTIVATION, "swiglu@bf16", pytest.approx(0.4))
    assert (row.b_variant, row.b_ms, row.change_ms) == ("liger-swiglu@bf16", None, None)


def test_the_report_shows_the_breakdown_only_where_it_was_timed():
    result = _sweep("adam+layernorm+fp32,adam-fused+layernorm+fp32", "gpt", (
        _part(Part.OPTIMIZER, "adam", 2.0, 1), _part(Part.OPTIMIZER, "adam-fused", 0.5, 1)))
    page, title = render_html(result), html.escape(BREAKDOWN_TITLE)
    assert title in page and "adam-fused" in page and "-1.500" in page
    bare = replace(result, points=tuple(replace(p, prediction=None) for p in result.points))
    assert title not in render_html(bare)
