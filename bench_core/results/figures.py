"""Pure Plotly figure builders, shared by the dashboard pages and the CLI's HTML report.

Each takes one RunSummary or several (a History comparison) and returns a new go.Figure. Every figure reads the
summaries: nothing here computes a statistic. Stages are rows (horizontal bars, full names); several runs are
colours, lined up by stage key. `not_applicable` says in one line why a chart has nothing to show.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import plotly.graph_objects as go

from bench_core.measure.breakdown import CATEGORIES
from bench_core.measure.proof import CELL_STATES, KEY_KERNELS
from bench_core.results.chart_layout import (
    BOUND_COLORS,
    BUSY_TEXT_INSIDE,
    CATEGORY_COLORS,
    CELL_COLORS,
    CELL_MARKS,
    CHAR_PX,
    DASH_KEYS,
    DASHES,
    FAILED,
    FASTER,
    NEUTRAL,
    NOTE_CHARS,
    NOTE_PX,
    RUN_COLORS,
    SLOWER,
    UNAVAILABLE,
    as_summaries,
    empty_figure,
    figure_height,
    finish_figure,
    room_for_labels,
    run_name,
    stage_keys,
    wrap_text,
)
from bench_core.results.parity import first_round_losses, loss_parity
from bench_core.results.summary import RunSummary, StageSummary


def _interval_words(summaries: Sequence[RunSummary]) -> str:
    """What the bars' intervals cover, as the stages say it (StageSummary.interval)."""
    scopes = {s.interval.text for summary in summaries for s in summary.stages if s.interval is not None}
    return f"95% interval {scopes.pop()}" if len(scopes) == 1 else "95% interval (each bar's scope in its hover)"


def speedup_bars(runs: RunSummary | Sequence[RunSummary]) -> go.Figure:
    summaries = as_summaries(runs)
    several = len(summaries) > 1
    fig = go.Figure()
    for n, summary in enumerate(summaries):
        y, x, colors, text, lo, hi, hover = [], [], [], [], [], [], []
        for s in summary.stages:
            y.append(s.key)
            if s.ranked:
                x.append(s.speedup)
                colors.append(RUN_COLORS[n % len(RUN_COLORS)] if several else FASTER if (s.speedup or 0) >= 1
                              else SLOWER)
                ci = s.speedup_ci
                text.append("")  # drawn beyond the error bar, below
                # across processes the point is its interval's centre; within one, the medians' ratio it resamples
                lo.append(max(0.0, (s.speedup or 0) - ci[0]) if ci else 0)
                hi.append(max(0.0, ci[1] - (s.speedup or 0)) if ci else 0)
            else:
                x.append(0)
                colors.append(UNAVAILABLE if s.status.value == "unavailable" else FAILED)
                text.append("fallback: not counted" if s.verdict == "fallback" and s.ok else
                            f"{s.status.value} (partial)" if s.partial else s.status.value)
                lo.append(0)
                hi.append(0)
            hover.append(s.reason or "; ".join(s.warnings) or s.label)
        fig.add_trace(go.Bar(y=y, x=x, orientation="h", marker_color=colors, text=text, textposition="outside",
                             cliponaxis=False, hovertext=hover, name=run_name(summary) if several else "speedup",
                             error_x=dict(type="data", array=hi, arrayminus=lo, visible=True, color="#424242"),
                             showlegend=several, offsetgroup=str(n)))
        # ranked stages' numbers sit beyond their error bar's upper end, never under it; the point alone (the bar
        # draws the interval, the hover and the table say it): the whole text runs off a phone's plot
        ranked = [(k, (v or 0) + h, st) for k, v, h, st in zip(y, x, hi, summary.stages, strict=True) if st.ranked]
        fig.add_trace(go.Scatter(y=[k for k, _, _ in ranked], x=[e for _, e, _ in ranked],
                                 text=[f" {st.speedup_point_text}" for _, _, st in ranked], mode="text",
                                 textposition="middle right", cliponaxis=False, showlegend=False, orientation="h",
                                 hovertext=[st.speedup_text for _, _, st in ranked], hoverinfo="text",
                                 offsetgroup=str(n)))
    fig.update_layout(scattermode="group")
    fig.add_vline(x=1.0, line_dash="dot", line_color="#616161")
    base = summaries[0].baseline_key if summaries else None
    title = f"Speedup vs {base}<br><sup>median step times, {_interval_words(summaries)}</sup>" if base else "Speedup"
    note = next((s.baseline_note for s in summaries if s.baseline_note), None)
    finish_figure(fig, title + (f"<br><sup>{note}</sup>" if note else ""),
                  figure_height(len(stage_keys(summaries)), len(summaries)), xaxis_title="× faster", barmode="group")
    fig.update_yaxes(categoryorder="array", categoryarray=stage_keys(summaries))
    room_for_labels(fig)
    return fig if summaries and summaries[0].stages else empty_figure(fig, "no stages yet")


