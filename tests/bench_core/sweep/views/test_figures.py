"""The sweep's figures (sweep.views.figures): the line with measured and predicted points and the crossing's band,
two GPUs' sweeps on one chart, the heatmap centred on ×1.00, the peak-memory map."""
import math
from dataclasses import replace

import pytest

from bench_core.results.chart_layout import LAYOUT, LEGEND_ROW_PX
from bench_core.sweep.core.records import (
    crossovers,
)
from bench_core.sweep.core.spec import (
    parse_comparison,
)
from bench_core.sweep.views.figures import sweep_figure
from helpers import plain_title, tiny_sweep


def test_the_line_draws_measured_filled_predicted_hollow_and_the_crossover_band():
    fig = sweep_figure(tiny_sweep())
    by_name = {t.name: t for t in fig.data}
    assert by_name["measured end to end"].marker.symbol == "circle"
    assert by_name["predicted from kernels"].marker.symbol == "circle-open"
    assert list(by_name["measured end to end"].x) == [128, 512]
    (cross,) = [t for t in fig.data if t.name.startswith("crossover")]
    c = crossovers(tiny_sweep())[0]
    assert list(cross.x) == [pytest.approx(c.value)]
    bands = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(bands) == 1 and bands[0].x0 == pytest.approx(c.low if c.low is not None else 64)
    # the crossing's sentence in its hover, a short legend entry (the sentence ran off a phone's legend)
    assert cross.name == "crossover, its interval shaded" and cross.hovertext[0] == f"crossover: {c.text}"
    # speedups as ratios, on a log axis; ticks at the swept values, not a log axis's "2 3 … 9"
    assert fig.layout.yaxis.type == "log" and list(fig.layout.xaxis.tickvals) == [64, 128, 256, 512]
    # named as speedups, each once (plotly's own read "2, 10, 5, 2, 1"), over the points' intervals (×0.5 to ×2.2)
    assert list(fig.layout.yaxis.ticktext) == ["×0.5", "×0.7", "×1", "×1.4", "×2"]
    # a narrow range gets a finer ladder (a CPU line from ×1.02 to ×1.07 had one tick), thinned with ×1 kept
    from bench_core.sweep.views.figures import MAX_TICKS, speedup_ticks
    assert speedup_ticks(1.0, 1.1) == [1.0, 1.05, 1.1] and speedup_ticks(0.97, 1.06) == [0.98, 1.0, 1.02, 1.04, 1.06]
    assert all(3 <= len(speedup_ticks(lo, hi)) <= MAX_TICKS and (not lo <= 1 <= hi or 1.0 in speedup_ticks(lo, hi))
               for lo, hi in [(0.05, 9.0), (0.3, 3.0), (0.59, 1.03), (1.2, 1.5), (0.98, 1.07)])
    assert fig.layout.xaxis.range[0] < math.log10(64) and fig.layout.xaxis.range[1] > math.log10(512)


def test_sweeps_of_one_comparison_from_two_gpus_share_a_line_chart():
    from dataclasses import replace

    from bench_core.sweep.views.compare import same_map
    from bench_core.sweep.views.figures import sweep_line
    when = "2026-12-05T04:07:12+00:00"
    h200, a100 = replace(tiny_sweep(), gpu="NVIDIA H200", sweep_id="aaaaaa000000", created_at=when), \
        replace(tiny_sweep(), gpu="NVIDIA A100", sweep_id="bbbbbb000000", created_at=when)
    other = replace(h200, spec=replace(h200.spec, comparison=parse_comparison("adam-fused", "gpt")))
    assert same_map(h200, a100) and not same_map(h200, other)
    fig = sweep_line([h200, a100])
    names = [t.name for t in fig.data]
    assert "NVIDIA H200 12-05 04:07 (aaaaaa) measured end to end" in names
    assert "NVIDIA A100 12-05 04:07 (bbbbbb) measured end to end" in names
    colors = {t.name.split(" 12-05")[0]: t.marker.color for t in fig.data if t.name.endswith("end to end")}
    assert colors["NVIDIA H200"] != colors["NVIDIA A100"]
    assert "NVIDIA H200 and NVIDIA A100" in plain_title(fig)


