"""History: past runs from SQLite, filter, compare on the same charts (lined up by stage), export, import."""
from __future__ import annotations

import json
import re
import sqlite3

import pandas as pd
import streamlit as st

from bench_core.cluster.compare import across_gpus
from bench_core.config.bench_config import WORKLOADS, ModelSource, describe_shape
from bench_core.recommend.answer import is_recommendation_json
from bench_core.results.agreement import compare_sentences
from bench_core.results.answer import answer
from bench_core.results.formats import ImportRejected, neutralise, to_csv
from bench_core.results.headline import headline
from bench_core.results.records import RunResult
from bench_core.results.summary import summarize
from bench_core.service.jobs import LimitExceeded, NotAllowed
from bench_core.sweep.core.records import is_sweep_json
from dashboard import job_view
from dashboard.examples import example_buttons
from dashboard.live import verdict_card
from dashboard.page_header import open_page, page_header
from dashboard.session import (
    get_recommendations,
    get_sweeps,
    history,
    is_operator,
    listed,
    role,
)

manager = open_page()
page_header(manager, "Run history")
PASTE_MAX_CHARS = manager.limits.max_upload_mib * 2**20


def import_file(name: str, data: bytes) -> None:
    try:
        if is_recommendation_json(data):
            message = get_recommendations().import_recommendation(data, role())[1]
        else:
            message = (get_sweeps().import_file(data, role=role()) if is_sweep_json(data) else
                       manager.import_file(name, data, role=role()))
        st.session_state["import_message"] = ("success", message)
    except ImportRejected as exc:
        st.session_state["import_message"] = ("error", f"Import rejected, nothing was imported: {exc}")
    except (NotAllowed, LimitExceeded) as exc:
        st.session_state["import_message"] = ("error", str(exc))
    except sqlite3.Error as exc:
        st.session_state["import_message"] = ("error", f"Could not save the import: {exc}")


def model_size(config_json: str) -> str:
    """The model a run trained: its source (catalog name, or the config's hash) and shape, or the built-in size."""
    cfg = json.loads(config_json)
    if isinstance(cfg.get("source"), dict):
        label = ModelSource.from_dict(cfg["source"]).label
        return f"{label} · d{cfg.get('width')}×L{cfg.get('depth')}"
    for name, shape in WORKLOADS.items():
        if all(cfg.get(k, "gpt" if k == "family" else None) == v for k, v in shape.items()):
            return name
    return f"d{cfg.get('width')}×L{cfg.get('depth')}"


def run_title(run: RunResult) -> str:
    """A run's heading: its ladder, its model (a Hugging Face source by name) and where it ran."""
    return (f"{run.preset} · {model_size(json.dumps(run.config.to_dict()))} · {run.gpu or run.device} · "
            f"run {run.run_id}")


def _answer_of(run_id: str) -> str:
    run = history().load_run(run_id)
    return answer(summarize(run)).short if run is not None else ""


def show_run(summary) -> None:
    """One run: its verdict first, then its key table, downloads."""
    run = summary.run
    verdict_card(summary, key=f"verdict_{run.run_id}")
    job_view.results_table(summary, key=f"history_{run.run_id}")
    job_view.downloads(run, key=f"history_{run.run_id}")
    job_view.repeat(run, key=f"history_{run.run_id}")


linked = st.query_params.get("run")
if linked:  # a link to one run (?run=ID, as an import's message gives): that run's verdict is the page's first block
    try:
        linked_run = history().load_run(linked)
    except sqlite3.Error:
        linked_run = None
    if linked_run is None:
        st.warning(f"No run {neutralise(linked)} in this history.")
    else:
        linked_summary = summarize(linked_run)
        st.subheader(run_title(linked_run))
        show_run(linked_summary)
        job_view.charts(linked_summary, key="linked", version=job_view.stored_version(history().path, [linked_run]))
        st.divider()

runs = listed(history().list_runs, f"the history database {history().path}")