def iteration_times(runs: RunSummary | Sequence[RunSummary]) -> go.Figure:
    summaries = as_summaries(runs)
    several = len(summaries) > 1
    fig = go.Figure()
    for n, summary in enumerate(summaries):
        for s in summary.stages:
            times = s.result.times_ms
            if not times:
                continue
            color = FAILED if s.partial else RUN_COLORS[n % len(RUN_COLORS)]
            fig.add_trace(go.Box(x=list(times), y=[s.key] * len(times), orientation="h", boxpoints="all",
                                 jitter=0.4, pointpos=0, name=run_name(summary) if several else s.key,
                                 legendgroup=str(n), showlegend=several and s is summary.stages[0],
                                 marker=dict(size=4, color=color), line=dict(width=1.5),
                                 hovertext=f"median {s.timing.median_ms:.2f} ms" + (" · PARTIAL" if s.partial else "")))
    finish_figure(fig, "Step time per stage<br><sup>box p25–p75, line median; red: partial, not a result</sup>",
            figure_height(len(stage_keys(summaries)), len(summaries)), xaxis_title="ms", boxmode="group")
    return fig if fig.data else empty_figure(fig, "waiting for the first timed iteration")


def _bars(runs: list[RunSummary], value: Callable[[StageSummary], float | None], fmt: str, title: str,
          axis: str, label: Callable[[StageSummary], str | None] | None = None) -> go.Figure:
    several = len(runs) > 1
    fig = go.Figure()
    for n, summary in enumerate(runs):
        rows = [(s, value(s)) for s in summary.stages if value(s) is not None and s.ok]
        fig.add_trace(go.Bar(y=[s.key for s, _ in rows], x=[v for _, v in rows], orientation="h",
                             marker_color=RUN_COLORS[n % len(RUN_COLORS)], name=run_name(summary),
                             text=[(label and label(s)) or format(v, fmt) for s, v in rows],
                             textposition="outside", cliponaxis=False,
                             showlegend=several))
    finish_figure(fig, title, figure_height(len(stage_keys(runs)), len(runs)), xaxis_title=axis, barmode="group")
    room_for_labels(fig)
    return fig if any(len(t.x) for t in fig.data) else empty_figure(fig, "reported when a stage finishes ok")


def peak_memory(runs: RunSummary | Sequence[RunSummary]) -> go.Figure:
    """The CUDA allocator's peak; on CPU the worker's peak RSS, titled as such (the CLI's Peak RSS column)."""
    summaries = as_summaries(runs)
    title = ("Peak GPU memory per stage<br><sup>CUDA allocator, after warm-up</sup>"
             if any(s.run.device == "cuda" for s in summaries) else
             "Peak RSS per stage<br><sup>the worker's resident host memory</sup><br><sup>the whole process, "
             "not the model alone</sup>")
    return _bars(summaries, lambda s: s.peak_mem_mib, ",.0f", title, "MiB")


def throughput(runs: RunSummary | Sequence[RunSummary]) -> go.Figure:
    return _bars(as_summaries(runs), lambda s: s.rates.tokens_per_s, ",.0f", "Throughput (ok stages)", "tokens/s")


