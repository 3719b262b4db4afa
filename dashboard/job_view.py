"""Drawing one job or run: progress, charts, the results table, downloads, snippets. Pure drawing: every figure
is read from the run's summary."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence

import pandas as pd
import streamlit as st

from bench_core.config.bench_config import describe_shape
from bench_core.results import figures
from bench_core.results.formats import neutralise, to_csv, to_json
from bench_core.results.records import RunResult, Status
from bench_core.results.summary import RunSummary, summarize
from bench_core.service.jobs import JobSnapshot

STATUS_MARK = {"ok": "✓", "running": "▶", "pending": "·", "unavailable": "—", "oom": "✗", "failed": "✗",
               "timeout": "✗", "cancelled": "■", "interrupted": "■"}


def job_header(snap: JobSnapshot) -> None:
    run = snap.run
    eta = snap.eta_s()
    elapsed = (snap.finished_at or time.time()) - snap.started_at if snap.started_at else 0
    bits = [f"**{run.preset}** on **{run.gpu or run.device}**", f"job `{snap.job_id}`",
            f"status **{snap.status.value}**", f"{elapsed:.0f} s elapsed"]
    if eta is not None:
        bits.append(f"about {eta:.0f} s left")
    st.markdown(" · ".join(bits))
    st.caption(describe_shape(run.config))


def stage_progress(snap: JobSnapshot) -> None:
    rounds = snap.run.config.repeats
    for stage in snap.run.stages:
        total = max(stage.iters_total * rounds, 1)
        done = len(stage.times_ms)
        text = f"{STATUS_MARK.get(stage.status.value, '')} {stage.index + 1}. {stage.key} — {stage.status.value}"
        if stage.status == Status.RUNNING and not stage.times_ms and stage.warmup_steps:
            text += f" · warming up: {stage.warmup_steps} steps, {stage.warmup_s or 0:.1f} s"
        elif stage.status in (Status.RUNNING, Status.OK):
            text += f" · iteration {done}/{total}"
        if stage.reason:
            text += f" · {stage.reason}"
        st.progress(min(done / total, 1.0) if stage.status != Status.UNAVAILABLE else 0.0, text=text)


_FIGURES: OrderedDict = OrderedDict()
_FIGURES_LOCK = threading.Lock()


def figure(name: str, summaries: RunSummary | Sequence[RunSummary], version: tuple):
    """Every viewer of the same snapshot shares one built figure: builders are pure, snapshots immutable."""
    with _FIGURES_LOCK:
        fig = _FIGURES.get((name, version))
        if fig is not None:
            _FIGURES.move_to_end((name, version))
            return fig
    fig = figures.ALL_FIGURES[name](summaries)
    with _FIGURES_LOCK:
        _FIGURES[(name, version)] = fig
        while len(_FIGURES) > 128:
            _FIGURES.popitem(last=False)
    return fig


def charts(summaries: RunSummary | Sequence[RunSummary], key: str, version: tuple) -> None:
    """`version` identifies the data (job id and snapshot version, or the run ids shown)."""
    def draw(name: str) -> None:
        why = figures.not_applicable(name, summaries)
        if why:
            st.caption(why)
        else:
            st.plotly_chart(figure(name, summaries, version), width="stretch", key=f"{key}_{name}")

    left, right = st.columns(2)
    with left:
        for name in ("speedup", "iteration_time", "memory"):
            draw(name)
    with right:
        for name in ("breakdown", "bottleneck", "throughput", "mfu"):
            draw(name)
    draw("roofline")
    draw("kernels")
    draw("loss")
    draw("scaling")


def fallback_warnings(run: RunResult) -> None:
    for stage in run.stages:
        for warning in stage.warnings:
            st.warning(f"**{stage.key}**: {warning} — this stage is not counted as Apex.")


# Every cell is text with its unit, and "—" where a figure does not apply: never "None" or a made-up 0.0.
TABLE_COLUMNS = {
    "stage": st.column_config.TextColumn("Stage", width="large"),
    "status": st.column_config.TextColumn("Status"),
    "median_ms": st.column_config.TextColumn("Median"),
    "spread": st.column_config.TextColumn("p10–p90"),
    "speedup": st.column_config.TextColumn("Speedup (95% CI)"),
    "tokens_per_s": st.column_config.TextColumn("Tokens/s"),
    "mfu_pct": st.column_config.TextColumn("MFU"),
    "bottleneck": st.column_config.TextColumn("Bottleneck"),
    "noise": st.column_config.TextColumn("Noise"),
    "peak_mem_mib": st.column_config.TextColumn("Peak memory"),
    "verdict": st.column_config.TextColumn("Kernel proof"),
    "reason": st.column_config.TextColumn("Notes", width="large"),
}
NA = "—"


def _fmt(value: float | None, fmt: str, unit: str = "") -> str:
    return NA if value is None else format(value, fmt) + unit


def table_rows(summary: RunSummary) -> pd.DataFrame:
    """The on-screen table: text already neutralised, so the grid's own CSV download carries no formula."""
    rows = []
    for s in summary.stages:
        t = s.timing
        rows.append({
            "stage": s.key, "status": s.status.value + (" (partial)" if s.partial else ""),
            "median_ms": _fmt(t.median_ms, ".2f", " ms"),
            "spread": NA if s.spread_text is None else f"{s.spread_text} ms",
            "speedup": s.speedup_text or NA,
            "tokens_per_s": _fmt(s.rates.tokens_per_s, ",.0f"),
            "mfu_pct": s.mfu_text or NA,
            "bottleneck": NA if s.bottleneck.verdict == "unknown" else
            f"{s.bottleneck.verdict} ({s.bottleneck.busy_text} busy)",
            "noise": s.noise_reason or ("steady" if t.n else NA),
            "peak_mem_mib": _fmt(s.peak_mem_mib if summary.run.device == "cuda" else None, ",.0f", " MiB"),
            "verdict": s.verdict or NA, "reason": "; ".join(([s.reason] if s.reason else []) + list(s.warnings)),
        })
    df = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    for col in ("stage", "status", "reason", "verdict", "noise"):
        df[col] = df[col].map(neutralise)
    return df