st.subheader("Runs")
if not runs:
    # said of runs alone: above a table of sweeps, "No runs stored yet" read as an empty history (a new user's pass)
    st.info("No runs stored yet (sweeps are listed under Sweeps, below). A run's finished stages are saved here as "
            "soon as they end; CLI runs land here too. Or see a GPU's answer in an example shipped with the package:")
    example_buttons("examples_empty", on_history=True)
else:
    df = pd.DataFrame(runs)
    df["created"] = pd.to_datetime(df["created_at"], utc=True, errors="coerce")
    df["model"] = df["config_json"].map(model_size)
    f1, f2, f3 = st.columns(3)
    gpus = f1.multiselect("GPU", sorted(df["gpu"].fillna("").unique()), placeholder="all GPUs")
    presets = f2.multiselect("Preset", sorted(df["preset"].fillna("").unique()), placeholder="all presets")
    days = df["created"].dt.date.dropna()
    span = f3.date_input("Dates", value=(days.min(), days.max()) if len(days) else [], format="YYYY-MM-DD")
    if gpus:
        df = df[df["gpu"].isin(gpus)]
    if presets:
        df = df[df["preset"].isin(presets)]
    if isinstance(span, tuple) and len(span) == 2:
        df = df[(df["created"].dt.date >= span[0]) & (df["created"].dt.date <= span[1])]
    # text that may come from an imported file is neutralised before display: the grid's own CSV download
    # must not carry a spreadsheet formula
    # a run saved before the answer card has none stored: its answer is read from the run itself, once a listing
    missing = df["answer"].isna()
    df.loc[missing, "answer"] = df.loc[missing, "run_id"].map(_answer_of)
    for col in ("run_id", "gpu", "node", "preset", "headline", "answer"):
        df[col] = df[col].fillna("").map(neutralise)
    # a short time, as the sweeps table gives it: the full stamp took the room Model and GPU were cut for
    df["created_at"] = df["created_at"].str[:16].str.replace("T", " ")
    # the answer first: a phone shows about two columns (the sweeps table's lesson below)
    view = df[["answer", "created_at", "run_id", "model", "gpu", "node", "preset", "headline", "status", "stages", "ok",
               "failed", "best_speedup", "imported"]].reset_index(drop=True)
    st.caption("Select one or more runs to compare them: stages line up by stage, runs are colours.")
    picked = st.dataframe(view, key="runs", on_select="rerun", selection_mode="multi-row", hide_index=True,
                          width="stretch", column_config={
                              "answer": st.column_config.TextColumn(
                                  "Answer", width="medium", help="each vendor against its native twin: worth it "
                                  "only where its 95% interval lies above ×1.00"),
                              "created_at": st.column_config.TextColumn("When (UTC)"),
                              "run_id": st.column_config.TextColumn("Run"),
                              "model": st.column_config.TextColumn("Model", width="medium"),
                              "gpu": st.column_config.TextColumn("GPU", width="medium"),
                              "node": st.column_config.TextColumn("Machine", help="the cluster node it ran on"),
                              "preset": st.column_config.TextColumn("Preset"),
                              "headline": st.column_config.TextColumn("Verdict", width="large"),
                              "status": st.column_config.TextColumn("Status"),
                              "failed": st.column_config.NumberColumn("Failed", help="failed, oom or timeout stages"),
                              "stages": st.column_config.NumberColumn("Stages"),
                              "ok": st.column_config.NumberColumn("Ok"),
                              "best_speedup": st.column_config.NumberColumn(
                                  "Best speedup", format="×%.2f", help="ok, proven stages measured here only"),
                              "imported": st.column_config.CheckboxColumn("Imported")})
    chosen = [view.loc[i, "run_id"] for i in picked.selection.rows] if picked and picked.selection else []
    loaded = [r for r in (history().load_run(run_id) for run_id in chosen) if r is not None]
    summaries = [summarize(r) for r in loaded]
    for summary in summaries:
        run = summary.run
        with st.expander(f"{run_title(run)} — "
                         f"{headline(summary).one_liner}", expanded=len(summaries) == 1):
            show_run(summary)
    if len({(r.gpu, r.node) for r in loaded}) > 1:  # runs on several GPUs: each lever's contribution on each
        st.subheader("Across GPUs: what each lever adds on each")
        st.dataframe(pd.DataFrame([{"lever": f"{row.lever} against {row.against} ({row.context})", **row.by_gpu}
                                   for row in across_gpus(loaded)]), hide_index=True, key="across_gpus")
    if len(summaries) > 1:  # in words first: which stages the runs agree on (results.agreement)
        with st.container(key="agreement"):
            st.subheader("Do the runs agree?")
            models = {describe_shape(r.config) for r in loaded}
            if len(models) > 1:   # a speedup holds for the model it was measured on
                st.warning("These runs trained different models, so their stages may differ for that reason "
                           "alone.")
            for r in loaded:
                st.text(f"Run {r.run_id[:6]}: {describe_shape(r.config)}")
            for run_a, run_b, sentence in compare_sentences(summaries):
                st.markdown(f"**Run {run_b.run.run_id[:6]} against run {run_a.run.run_id[:6]}:** {sentence}")
    if summaries:
        job_view.charts(summaries if len(summaries) > 1 else summaries[0], key="history",
                        version=job_view.stored_version(history().path, loaded))
    if len(loaded) > 1:
        st.download_button("Download the selected runs as one CSV", data=to_csv(loaded), file_name="bench_runs.csv",
                           mime="text/csv", key="dl_selected")