def mfu(runs: RunSummary | Sequence[RunSummary]) -> go.Figure:
    return _bars(as_summaries(runs), lambda s: None if s.rates.mfu is None else 100 * s.rates.mfu, ".1f",
                 "Model FLOPs utilisation<br><sup>of the dense datasheet peak; FP8 stages: of the BF16 peak, "
                 "same model FLOPs</sup>", "% of peak", label=lambda s: s.mfu_text)


def loss_curves(runs: RunSummary | Sequence[RunSummary]) -> go.Figure:
    """Each stage's first-process losses at their training steps (its warm-up steps, then its timed ones), with the
    parity verdict in words under it. Drawn by timed step, stages with different warm-ups sat apart by that offset
    and read as a loss gap (a new user's pass); a curve hidden under an equal one shows through its dashes."""
    summaries = as_summaries(runs)
    fig = go.Figure()
    keys: dict[str, str] = {}   # each curve's name -> its colour
    for summary in summaries:
        for s in summary.stages:
            losses = first_round_losses(s)
            if losses:
                name = s.key if len(summaries) == 1 else f"{s.key} · {summary.run.run_id[:6]}"
                keys[name] = RUN_COLORS[len(keys) % len(RUN_COLORS)]
                first = (s.result.warmup_steps or 0) + 1
                fig.add_trace(go.Scatter(y=list(losses), x=list(range(first, first + len(losses))), name=name,
                                         mode="lines", showlegend=False, line=dict(
                                             color=keys[name], width=2, dash=DASHES[(len(keys) - 1) % len(DASHES)])))
    # under the chart, each curve's key in its colour with its parity verdict wrapped under it: the legend and the
    # verdict in one list (annotations do not wrap by themselves, so the words are wrapped to a phone's width)
    verdicts = {(f"{p.key} · {summary.run.run_id[:6]}" if len(summaries) > 1 else p.key): p.text.split(": ", 1)[1]
                for summary in summaries for p in loss_parity(summary)}
    lines = []
    for n, (name, color) in enumerate(keys.items()):
        lines.append(f"<span style='color:{color}'>{DASH_KEYS[n % len(DASHES)]}</span> {name}")
        lines += [f"    {line}" for line in wrap_text(verdicts.get(name, "the reference" if verdicts else ""),
                                                    NOTE_CHARS) if line]
    notes = NOTE_PX * len(lines)
    finish_figure(fig, "Loss per timed step (first process)<br><sup>same seed, init and batch; each at its training "
            "step, after its warm-up</sup><br><sup>parity compares the same training step, against a rounding "
            "bound</sup>", 70 + 250 + 60 + notes, xaxis_title="training step", yaxis_title="loss",
            yaxis=dict(gridcolor="#ebf0f8", automargin=True),
            margin=dict(l=10, r=30, t=0, b=60 + notes))   # a 250 px plot area, the notes under its axis title
    if lines:
        fig.add_annotation(text="<br>".join(lines), showarrow=False, align="left", x=0, xanchor="left",
                           xref="paper", y=-60 / 250, yref="paper", yanchor="top", font=dict(size=11))
    return fig if fig.data else empty_figure(fig, "waiting for the first timed iteration")


def time_breakdown(runs: RunSummary | Sequence[RunSummary]) -> go.Figure:
    """Where a step's time goes, by category (GPU kernel ms per step on CUDA, CPU op self time on CPU)."""
    summaries = as_summaries(runs)
    several = len(summaries) > 1
    rows = [(summary, s) for summary in summaries for s in summary.stages if s.profile]
    labels = [f"{s.key} · {summary.run.run_id[:6]}" if several else s.key for summary, s in rows]
    fig = go.Figure()
    for category in CATEGORIES:
        values = [s.profile.breakdown_ms.get(category, 0.0) if s.profile else 0.0 for _, s in rows]
        if any(values):
            fig.add_trace(go.Bar(y=labels, x=values, orientation="h", name=category,
                                 marker_color=CATEGORY_COLORS[category],
                                 hovertemplate="%{y}<br>" + category + ": %{x:.2f} ms per step<extra></extra>"))
    for label, (_, s) in zip(labels, rows, strict=False):
        if s.timing.median_ms and s.profile:
            fig.add_trace(go.Scatter(y=[label], x=[s.timing.median_ms], mode="markers", showlegend=False,
                                     marker=dict(symbol="line-ns-open", size=18, color="#212121", line_width=2),
                                     hovertext=f"step median {s.timing.median_ms:.2f} ms"))
    # before any profile is back (a live run), the run's device says which time it will be
    cpu = (rows[0][1].profile.source == "cpu" if rows and rows[0][1].profile else
           all(summary.run.device == "cpu" for summary in summaries))
    title = ("Where the time goes<br><sup>CPU op self time per step, by category; | = measured step time</sup>"
             + _cpu_ops_note([s for _, s in rows]) if cpu else
             "Where the time goes<br><sup>GPU kernel time per step by category; | = measured step time</sup>")
    finish_figure(fig, title, figure_height(len(rows)) + 40, xaxis_title="ms per step", barmode="stack")
    return fig if rows else empty_figure(fig, "the breakdown comes from the profiled steps, after the timed ones")


