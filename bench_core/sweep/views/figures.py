"""A sweep's map: one axis, a line of speedups with their intervals, the crossover and its interval as a band;
two axes, a heatmap of the speedup with each point's source marked. On a line measured points are filled, predicted
ones hollow; on a heatmap a measured cell has a dark dot, a predicted one a light diamond ringed dark (the page's
caption says so). No streamlit: the page, the HTML report and the tests draw these."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from bench_core.results.chart_layout import RUN_COLORS, finish_figure
from bench_core.results.near_one import times
from bench_core.results.records import Status
from bench_core.sweep.core.crossover import speedup_text
from bench_core.sweep.core.records import PointResult, Source, SweepResult, crossovers
from bench_core.sweep.views.compare import sweep_name
from bench_core.sweep.views.rows import PREDICTED_MARK

MEASURED_COLOR, PREDICTED_COLOR, CROSS_COLOR = "#1565c0", "#ef6c00", "#6a1b9a"
MARKERS = {Source.MEASURED: "circle", Source.PREDICTED: "circle-open"}
# On a heatmap cell: measured a dark dot, predicted a light diamond ringed dark, so each shows on the deepest cell
# and the palest (an open dark circle vanished on a deep red cell). The dark dot has a hairline light edge: bare, it
# vanished on the deepest cells too (a deep cell's ratio, a large memory saving). With that edge two circles could be
# told apart by their fill alone, which a phone's small marker blurs; the shapes differ as well.
CELL_MARKERS: dict[Source, dict[str, Any]] = {Source.MEASURED: dict(symbol="circle", color="#212121",
                                                                    line=dict(width=1, color="white")),
                                                Source.PREDICTED: dict(symbol="diamond", color="white",
                                                                       line=dict(width=2, color="#212121"))}
HEIGHT = 440   # for a two-line title and no legend; finish_figure adds what the title's further lines and legend need
NAMES = {Source.MEASURED: "measured end to end", Source.PREDICTED: "predicted from kernels"}
CELL_NAMES = {Source.MEASURED: NAMES[Source.MEASURED], Source.PREDICTED: f"{NAMES[Source.PREDICTED]} (≈, dotted edge)"}
EDGE = 0.46   # a predicted cell's dotted edge, inset from the cell's half-width of 0.5 so neighbours' edges stay apart


def _layout(fig: go.Figure, title: str, x_title: str, y_title: str, log_x: bool) -> go.Figure:
    # the house layout: the top margin fits the wrapped title and the foot makes room for the legend (the sweep's
    # own layout put the legend over the x axis's title)
    finish_figure(fig, title, HEIGHT)
    fig.update_yaxes(autorange=True)   # speedups grow upwards (the stage charts list stages downwards)
    fig.update_xaxes(title_text=x_title, type="log" if log_x else "linear")
    fig.update_yaxes(title_text=y_title)
    return fig


def _text(result: SweepResult, p: PointResult, memory_first: bool = False) -> str:
    """A point's hover, a line a figure (one long line ran off a phone's screen); the plotted figure first."""
    est, memory = result.best_estimate(p), p.memory
    mem = f"peak memory {memory[0]:+.1%} ({memory[1]})" if memory else ""
    if est is None:
        why = result.not_run(p)
        speed = f"no speedup ({p.failure or p.prediction_note or (why.text if why else 'not measured')})"
    else:
        speed = f"{speedup_text(*est, result.decimals(p))}, {p.source}, {p.bound or 'bound unknown'}"
    lines = [p.label, mem, speed] if memory_first else [p.label, speed, mem]
    return "<br>".join(line for line in lines if line)


def _swept_ticks(fig: go.Figure, values: list[int]) -> go.Figure:
    """A line's x ticks at the swept values themselves (a log axis's own ticks read "2 3 … 9 100 2 …" between
    them), over the swept range, a little wider (with one point drawn, plotly's own range bunched the ticks)."""
    ticks = sorted(set(values))
    pad = 0.05 * max(math.log10(ticks[-1] / ticks[0]), 0.3)
    return fig.update_xaxes(tickvals=ticks, ticktext=[f"{v:,}" for v in ticks],
                            range=[math.log10(ticks[0]) - pad, math.log10(ticks[-1]) + pad])


def _wrapped(result: SweepResult) -> str:
    """The title "B vs A" on two lines: two stage keys side by side run past a phone's width."""
    return result.title.replace(" vs A ", "<br>vs A ", 1)


def _name(result: SweepResult, several: bool) -> str:
    return sweep_name(result) if several else ""


def sweep_line(result: SweepResult | Sequence[SweepResult]) -> go.Figure:
    """The speedup along the sweep's first axis, ×1.00 drawn across, each crossover with its interval as a band.
    Several sweeps of one comparison (`compare.same_map`), from other GPUs say, share the chart, one colour each."""
    results = [result] if isinstance(result, SweepResult) else list(result)
    several = len(results) > 1
    axis = results[0].spec.axes[0].name
    fig = go.Figure()
    shown: list[float] = []
    for n, res in enumerate(results):
        color = RUN_COLORS[n % len(RUN_COLORS)] if several else None
        label = _name(res, several)
        for source in (Source.MEASURED, Source.PREDICTED):
            pts = [p for p in res.points if p.source == source and p.estimate]
            ests = [e for p in pts if (e := res.best_estimate(p))]
            shown += [v for e in ests for v in e]   # the y ticks span every figure drawn, intervals included
            if not pts:
                continue
            fig.add_trace(go.Scatter(
                x=[p.value(axis) for p in pts], y=[e[0] for e in ests], mode="markers",
                name=f"{label} {NAMES[source]}".strip(), hovertext=[_text(res, p) for p in pts], hoverinfo="text",
                marker=dict(symbol=MARKERS[source], size=11, line=dict(width=2), color=color or (
                    MEASURED_COLOR if source == Source.MEASURED else PREDICTED_COLOR)),
                error_y=dict(type="data", symmetric=False, array=[e[2] - e[0] for e in ests],
                             arrayminus=[e[0] - e[1] for e in ests])))
        line = sorted((p for p in res.points if p.estimate), key=lambda p: p.value(axis))
        if len(res.spec.axes) == 1 and line:
            fig.add_trace(go.Scatter(x=[p.value(axis) for p in line], y=[p.estimate[0] for p in line if p.estimate],
                                     mode="lines", name=f"{label} best figure at each point".strip(),
                                     line=dict(color=color or "#9e9e9e")))
        for c in crossovers(res):
            # each crossing's interval, an open side ending at the last point with a figure (Crossover.shaded)
            for lo, hi in c.shaded:
                fig.add_vrect(x0=lo, x1=hi, fillcolor=color or CROSS_COLOR, opacity=0.12, line_width=0)
            # the sentence in the hover and beside the chart: as a legend entry it ran off a phone's screen
            # a crossing no interval places gets no marker: a mark at its value read as a place
            marked = [x.value for x in c.crossings if x.located]
            fig.add_trace(go.Scatter(x=marked, y=[1.0] * len(marked), mode="markers",
                                     hovertext=[f"crossover: {c.text}"] * len(marked), hoverinfo="text",
                                     name=f"{label} crossover, its interval shaded".strip(),
                                     marker=dict(symbol="x", size=13, color=color or CROSS_COLOR)))
    fig.add_hline(y=1.0, line=dict(color="#757575", dash="dot"))
    where = " and ".join(dict.fromkeys(r.gpu or r.device for r in results))
    title = f"{_wrapped(results[0])}<br><sup>speedup of B over A by {axis} on {where}</sup>"
    # speedups on a log scale, as ratios are (×0.5 and ×2 equally far from ×1.00): a CPU point's interval up to
    # ×8.87 squashed every other point into the bottom of a linear axis. Ticks named as speedups: plotly's own
    # log ticks read "2, 10, 5, 2, 1, 5, 2, 0.1", with 20, 2 and 0.2 all written "2".
    ticks = speedup_ticks(min(shown, default=1.0), max(shown, default=1.0))
    fig.update_yaxes(type="log", tickvals=ticks, ticktext=[f"×{t:g}" for t in ticks])
    return _swept_ticks(_layout(fig, title, axis, "speedup (×)", log_x=True), [p.value(axis) for r in results
                                                                                   for p in r.points])


# Where a cell's source marker sits, off its centre so it never covers the figure, and far enough inside that a
# 30 px cell (a phone's) still holds the whole marker (at 0.38 it straddled the cell's edge).
CORNER = (-0.28, 0.28)
EMPTY_CELL = "#d6d6d6"
SPEEDUP_TICKS = (0.25, 0.5, 0.7, 1.0, 1.4, 2.0, 4.0)   # the colour bar's ticks, as speedups (its scale is log2)
# A line's y ticks, coarse to fine: the coarsest ladder that puts three ticks inside the drawn figures (a CPU line
# from ×1.02 to ×1.07 had one tick, "×1", and its points could be read only by hovering).
TICK_LADDERS = ((0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 0.7, 1.0, 1.4, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0),
                (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4, 1.6, 2.0, 2.5, 3.0),
                (0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.4, 1.5),
                (0.96, 0.97, 0.98, 0.99, 1.0, 1.01, 1.02, 1.03, 1.04, 1.05, 1.06, 1.07, 1.08))


MAX_TICKS = 6


def speedup_ticks(low: float, high: float) -> list[float]:
    """Ticks for speedups drawn from `low` to `high`: the coarsest ladder with three inside, else the finest's,
    with a tick either side of the range where one is near."""
    for ladder in TICK_LADDERS:
        inside = [t for t in ladder if low <= t <= high]
        if len(inside) >= 3:
            step = math.ceil(len(inside) / MAX_TICKS)   # a finer ladder can hold a dozen: every other, ×1 kept
            return inside[inside.index(1.0) % step if 1.0 in inside else 0::step]
    ladder = TICK_LADDERS[-1]
    return [t for t in ladder if low / 1.03 <= t <= high * 1.03] or [1.0]


def _grid_axes(fig: go.Figure, xs: Sequence[int], ys: Sequence[int]) -> go.Figure:
    """A heatmap's cells at index positions, labelled with the axis values: one cell a value, evenly spaced (as
    numbers, batch 2 and 4 drew cells spanning 1 to 5)."""
    # the range the cells span: the corner markers' padding drew a grey frame round them
    fig.update_xaxes(tickvals=list(range(len(xs))), ticktext=[str(v) for v in xs], showgrid=False, zeroline=False,
                     range=[-0.5, len(xs) - 0.5], autorange=False)
    fig.update_yaxes(tickvals=list(range(len(ys))), ticktext=[str(v) for v in ys], showgrid=False, zeroline=False,
                     range=[-0.5, len(ys) - 0.5], autorange=False)
    # a cell without a figure shows the grey behind it (white read as a change of 0); no padding round the cells,
    # which the page's theme sets and the grey filled as a frame
    return fig.update_layout(plot_bgcolor=EMPTY_CELL, margin=dict(pad=0))


def _failure_cell(p: PointResult) -> str:
    """A failed point's cell: what ended its run, in the words a cell has room for."""
    status = p.measurement.status if p.measurement else None
    return {Status.OOM: "out of<br>memory", Status.TIMEOUT: "timed out"}.get(status, "failed") if status else ""


def _cells(fig: go.Figure, cells: dict[tuple[int, int], tuple[float, str, str, Source]], shape: tuple[int, int],
           colorbar: dict, empty_text: str, failed: dict[tuple[int, int], tuple[str, str]] | None = None,
           reverse: bool = False) -> go.Figure:
    """A heatmap's cells, (row, column) -> (value, text, hover, source), on a colour range symmetric about 0. A
    predicted cell has the colour of its value, as a measured one does (drawn paler, a predicted ×0.59 read
    milder than its measured ×0.63 neighbour: on a diverging scale pale means near ×1.00); it is told apart by an
    "≈" before its figure and a dotted edge. `empty_text` fills cells with no figure."""
    rows, cols = shape
    bound = max((abs(v[0]) for v in cells.values()), default=1.0) or 1.0
    z: list[list[float | None]] = [[None] * cols for _ in range(rows)]
    text = [[empty_text] * cols for _ in range(rows)]
    hover = [[""] * cols for _ in range(rows)]
    for (i, j), (said, tip) in (failed or {}).items():   # grey, saying what ended its run (it read blank)
        text[i][j], hover[i][j] = said, tip
    for (i, j), (value, label, tip, source) in cells.items():
        z[i][j], hover[i][j] = value, tip
        text[i][j] = (PREDICTED_MARK if source == Source.PREDICTED else "") + label
        if source == Source.PREDICTED:   # dark dots on a light line: the edge shows on the deepest cell and the palest
            for line in (dict(color="white", width=3), dict(color="#212121", width=1.5, dash="dot")):
                fig.add_shape(type="rect", x0=j - EDGE, x1=j + EDGE, y0=i - EDGE, y1=i + EDGE, layer="above",
                              line=line)
    # the colour bar across the top, over the plot's width: upright at the side it took a phone's plot from 358 px
    # to 230; the cells' figures at 13 px with a shadow, readable on a mid-blue cell too (a new user's pass)
    colorbar = {**colorbar, "orientation": "h", "x": 0, "xanchor": "left", "xref": "paper", "y": 1.0,
                "yanchor": "bottom", "yref": "paper", "len": 1, "thickness": 10, "ypad": 6,
                "title": dict(text=colorbar["title"], side="top")}
    fig.add_trace(go.Heatmap(x=list(range(cols)), y=list(range(rows)), z=z, text=text, texttemplate="%{text}",
                             textfont=dict(size=13, shadow="auto"), hovertext=hover, hoverinfo="text", zmid=0,
                             zmin=-bound, zmax=bound, colorscale="RdBu", reversescale=reverse, colorbar=colorbar,
                             name="cells"))
    return fig


COLORBAR_PX = 56   # the colour bar above the plot: its title, bar and tick labels
X_TITLE_GAP_PX = 30   # from the plot's foot to the x title's top: the tick labels (8 px down, 16 px tall) and air
X_TITLE_ROOM_PX = 24  # the foot's margin grown by as much as the title was moved down, so the legend clears it


def _room_for_colorbar(fig: go.Figure) -> go.Figure:
    """The height grown by the colour bar above the plot (plotly widens the top margin for it). The x axis's title
    is written under its tick labels as a note: with the bar on top, plotly drew the title over the labels. Its top
    is pinned below them: anchored by its foot (plotly's default here), a 390 px phone drew it over the labels."""
    title = fig.layout.xaxis.title.text
    fig.update_xaxes(title_text=None)
    fig.add_annotation(text=title, xref="paper", x=0.5, yref="paper", y=0, yanchor="top", yshift=-X_TITLE_GAP_PX,
                       showarrow=False, font=dict(size=14), name="x title")
    return fig.update_layout(height=fig.layout.height + COLORBAR_PX + X_TITLE_ROOM_PX,
                             margin_b=fig.layout.margin.b + X_TITLE_ROOM_PX)


def _colour_value(result: SweepResult, p: PointResult, est: tuple[float, float, float]) -> float:
    """log2 of the point's speedup, or 0 (neutral) where its interval as shown holds ×1.00."""
    est = result.best_estimate(p) or est
    return 0.0 if est[1] <= 1.0 <= est[2] else math.log2(est[0])


def sweep_heatmap(result: SweepResult) -> go.Figure:
    """Two axes: colour is log2 of the speedup, centred on ×1.00, the figure written in each cell, a predicted
    cell paler than a measured one; a marker in the cell's corner says measured or predicted."""
    ax, ay = (a.name for a in result.spec.axes[:2])
    xs, ys = list(result.spec.axes[0].values), list(result.spec.axes[1].values)
    # each cell's figure with its row's decimals (results.near_one): a cell read ×1.00 where the table read ×1.003
    # a cell whose interval holds ×1.00 is drawn neutral (×1.00's colour), its figure still written: batch 4's
    # ×0.67 (0.42–1.07) was deep red, as if it measurably cost
    cells = {(ys.index(p.value(ay)), xs.index(p.value(ax))): (_colour_value(result, p, p.estimate),
                                                              times(p.estimate[0], result.decimals(p)),
                                                              _text(result, p), p.source)
             for p in result.points if p.estimate and p.source}
    bound = max((abs(v[0]) for v in cells.values()), default=1.0) or 1.0
    ticks = [t for t in SPEEDUP_TICKS if abs(math.log2(t)) <= bound + 1e-9]
    colorbar = dict(title="B over A", thickness=12, tickvals=[math.log2(t) for t in ticks],
                    ticktext=[f"×{t:g}" for t in ticks])
    fig = _cells(go.Figure(), cells, (len(ys), len(xs)), colorbar, "",
                 {(ys.index(p.value(ay)), xs.index(p.value(ax))): (_failure_cell(p), _text(result, p))
                  for p in result.points if p.failure})
    for source in (Source.MEASURED, Source.PREDICTED):
        pts = [p for p in result.points if p.source == source]
        if pts:
            fig.add_trace(go.Scatter(x=[xs.index(p.value(ax)) + CORNER[0] for p in pts],
                                     y=[ys.index(p.value(ay)) + CORNER[1] for p in pts],
                                     mode="markers", name=CELL_NAMES[source],
                                     hovertext=[_text(result, p) for p in pts],
                                     hoverinfo="text", marker=dict(size=11, **CELL_MARKERS[source])))
    title = f"{_wrapped(result)}<br><sup>speedup of B over A on {result.gpu or result.device}</sup>"
    fig = _room_for_colorbar(_grid_axes(_layout(fig, title, ax, ay, log_x=False), xs, ys))
    return fig.update_layout(showlegend=True)   # with one source only, plotly would hide the markers' key


def sweep_figure(result: SweepResult) -> go.Figure:
    return sweep_heatmap(result) if len(result.spec.axes) == 2 else sweep_line(result)


def peak_memory_map(result: SweepResult) -> go.Figure:
    """B's peak memory against A's at each point, measured where the point ran end to end, else predicted from its
    shallow steps' peaks (PointResult.memory), each marked as the speedup map marks it: a line along one axis, a
    heatmap over two; less memory is blue."""
    known = [(p, memory) for p in result.points if (memory := p.memory) is not None]
    axes = result.spec.axes
    title = (f"{_wrapped(result)}<br><sup>peak memory of B against A on {result.gpu or result.device} "
             "(below 0%: B needs less)</sup>")
    if len(axes) == 1:
        name = axes[0].name
        line = sorted(known, key=lambda k: k[0].value(name))
        fig = go.Figure(go.Scatter(x=[p.value(name) for p, _ in line], y=[100 * m[0] for _, m in line],
                                   mode="lines", name="peak memory change", line=dict(color="#9e9e9e"),
                                   hoverinfo="skip"))
        for source in (Source.MEASURED, Source.PREDICTED):
            pts = [(p, m) for p, m in known if m[1] == source]
            if pts:
                fig.add_trace(go.Scatter(x=[p.value(name) for p, _ in pts], y=[100 * m[0] for _, m in pts],
                                         mode="markers", name=NAMES[source],
                                         hovertext=[_text(result, p, memory_first=True) for p, _ in pts],
                                         hoverinfo="text", marker=dict(symbol=MARKERS[source], size=11,
                                                                       line=dict(width=2), color=MEASURED_COLOR if
                                                                       source == Source.MEASURED else
                                                                       PREDICTED_COLOR)))
        fig.add_hline(y=0.0, line=dict(color="#757575", dash="dot"))
        return _swept_ticks(_layout(fig, title, name, "peak memory change (%)", log_x=True),
                            [p.value(name) for p in result.points])
    cols, rows = list(axes[0].values), list(axes[1].values)
    cells = {(rows.index(p.value(axes[1].name)), cols.index(p.value(axes[0].name))):
             (100 * memory[0], f"{100 * memory[0]:+.1f}%", _text(result, p, memory_first=True), memory[1])
             for p, memory in known}
    # "–" in a cell without a figure: a long word there shrank every cell's text
    colorbar = dict(title="B vs A", thickness=12, ticksuffix="%")
    fig = _cells(go.Figure(), cells, (len(rows), len(cols)), colorbar, "–", reverse=True)
    for source in (Source.MEASURED, Source.PREDICTED):
        found = [p for p, m in known if m[1] == source]
        if found:
            fig.add_trace(go.Scatter(x=[cols.index(p.value(axes[0].name)) + CORNER[0] for p in found],
                                     y=[rows.index(p.value(axes[1].name)) + CORNER[1] for p in found],
                                     mode="markers", name=CELL_NAMES[source],
                                     hovertext=[_text(result, p, memory_first=True) for p in found],
                                     hoverinfo="text", marker=dict(size=11, **CELL_MARKERS[source])))
    fig = _room_for_colorbar(_grid_axes(_layout(fig, title, axes[0].name, axes[1].name, log_x=False), cols, rows))
    return fig.update_layout(showlegend=True)


def has_memory(result: SweepResult) -> bool:
    return any(p.memory is not None for p in result.points)
