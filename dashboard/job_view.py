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
from bench_core.machine import stage_costs
from bench_core.results import figures
from bench_core.results.columns import Layout, key_cell, key_columns, proof_consequence, shown
from bench_core.results.formats import neutralise, to_csv, to_json
from bench_core.results.phase import Phase, cold_compile_s, compile_text, phase
from bench_core.results.records import RunResult, Status
from bench_core.results.repeat import repeat_command
from bench_core.results.report import render_html
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
    costs = None
    for stage in snap.run.stages:
        total = max(stage.iters_total * rounds, 1)
        done = len(stage.times_ms)
        text = f"{STATUS_MARK.get(stage.status.value, '')} {stage.index + 1}. {stage.key} — {stage.status.value}"
        if phase(stage) is Phase.COMPILING:
            costs = costs or stage_costs.load(snap.run.device)
            text += f" · {compile_text(stage, costs, time.time(), cold_s=cold_compile_s(snap.run))}"
        elif stage.status == Status.RUNNING and not stage.times_ms and stage.warmup_steps:
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


def stored_version(store_path: str, runs: Sequence[RunResult]) -> tuple:
    """The figure cache's key for runs read from a store. One store never gives two runs one id (an import that
    collides gets a new one), but another store may (BENCH_DB set elsewhere, a copied history): the same id there
    can be an imported run, whose kernel grid must say so, not a run measured here."""
    return (store_path, *((r.run_id, r.status.value, r.imported) for r in runs))


def charts(summaries: RunSummary | Sequence[RunSummary], key: str, version: tuple) -> None:
    """`version` identifies the data (job id and snapshot version, or the run ids shown)."""
    said: set[str] = set()   # MFU and the roofline share one note: said once

    def draw(name: str) -> None:
        why = figures.not_applicable(name, summaries)
        if why:
            if why not in said:
                st.caption(why)
            said.add(why)
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
    if not figures.not_applicable("kernels", summaries):
        st.caption(figures.KERNEL_GRID_CAPTION)
    draw("loss")
    draw("scaling")


def fallback_warnings(run: RunResult) -> None:
    for s in summarize(run).stages:
        consequence = proof_consequence(s)
        for warning in s.warnings:
            st.warning(f"**{s.key}**: {warning} — {consequence}.")


def column_config(summary: RunSummary) -> dict:
    """The shown columns' headers and help texts, from the one spec every view renders."""
    return {c.key: st.column_config.TextColumn(c.header, help=c.help,
                                               width="large" if c.key == "stage" or c.layout == Layout.NOTE else None)
            for c in shown(summary)}


def table_rows(summary: RunSummary) -> pd.DataFrame:
    """The on-screen table, one text cell per shown column ("—" where a figure does not apply), neutralised so
    the grid's own CSV download carries no formula."""
    cols = shown(summary)
    rows = [{c.key: neutralise(c.cell(s)) for c in cols} for s in summary.stages]
    return pd.DataFrame(rows, columns=[c.key for c in cols])


BREAK_ANYWHERE = ("Kernel proof", "Speedup (95% CI)", "Median")   # headers of the key columns without a whole-word rule


def key_table(summary: RunSummary) -> pd.DataFrame:
    """The key columns as plain text, headed by their headers: a static table wraps its words, never clips them."""
    cols = key_columns(summary)
    # a stage name may break after each '+' (a zero-width space): on a phone the Stage column narrows, so the
    # Bottleneck and proof columns keep their room
    rows = [{c.header: neutralise(key_cell(summary, c, s)).replace("+", "+\u200b") if c.key == "stage" else
             neutralise(key_cell(summary, c, s)) for c in cols} for s in summary.stages]
    return pd.DataFrame(rows, columns=[c.header for c in cols])


def results_table(summary: RunSummary, key: str) -> None:
    with st.container(key=f"keytable_{key}"):
        table = key_table(summary)
        # the proof and speedup cells may break inside a word where a phone leaves a column narrower than it
        # ('imported:', 'processes)'): else the table overflowed its box by a few pixels and the proof was cut
        breakable = [h for h in table.columns if h in BREAK_ANYWHERE]
        style = table.style.set_properties(subset=breakable, **{"overflow-wrap": "anywhere"})
        st.table(style.set_properties(**{"font-size": "13px", "padding": "4px"}), hide_index=True)
    with st.expander("All columns (noise, memory, notes…)"):
        st.dataframe(table_rows(summary), column_config=column_config(summary), hide_index=True, width="stretch",
                     key=f"{key}_table")
    if summary.baseline_note:
        st.warning(summary.baseline_note)


def downloads(run: RunResult, key: str) -> None:
    a, b, c, _ = st.columns([1, 1, 1.6, 2.4])
    a.download_button("Download CSV", data=to_csv(run), file_name=f"bench_{run.run_id}.csv", mime="text/csv",
                      key=f"{key}_csv")
    b.download_button("Download JSON", data=to_json(run), file_name=f"bench_{run.run_id}.json",
                      mime="application/json", key=f"{key}_json")
    # the same report as `run --html`; built on click only (it inlines every chart and plotly.js)
    c.download_button("Download HTML report", data=lambda: render_html(run), file_name=f"bench_{run.run_id}.html",
                      mime="text/html", key=f"{key}_html")


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


def repeat(run: RunResult, key: str) -> None:
    """The run's model and the CLI command that repeats it from its record (the config, its source and the ladder
    as stored); an uploaded config.json comes with it, to save under the name the command reads. Plain text:
    an imported run's names are not the page's markdown."""
    command = repeat_command(run)
    with st.container(key=f"{key}_repeat"):
        st.text(f"Model: {describe_shape(run.config)}")
        saved = f"save its config.json as {command.config_file}, then run" if command.config_file else "run"
        st.caption(f"To repeat this run on a machine with this package, {saved}:")
        st.code(command.command, language="bash")
        source = run.config.source
        if source is not None and source.config_json:
            st.download_button("Download its config.json", data=source.config_json,
                               file_name=command.config_file or "config.json", mime="application/json",
                               key=f"{key}_config", help=f"as recorded with the run: sha256 {source.sha256}")