def _cpu_ops_note(stages: list[StageSummary]) -> str:
    """Where a CPU bar runs past its step (StageSummary.cpu_ops_over_step), why, with the longest one's figures."""
    over = [s for s in stages if (s.cpu_ops_over_step or 0.0) > 1.0]
    if not over:
        return ""
    worst = max(over, key=lambda s: s.cpu_ops_over_step or 0.0)
    figures = f"{worst.key}: {worst.cpu_ops_ms:.1f} ms of ops in a {worst.timing.median_ms:.2f} ms step"
    which = figures if len(over) == 1 else \
        f"{len(over)} of {len(stages)} stages, up to ×{worst.cpu_ops_over_step:.1f}; {figures}"
    return ("<br><sup>a bar past its | is no contradiction: op time is summed over every thread that ran ops, on "
            f"the profiled steps, which the profiler slows ({which})</sup>")


def bottleneck(runs: RunSummary | Sequence[RunSummary]) -> go.Figure:
    """Kernel share of each step (kernel time ÷ step time), coloured by its verdict (which the host wait decides,
    not a share line): one
    trace a verdict, so the legend names it; the bar says its share, short enough to sit whole inside the bar."""
    summaries = as_summaries(runs)
    several = len(summaries) > 1
    rows = [(summary, s) for summary in summaries for s in summary.stages if s.bottleneck.busy is not None]
    labels = [f"{s.key} · {summary.run.run_id[:6]}" if several else s.key for summary, s in rows]
    fig = go.Figure()
    for verdict in dict.fromkeys(s.bottleneck.verdict for _, s in rows):
        mine = [(label, s) for label, (_, s) in zip(labels, rows, strict=True) if s.bottleneck.verdict == verdict]
        busy = [100 * (s.bottleneck.busy or 0) for _, s in mine]
        fig.add_trace(go.Bar(y=[label for label, _ in mine], x=busy, orientation="h", name=str(verdict),
                             marker_color=BOUND_COLORS[verdict], showlegend=True,
                             text=[s.bottleneck.busy_text for _, s in mine], cliponaxis=False,
                             # inside a bar long enough to hold '100%', else just beyond its end: never cut
                             textposition=["inside" if b >= BUSY_TEXT_INSIDE else "outside" for b in busy],
                             insidetextanchor="end", textfont=dict(color="white"),
                             outsidetextfont=dict(color="#2a3f5f"),
                             hovertext=[f"{verdict}: {s.bottleneck.sentence}" for _, s in mine]))
    finish_figure(fig, "Kernel share of the step<br><sup>kernel time ÷ step time; colour: what sets the pace</sup>",
                  figure_height(len(rows)) + 20, xaxis_title="% of the step in kernels", xaxis_range=[0, 100],
                  barmode="overlay")
    fig.update_yaxes(categoryorder="array", categoryarray=labels)
    return fig if rows else empty_figure(fig, "the kernel share needs a CUDA profile")


# What each column of the kernel grid proves, once: the dashboard and the HTML report print it under the grid.
KERNEL_GRID_CAPTION = ("Each column is a key kernel a lever must launch; a row is a stage. ✓: the profiler saw it "
                       "in that stage's trace, so the lever really ran; ✗ fallback: a library's lever ran PyTorch's "
                       "kernel instead; ?: expected but not seen; n/a: the stage did not run. Hover a cell for the "
                       "kernel's name.")


