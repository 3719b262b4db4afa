"""History: past runs from SQLite, filter, compare on the same charts, export, import."""
from __future__ import annotations

import sqlite3

import pandas as pd
import streamlit as st

from bench_core.importer import ImportRejected, parse_upload
from bench_core.results import to_csv
from pages import job_view
from pages.common import access_panel, get_manager, is_operator, persistence_banner

manager = get_manager()
access_panel()
st.title("🗂️ Run history")
persistence_banner(manager)


def import_file(name: str, data: bytes) -> None:
    limit = manager.limits.max_upload_mib * 2**20
    try:
        runs = parse_upload(name, data, max_bytes=limit)
        for run in runs:
            manager.store.save_run(run, imported=True)
        st.session_state["import_message"] = ("success", f"Imported {len(runs)} run(s) from {name}.")
    except ImportRejected as exc:
        st.session_state["import_message"] = ("error", f"Import rejected, nothing was imported: {exc}")
    except sqlite3.Error as exc:
        st.session_state["import_message"] = ("error", f"Could not save the import: {exc}")


try:
    runs = manager.store.list_runs()
except sqlite3.Error as exc:
    st.error(f"Cannot read the history database {manager.store.path}: {exc}")
    runs = []

if not runs:
    st.info("No runs stored yet. Finished stages are saved here as soon as they end.")
else:
    df = pd.DataFrame(runs)
    df["created"] = pd.to_datetime(df["created_at"], utc=True, errors="coerce")
    f1, f2, f3 = st.columns(3)
    gpus = f1.multiselect("GPU", sorted(df["gpu"].fillna("").unique()), placeholder="all GPUs")
    presets = f2.multiselect("Preset", sorted(df["preset"].fillna("").unique()), placeholder="all presets")
    days = df["created"].dt.date.dropna()
    span = f3.date_input("Dates", value=(days.min(), days.max()) if len(days) else (), format="YYYY-MM-DD")
    if gpus:
        df = df[df["gpu"].isin(gpus)]
    if presets:
        df = df[df["preset"].isin(presets)]
    if isinstance(span, tuple) and len(span) == 2:
        df = df[(df["created"].dt.date >= span[0]) & (df["created"].dt.date <= span[1])]
    view = df[["created_at", "run_id", "preset", "gpu", "device", "status", "stages", "ok", "best_speedup",
               "imported"]].reset_index(drop=True)
    st.caption("Select one or more runs to compare their stages on the same charts.")
    picked = st.dataframe(view, key="runs", on_select="rerun", selection_mode="multi-row", hide_index=True,
                          width="stretch", column_config={
                              "best_speedup": st.column_config.NumberColumn("Best speedup", format="×%.2f"),
                              "imported": st.column_config.CheckboxColumn("Imported")})
    chosen = [view.loc[i, "run_id"] for i in picked.selection.rows] if picked and picked.selection else []
    loaded = [r for r in (manager.store.load_run(run_id) for run_id in chosen) if r is not None]
    for run in loaded:
        st.download_button(f"⬇ CSV of run {run.run_id} ({run.preset}, {run.gpu or run.device})", data=to_csv(run),
                           file_name=f"bench_{run.run_id}.csv", mime="text/csv", key=f"dl_{run.run_id}")
    if loaded:
        job_view.charts(loaded, key="history", version=tuple((r.run_id, r.status) for r in loaded))
        if len(loaded) == 1:
            job_view.results_table(loaded[0], key="history")

st.divider()
st.subheader("Import a run from another machine")
if not is_operator():
    st.caption("Only operators may import runs.")
else:
    st.caption(f"A CSV or JSON written by `python -m bench_core run --out/--json` or by this dashboard "
               f"(at most {manager.limits.max_upload_mib} MiB).")
    upload = st.file_uploader("CSV or JSON file", type=["csv", "json"], key="upload")
    st.button("Import file", disabled=upload is None,
              on_click=lambda: import_file(st.session_state["upload"].name, st.session_state["upload"].getvalue()))
    with st.expander("…or paste the file's text"):
        st.radio("Format", ["csv", "json"], horizontal=True, key="paste_kind")
        st.text_area("Contents", key="paste_text", height=120)
        st.button("Import pasted text", on_click=lambda: import_file(
            f"pasted.{st.session_state['paste_kind']}", st.session_state["paste_text"].encode()))
message = st.session_state.pop("import_message", None)
if message:
    (st.success if message[0] == "success" else st.error)(message[1])