def results_table(summary: RunSummary, key: str) -> None:
    df = table_rows(summary)
    if summary.run.device != "cuda":
        df = df.drop(columns=["mfu_pct", "peak_mem_mib", "bottleneck"])
    st.dataframe(df, column_config=TABLE_COLUMNS, hide_index=True, width="stretch", key=f"{key}_table")
    if summary.baseline_note:
        st.warning(summary.baseline_note)
    for s in summary.stages:
        if s.delta:
            st.caption(f"**{s.key}** vs the stage before: {s.delta.text}")


def downloads(run: RunResult, key: str) -> None:
    a, b, _ = st.columns([1, 1, 4])
    a.download_button("Download CSV", data=to_csv(run), file_name=f"bench_{run.run_id}.csv", mime="text/csv",
                      key=f"{key}_csv")
    b.download_button("Download JSON", data=to_json(run), file_name=f"bench_{run.run_id}.json",
                      mime="application/json", key=f"{key}_json")


def snippets(run: RunResult) -> None:
    st.subheader("What each stage changes")
    for stage in run.stages:
        with st.expander(f"{stage.index + 1}. {stage.label}  ({stage.key})"):
            st.code(stage.stage.snippet(), language="python")


def finished_job(snap: JobSnapshot, key: str) -> None:
    job_header(snap)
    stage_progress(snap)
    fallback_warnings(snap.run)
    results_table(summarize(snap.run), key)
    downloads(snap.run, key)
    charts(summarize(snap.run), key, (snap.job_id, snap.version))
    snippets(snap.run)