def kernel_grid(runs: RunSummary | Sequence[RunSummary]) -> go.Figure:
    summaries = as_summaries(runs)
    several = len(summaries) > 1
    rows = [(summary, s) for summary in summaries for s in summary.stages]
    keys = [k for k in KEY_KERNELS if any(s.cells.get(k) and s.cells[k].state not in ("not used", "pending",
                                                                                         "unavailable")
                                          for _, s in rows)] or list(KEY_KERNELS)[:6]
    z, text, hover = [], [], []
    for _, s in rows:
        cells = [s.cells.get(k) for k in keys]
        z.append([CELL_STATES.index(c.state) if c else 0 for c in cells])
        text.append([CELL_MARKS.get(c.state, "") if c else "" for c in cells])
        hover.append([f"{c.state}: {c.why}" if c else "" for c in cells])
    n = len(CELL_STATES) - 1
    scale = [[i / n, CELL_COLORS[state]] for i, state in enumerate(CELL_STATES)]
    labels = [f"{s.index + 1}. {s.key}" + (f" · {summary.run.run_id[:6]}" if several else "") for summary, s in rows]
    fig = go.Figure(go.Heatmap(z=z, x=[KEY_KERNELS[k].label for k in keys], y=labels, text=text, hovertext=hover,
                               texttemplate="%{text}", hovertemplate="%{y}<br>%{x}<br>%{hovertext}<extra></extra>",
                               colorscale=scale, zmin=0, zmax=n, showscale=False, xgap=2, ygap=2))
    for state in CELL_STATES:  # a legend for the discrete colours
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=state,
                                 marker=dict(size=12, color=CELL_COLORS[state], symbol="square",
                                             line=dict(color="#9e9e9e", width=1))))
    # the column headers sit on top (under the title), so the colour legend goes at the foot, clear of them
    # the upright headers' height is kept under the title (automargin alone grew the plot up into it on a phone)
    headers = CHAR_PX * max(len(KEY_KERNELS[k].label) for k in keys) + 12
    finish_figure(fig, "Kernel proof<br><sup>torch.profiler, untimed steps after the timed ones</sup>",
            round(70 + headers + 20 + 50 + 40 * max(len(rows), 1)), margin=dict(l=10, r=30, t=0, b=20),
            extra_top=round(headers))
    fig.update_yaxes(showgrid=False)
    # upright headers, one per column: at any width none runs into the next (level ones did on a phone)
    fig.update_xaxes(side="top", showgrid=False, tickangle=-90, automargin=True)
    return fig


def roofline(runs: RunSummary | Sequence[RunSummary]) -> go.Figure:
    """Achieved model TFLOP/s per stage against this GPU's ceilings: the datasheet's dense peak and the peak
    measured here (a large square GEMM), each for the stage's precision."""
    summaries = as_summaries(runs)
    several = len(summaries) > 1
    fig = go.Figure()
    rows = [(summary, s) for summary in summaries for s in summary.stages if s.ok and s.rates.tflops]
    labels = [f"{s.key} · {summary.run.run_id[:6]}" if several else s.key for summary, s in rows]
    fig.add_trace(go.Bar(y=labels, x=[s.rates.tflops for _, s in rows], orientation="h", name="achieved",
                         marker_color=NEUTRAL, cliponaxis=False, textposition="outside",
                         # the share of the measured peak in the hover: beside the bar it ran into the peaks' marks
                         text=[f"{s.rates.tflops:.0f}" for _, s in rows],
                         hovertext=[f"{s.rates.tflops:.0f} TFLOP/s" + (f" · {s.mfu_measured_peak:.0%} of measured"
                                                                       if s.mfu_measured_peak else "")
                                    for _, s in rows]))
    # the peaks the summary divided by: tflops / mfu (datasheet) and tflops / mfu_measured_peak (measured)
    datasheet = [(s.rates.tflops or 0) / s.rates.mfu if s.rates.mfu else None for _, s in rows]
    measured = [(s.rates.tflops or 0) / s.mfu_measured_peak if s.mfu_measured_peak else None for _, s in rows]
    for name, xs, symbol in (("datasheet dense peak", datasheet, "line-ns-open"),
                             ("measured peak (GEMM)", measured, "diamond")):
        fig.add_trace(go.Scatter(y=labels, x=xs, mode="markers", name=name,
                                 marker=dict(symbol=symbol, size=14, color="#c62828" if "data" in name else "#212121",
                                             line_width=2)))
    finish_figure(fig, "Achieved TFLOP/s against this GPU's ceilings<br><sup>datasheet dense peak and measured GEMM "
            "peak</sup>", figure_height(len(rows)) + 40, xaxis_title="TFLOP/s")
    room_for_labels(fig)
    return fig if rows else empty_figure(fig, "TFLOP/s are reported for stages that finished ok")