def test_two_axes_draw_a_heatmap_centred_on_one():
    fig = sweep_figure(tiny_sweep(two_axes=True))
    heat = fig.data[0]
    assert heat.type == "heatmap" and heat.zmid == 0 and heat.zmin == -heat.zmax
    # a value has one colour, measured or predicted (a paler predicted ×0.59 read milder than a measured ×0.63);
    # a predicted cell says "≈" and has a dotted edge, and only it
    assert heat.z[0][1] == pytest.approx(math.log2(1.0)) and heat.text[0][1] == "×1.00"      # measured at (128, 2)
    assert heat.z[0][0] == pytest.approx(math.log2(0.5 * 1.1)) and heat.text[0][0] == "≈×0.55"  # predicted (64, 2)
    edged = {((s.x0 + s.x1) / 2, (s.y0 + s.y1) / 2) for s in fig.layout.shapes if s.line.dash == "dot"}
    marked = {(j, i) for i, row in enumerate(heat.text) for j, t in enumerate(row) if t.startswith("≈")}
    assert edged == marked and (0, 0) in marked and (1, 0) not in marked
    assert all(s.x1 - s.x0 < 1 for s in fig.layout.shapes if s.line.dash == "dot")   # neighbours' edges apart
    assert {t.name for t in fig.data[1:]} == {"measured end to end", "predicted from kernels (≈, dotted edge)"}
    # one evenly spaced cell a value (as numbers, batch 2 and 4 drew cells from 1 to 5), labelled with the value
    assert list(heat.x) == [0, 1] and list(fig.layout.xaxis.ticktext) == ["64", "128"]
    # the plot is the cells and nothing round them: the grey behind an empty cell framed them where padded
    assert list(fig.layout.xaxis.range) == [-0.5, 1.5] and fig.layout.margin.pad == 0
    # the colour bar across the top (upright at the side it halved a phone's plot), the x title under the ticks
    bar = heat.colorbar
    assert bar.orientation == "h" and bar.y == 1.0 and bar.yanchor == "bottom" and bar.title.text == "B over A"
    assert fig.layout.xaxis.title.text is None and [a.text for a in fig.layout.annotations] == ["width"]
    # each marker in its cell's corner, off the figure written at the centre
    measured = next(t for t in fig.data[1:] if t.name == "measured end to end")
    assert all(0 < abs(x - round(x)) < 0.5 for x in measured.x) and all(0 < abs(y - round(y)) < 0.5
                                                                       for y in measured.y)
    # measured a dark dot with a light edge, predicted a light diamond ringed dark: each shows on the deepest and
    # the palest cell alike, and the shapes differ where a phone's small marker blurs the fill
    predicted = next(t for t in fig.data[1:] if t.name == "predicted from kernels (≈, dotted edge)")
    assert measured.marker.color == "#212121" and measured.marker.line.color == "white"
    assert predicted.marker.color == "white" and predicted.marker.line.color == "#212121"
    assert measured.marker.symbol != predicted.marker.symbol
    assert fig.layout.showlegend   # the markers' key, even where every point has one source
    # the legend at the foot has its own rows under the axis title, one an entry (a phone's worst case): in the
    # sweep's own layout it sat over the x axis's title
    assert fig.layout.margin.b >= LAYOUT["margin"]["b"] + 2 * LEGEND_ROW_PX
    # the colour bar reads in speedups, and each cell's hover carries its interval and bound
    assert "×1" in heat.colorbar.ticktext
    assert heat.hovertext[0][1].startswith("width=128, batch_size=2<br>×1.00 (0.90–1.10)")
    # a prediction without spread (an older file's launch-bound one) says so rather than "(0.55–0.55)"
    # (and no point measured, so no error to widen it by)
    bare = tiny_sweep(two_axes=True)
    bare = replace(bare, points=tuple(replace(p, measurement=None) for p in bare.points))
    first = bare.points[0]
    flat = bare.with_point(replace(first, prediction=replace(first.prediction, low=0.55, high=0.55)))
    assert "×0.55 (no spread measured), predicted" in sweep_figure(flat).data[0].hovertext[0][0]


def test_the_peak_memory_map_draws_measured_points_and_predicted_ones_marked_as_such():
    """Points 2 and 4 measured -30%; point 1 predicted -10% from its shallow steps' peaks (point 3's were not
    measured: no figure). The measured figure is the one shown where a point has both."""
    from bench_core.sweep.views.figures import peak_memory_map
    result = tiny_sweep()
    first, second = result.points[:2]
    result = result.with_point(replace(first, prediction=replace(first.prediction, a_peak_mib=100.0, b_peak_mib=90.0)))
    result = result.with_point(replace(second, prediction=replace(second.prediction, a_peak_mib=100.0,
                                                                  b_peak_mib=99.0)))
    line, measured, predicted = peak_memory_map(result).data
    assert list(line.x) == [64, 128, 512] and list(line.y) == pytest.approx([-10.0, -30.0, -30.0])
    assert measured.name == "measured end to end" and list(measured.x) == [128, 512]
    assert predicted.name == "predicted from kernels" and list(predicted.x) == [64]
    assert predicted.marker.symbol == "circle-open" and "peak memory -10.0% (predicted)" in predicted.hovertext[0]
    heat = peak_memory_map(tiny_sweep(two_axes=True)).data
    assert heat[0].type == "heatmap" and heat[0].z[0][0] is None and heat[0].z[0][1] == pytest.approx(-30.0)
    assert heat[0].text[0][0] == "–" and heat[0].text[0][1] == "-30.0%"   # an empty cell said so, not "%"
    # the memory leads its hover, and an empty cell shows the grey behind it, not white (which read as 0%)
    assert heat[0].hovertext[0][1].split("<br>")[:2] == ["width=128, batch_size=2", "peak memory -30.0% (measured)"]
    assert peak_memory_map(tiny_sweep(two_axes=True)).layout.plot_bgcolor not in (None, "white", "#ffffff")
    assert [t.name for t in heat[1:]] == ["measured end to end"]
