"""What every page shares: the one job manager per server process, the session's identity and role.

Imports stay light (no torch) so the first paint is not held up.
"""
from __future__ import annotations

import uuid

import streamlit as st

from bench_core.access import OPERATOR, configured_token, role_for
from bench_core.jobs import JobManager
from bench_core.settings import load_limits
from bench_core.store import Store


PROBE_OVERRIDE: dict | None = None  # tests set a ready probe here instead of waiting for a fresh one


@st.cache_resource(show_spinner=False, on_release=lambda manager: manager.shutdown())
def get_manager() -> JobManager:
    """One per server process: jobs outlive the browser tab (and session) that started them."""
    return JobManager(Store(), load_limits(), probe=PROBE_OVERRIDE)


def session_id() -> str:
    if "session_id" not in st.session_state:
        st.session_state["session_id"] = uuid.uuid4().hex[:8]
    return st.session_state["session_id"]


def _secrets() -> dict:
    try:
        return dict(st.secrets)
    except Exception:  # no secrets.toml: not an error on a personal workstation
        return {}


def operator_token() -> str | None:
    return configured_token(_secrets())


def role() -> str:
    return role_for(st.session_state.get("operator_token_entered"), operator_token())


def is_operator() -> bool:
    return role() == OPERATOR


def access_panel() -> None:
    """Sidebar: the viewer/operator state, and the token box when a token is configured."""
    with st.sidebar:
        if operator_token() is None:
            st.caption("🔓 No operator token configured: everyone here may run, cancel and import.")
            return
        if is_operator():
            st.caption("🔑 You are an **operator** for this session.")
            return
        st.caption("👀 You are a **viewer**: you can watch and export. Operators run, cancel and import.")
        token = st.text_input("Operator token", type="password", key="operator_token_input")
        if token:
            st.session_state["operator_token_entered"] = token
            if is_operator():
                st.rerun()
            st.error("That token is not the operator token.")


def persistence_banner(manager: JobManager) -> None:
    if manager.persistence_error:
        st.error(f"⚠ Saving to the history database failed — {manager.persistence_error}", icon="💾")