class HasComponentRows(Protocol):
    """What components_bars reads of a ComponentsReport (bench_core.components sits above this package)."""

    @property
    def rows(self) -> Sequence[Any]: ...


def components_bars(report: HasComponentRows) -> go.Figure:
    """The components view: each row's median ms, coloured by kind, with its share of the copy ceiling."""
    rows = [r for r in report.rows if r.status == "ok" and r.median_ms]
    labels = [r.label for r in rows]   # "Adam · for-loop · FP32", as the page's table names the row
    fig = go.Figure(go.Bar(
        y=labels, x=[r.median_ms for r in rows], orientation="h", cliponaxis=False, textposition="outside",
        marker_color=[SLOWER if "apex" in r.name else NEUTRAL for r in rows], name="call (median)",
        text=[f"{r.median_ms:.3f} ms" + (f" · {r.copy_fraction:.0%} of copy" if r.copy_fraction else "")
              + (f" · {r.bound}" if r.bound == "launch-bound" else "") + (" · noisy" if r.noisy else "")
              for r in rows]))
    if any(r.kernel_ms is not None for r in rows):  # the GPU's own share; the rest of the bar is host launch cost
        fig.add_trace(go.Scatter(y=labels, x=[r.kernel_ms for r in rows], mode="markers", name="kernels alone",
                                 marker=dict(symbol="diamond", size=11, color="#212121")))
    finish_figure(fig, "Each component alone<br><sup>median ms per call; orange: Apex; ◆ the kernels' own time "
            "(launch-bound: the host's launches set the pace)</sup>", figure_height(len(rows)) + 20, xaxis_title="ms")
    room_for_labels(fig)
    return fig if rows else empty_figure(fig, "no row ran")


def scaling(runs: RunSummary | Sequence[RunSummary]) -> go.Figure:
    """Scaling efficiency = throughput(N) / (N x throughput(1)) of the same levers, per multi-GPU stage."""
    return _bars(as_summaries(runs), lambda s: None if s.scaling_efficiency is None else 100 * s.scaling_efficiency,
                 ".0f", "Scaling efficiency<br><sup>weak scaling, same per-GPU batch</sup>", "% of N × one GPU")


ALL_FIGURES = {"speedup": speedup_bars, "breakdown": time_breakdown, "bottleneck": bottleneck,
               "iteration_time": iteration_times, "throughput": throughput, "mfu": mfu, "memory": peak_memory,
               "roofline": roofline, "loss": loss_curves, "kernels": kernel_grid, "scaling": scaling}


def not_applicable(name: str, runs: RunSummary | Sequence[RunSummary]) -> str | None:
    """Why a chart has nothing to show for these runs (one line), or None when it applies."""
    summaries = as_summaries(runs)
    cuda = any(s.run.device == "cuda" for s in summaries)
    if name == "scaling" and not any(st.gpus > 1 for s in summaries for st in s.stages):
        return "Scaling efficiency needs stages at more than one GPU count (run with --gpus=1,2)."
    if name in ("mfu", "roofline") and not cuda:
        return "MFU is a GPU figure: there is no datasheet peak for a CPU."
    if name == "bottleneck" and not cuda:
        return "No GPU: the step runs on the CPU, so there is no launch/GPU split."
    return None
