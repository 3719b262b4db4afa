"""Drawing one job: progress, the six charts, results table, downloads, snippets. Pure drawing."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict

import pandas as pd
import streamlit as st

from bench_core import figures
from bench_core.jobs import JobSnapshot
from bench_core.levers import Stage
from bench_core.results import RunResult, summary_rows, to_csv, to_json

STATUS_ICON = {"ok": "✅", "running": "⏳", "pending": "•", "unavailable": "⛔", "oom": "💥", "failed": "❌",
               "timeout": "⌛", "cancelled": "✖", "interrupted": "⚡"}


def job_header(snap: JobSnapshot) -> None:
    run = snap.run
    cfg = run.config
    eta = snap.eta_s()
    elapsed = (snap.finished_at or time.time()) - snap.started_at if snap.started_at else 0
    bits = [f"**{run.preset}** on **{run.gpu or run.device}**", f"job `{snap.job_id}`", f"status **{snap.status}**",
            f"{elapsed:.0f} s elapsed"]
    if eta is not None:
        bits.append(f"ETA ≈ {eta:.0f} s")
    st.markdown(" · ".join(bits))
    st.caption(f"depth {cfg.depth} · width {cfg.width} · heads {cfg.heads} · seq {cfg.seq_len} · batch "
               f"{cfg.batch_size} · vocab {cfg.vocab_size} · warm-up {cfg.warmup} · {cfg.iters} timed iterations")


def stage_progress(snap: JobSnapshot) -> None:
    for stage in snap.run.stages:
        done, total = len(stage.times_ms), max(stage.iters_total, 1)
        text = f"{STATUS_ICON.get(stage.status, '')} {stage.index + 1}. {stage.key} — {stage.status}"
        if stage.status in ("running", "ok"):
            text += f" · iteration {done}/{total}"
        if stage.reason:
            text += f" · {stage.reason}"
        st.progress(min(done / total, 1.0) if stage.status != "unavailable" else 0.0, text=text)


_FIGURES: OrderedDict = OrderedDict()
_FIGURES_LOCK = threading.Lock()


def figure(name: str, runs, version: tuple):
    """Every viewer of the same snapshot shares one built figure: builders are pure, snapshots immutable."""
    with _FIGURES_LOCK:
        fig = _FIGURES.get((name, version))
        if fig is not None:
            _FIGURES.move_to_end((name, version))
            return fig
    fig = figures.ALL_FIGURES[name](runs)
    with _FIGURES_LOCK:
        _FIGURES[(name, version)] = fig
        while len(_FIGURES) > 96:
            _FIGURES.popitem(last=False)
    return fig


def charts(runs: RunResult | list[RunResult], key: str, version: tuple) -> None:
    """`version` identifies the data (job id and snapshot version, or the run ids shown)."""
    def draw(name: str) -> None:
        st.plotly_chart(figure(name, runs, version), width="stretch", key=f"{key}_{name}")

    left, right = st.columns(2)
    with left:
        for name in ("speedup", "memory", "loss"):
            draw(name)
    with right:
        for name in ("iteration_time", "throughput"):
            draw(name)
    draw("kernels")
    runs_list = [runs] if isinstance(runs, RunResult) else runs
    if any(s.gpus != "1" for r in runs_list for s in r.stages):
        draw("scaling")


def fallback_warnings(run: RunResult) -> None:
    for stage in run.stages:
        for warning in stage.warnings:
            st.warning(f"**{stage.key}**: {warning} — this stage is not counted as Apex.", icon="⚠️")


TABLE_COLUMNS = {
    "stage": st.column_config.TextColumn("Stage"),
    "status": st.column_config.TextColumn("Status"),
    "verdict": st.column_config.TextColumn("Kernel proof", help="verified / fallback / unconfirmed"),
    "median_ms": st.column_config.NumberColumn("Median", format="%.2f ms"),
    "p10_ms": st.column_config.NumberColumn("p10", format="%.2f ms"),
    "p90_ms": st.column_config.NumberColumn("p90", format="%.2f ms"),
    "speedup": st.column_config.NumberColumn("Speedup", format="×%.2f"),
    "tokens_per_s": st.column_config.NumberColumn("Tokens/s", format="%,.0f"),
    "tflops": st.column_config.NumberColumn("Model TFLOP/s", format="%.1f"),
    "mfu_pct": st.column_config.NumberColumn("MFU", format="%.1f %%"),
    "peak_mem_mib": st.column_config.NumberColumn("Peak memory", format="%,.0f MiB"),
    "loss_first": st.column_config.NumberColumn("First loss", format="%.3f"),
    "loss_last": st.column_config.NumberColumn("Last loss", format="%.3f"),
    "noisy": st.column_config.CheckboxColumn("Noisy", help="IQR over 10% of the median"),
    "reason": st.column_config.TextColumn("Reason"),
}


def results_table(run: RunResult, key: str) -> None:
    rows = summary_rows(run)
    df = pd.DataFrame(rows)
    df["mfu_pct"] = df["mfu"].astype(float) * 100
    st.dataframe(df[list(TABLE_COLUMNS)], column_config=TABLE_COLUMNS, hide_index=True, width="stretch",
                 key=f"{key}_table")
    a, b, _ = st.columns([1, 1, 4])
    a.download_button("⬇ CSV", data=to_csv(run), file_name=f"bench_{run.run_id}.csv", mime="text/csv",
                      key=f"{key}_csv")
    b.download_button("⬇ JSON", data=to_json(run), file_name=f"bench_{run.run_id}.json",
                      mime="application/json", key=f"{key}_json")


def snippets(run: RunResult) -> None:
    st.subheader("What each stage changes")
    for stage in run.stages:
        with st.expander(f"{stage.index + 1}. {stage.label}  ({stage.key})"):
            st.code(Stage.of(stage).snippet(), language="python")


def finished_job(snap: JobSnapshot, key: str) -> None:
    job_header(snap)
    stage_progress(snap)
    fallback_warnings(snap.run)
    results_table(snap.run, key)
    charts(snap.run, key, (snap.job_id, snap.version))
    snippets(snap.run)