st.divider()
st.subheader("Sweeps")
sweep_store = get_sweeps().store
sweep_rows = listed(sweep_store.list_sweeps, "the sweeps") if sweep_store is not None else []
if not sweep_rows:
    st.caption("No sweep yet: the Sweep page runs one, `python -m bench_core sweep` too.")
else:
    # the link, the lever and its answer first: a phone shows three columns (with "when" third, 390 px hid the
    # answer), and even 1440 px cut the crossover when it came after the counts (new users' passes); the id tells
    # two runs of one map apart
    st.dataframe(pd.DataFrame([{**r, "change": r["change"] or r["compare"], "open": f"/sweep?sweep={r['sweep_id']}",
                                "imported": bool(r["imported"]), "created_at": r["created_at"][:16].replace("T", " "),
                                "crossover": r["crossover"] or "none inside the swept values",
                                "id": r["sweep_id"][:6]}
                               for r in sweep_rows])[
        ["open", "change", "crossover", "created_at", "gpu", "id", "status", "axes", "points", "measured",
         "prediction_error", "imported", "compare", "family"]], hide_index=True, width="stretch", key="sweeps",
        column_config={"open": st.column_config.LinkColumn("Open", display_text="map"),
                       "created_at": st.column_config.TextColumn("When (UTC)"),
                       "change": st.column_config.TextColumn("Lever", help="what B changes from A"),
                       "id": st.column_config.TextColumn("Id", help="the sweep's id, as the Sweep page names it"),
                       "prediction_error": st.column_config.NumberColumn(
                           "Prediction error", format="percent", help="the speedup's rms error over the points "
                           "measured end to end"),
                       "imported": st.column_config.CheckboxColumn("Imported"),
                       "crossover": st.column_config.TextColumn("Crossover", width="large"),
                       "compare": st.column_config.TextColumn("B vs A"),
                       # headed as the runs table heads them (they read "gpu", "status", "axes")
                       "gpu": st.column_config.TextColumn("GPU"), "status": st.column_config.TextColumn("Status"),
                       "axes": st.column_config.TextColumn("Axes"),
                       "points": st.column_config.NumberColumn("Points"),
                       "measured": st.column_config.NumberColumn("Measured", help="points run end to end"),
                       "family": st.column_config.TextColumn("Model", help="a built-in family, or the "
                                                             "Hugging Face architecture the sweep mapped")})

