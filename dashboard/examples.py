"""The example GPU runs shipped with the package (bench_core.results.examples), opened from any page: imported into
the history once (an operator's import, as any), then shown on the History page as any run is."""
from __future__ import annotations

import sqlite3

import streamlit as st

from bench_core.results.examples import EXAMPLES, example_json, example_run
from bench_core.results.formats import ImportRejected
from bench_core.service.jobs import NotAllowed
from dashboard.session import get_manager, history, role

HISTORY_PAGE = "pages/history.py"


def open_example(name: str) -> str | None:
    """The example's run id in this history, imported first where it is not there yet; None, said on the page,
    where it cannot be (a viewer, no history)."""
    run_id = example_run(name).run_id
    try:
        if history().load_run(run_id) is None:
            get_manager().import_file(f"{name}.json", example_json(name), role=role())
    except (NotAllowed, ImportRejected, sqlite3.Error) as exc:
        st.error(f"Cannot open the example {name}: {exc}")
        return None
    return run_id


def example_buttons(key: str, on_history: bool = False) -> None:
    """One button an example: "Open an example GPU run", then the run's page (History, ?run=ID)."""
    for name, example in EXAMPLES.items():
        if st.button(f"Open an example GPU run: {example.title}", key=f"{key}_{name}"):
            run_id = open_example(name)
            if run_id is None:
                continue
            if on_history:   # this page shows a linked run first
                st.query_params["run"] = run_id
                st.rerun()
            st.switch_page(HISTORY_PAGE, query_params={"run": run_id})