st.divider()
st.subheader("Recommendations")
rec_store = get_recommendations().store
rec_rows = listed(rec_store.list_recommendations, "the recommendations") if rec_store is not None else []
if not rec_rows:
    st.caption("No recommendation yet: the Recommend page asks for one, `python -m bench_core recommend` too.")
else:
    # the link and the answer first, as the sweeps table: what a phone's few columns show
    st.dataframe(pd.DataFrame([{"open": f"/recommend?recommendation={r['recommendation_id']}",
                                "recommended": neutralise(r["recommended"] or "none"),
                                "speedup": r["speedup"], "from_key": neutralise(r["from_key"] or ""),
                                "either": bool(r["either"]), "created_at": r["created_at"][:16].replace("T", " "),
                                "gpu": neutralise(r["gpu"] or r["device"] or ""), "model": neutralise(r["model"] or ""),
                                "id": r["recommendation_id"]} for r in rec_rows]),
                 hide_index=True, width="stretch", key="recommendations",
                 column_config={"open": st.column_config.LinkColumn("Open", display_text="answer"),
                                "recommended": st.column_config.TextColumn("Switch on"),
                                "speedup": st.column_config.NumberColumn("Speedup", format="×%.2f",
                                                                         help="over --from, per token"),
                                "from_key": st.column_config.TextColumn("Over (--from)"),
                                "either": st.column_config.CheckboxColumn("Either", help="the runner-up's interval "
                                                                          "overlaps: either will do"),
                                "created_at": st.column_config.TextColumn("When (UTC)"),
                                "gpu": st.column_config.TextColumn("GPU"),
                                "model": st.column_config.TextColumn("Model"),
                                "id": st.column_config.TextColumn("Id")})

st.divider()
st.subheader("Import a run from another machine")
if runs:   # an empty history offers them above, where its list would be
    st.caption("Or an example GPU run shipped with the package (two H100 seed runs, a minute apart):")
    example_buttons("examples", on_history=True)
if not is_operator():
    st.caption("Only operators may import runs.")
else:
    st.caption(f"A CSV or JSON written by `python -m bench_core run --out/--json`, `sweep --json` or "
               f"`recommend --json`, or by "
               f"this dashboard (at most {manager.limits.max_upload_mib} MiB). A run or sweep that is already here "
               "is imported under a new id; nothing is overwritten.")
    upload = st.file_uploader("CSV or JSON file", type=["csv", "json"], key="upload")
    st.button("Import file", disabled=upload is None,
              on_click=lambda: import_file(st.session_state["upload"].name, st.session_state["upload"].getvalue()))
    with st.expander("…or paste the file's text"):
        st.radio("Format", ["csv", "json"], horizontal=True, key="paste_kind")
        st.text_area("Contents", key="paste_text", height=120, max_chars=PASTE_MAX_CHARS)
        st.button("Import pasted text", on_click=lambda: import_file(
            f"pasted.{st.session_state['paste_kind']}", st.session_state["paste_text"].encode()))
message = st.session_state.pop("import_message", None)
if message:
    # each run or sweep the message names links to its own view (a duplicate's message names both)
    text = re.sub(r"\brun ([0-9a-f]{12}(?:-imp-[0-9a-f]{6})?)\b", r"[run \1](/history?run=\1)", message[1])
    text = re.sub(r"\bsweep ([0-9a-f]{12}(?:-imp-[0-9a-f]{6})?)\b", r"[sweep \1](/sweep?sweep=\1)", text)
    text = re.sub(r"\brecommendation ([0-9a-f]{12}(?:-imp-[0-9a-f]{6})?)\b",
                  r"[recommendation \1](/recommend?recommendation=\1)", text)
    (st.success if message[0] == "success" else st.error)(text)
