"""What every page shares: the one job manager per server process, the session's identity and role.

Imports stay light (no torch) so the first paint is not held up.
"""
from __future__ import annotations

import os
import sqlite3
import time
import uuid
from collections.abc import Callable
from typing import Any

import streamlit as st

from bench_core.cluster.address import cluster_address, executor_for
from bench_core.cluster.nodes import Node, NodeLister
from bench_core.config.settings import load_limits
from bench_core.machine.probe import Probe
from bench_core.results.store import Store
from bench_core.service.access import OPERATOR, Throttle, configured_token, role_for
from bench_core.service.jobs import JobManager
from bench_core.service.recommendations import RecommendService
from bench_core.service.sweeps import SweepService
from bench_core.sweep.core.runner import SweepHooks

PROBE_OVERRIDE: Probe | None = None  # tests set a ready probe here instead of waiting for a fresh one
SWEEP_HOOKS_OVERRIDE: SweepHooks | None = None  # tests set fake kernel timings and runs for the Sweep page here


@st.cache_resource(show_spinner=False, on_release=lambda manager: manager.shutdown())
def get_manager() -> JobManager:
    """One per server process: jobs outlive the browser tab (and session) that started them."""
    address = cluster_address()  # BENCH_RAY_ADDRESS: runs go to the cluster; unset, to this machine (no Ray)
    return JobManager(Store(), load_limits(), probe=PROBE_OVERRIDE,
                      executor=executor_for(address) if address else None,
                      isolate_host=os.environ.get("BENCH_ISOLATE_HOST") == "1")  # as `run --isolate-host`


@st.cache_resource(show_spinner=False)
def get_sweeps() -> SweepService:
    """One per server process, beside the job manager and on its device lock: a sweep outlives its browser tab."""
    from bench_core.sweep.core.history import SweepStore
    return SweepService(get_manager(), SweepStore(history().path), load_limits(), hooks=SWEEP_HOOKS_OVERRIDE)


@st.cache_resource(show_spinner=False)
def get_recommendations() -> RecommendService:
    """One per server process, on the job manager's device lock: a recommendation outlives its browser tab."""
    from bench_core.recommend.history import RecommendationStore
    return RecommendService(get_manager(), RecommendationStore(history().path), load_limits())


def cluster_nodes(wait_s: float = 0.0) -> list[Node] | None:
    """The cluster's machines, with their probes as far as they have come back; None without a cluster."""
    executor = get_manager().executor
    return executor.nodes(wait_s) if isinstance(executor, NodeLister) else None


def history() -> Store:
    """The history database: the dashboard's manager always has one (a manager without is the engine's)."""
    store = get_manager().store
    if store is None:
        raise RuntimeError("the dashboard's job manager keeps no history database")
    return store


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
            st.caption("No operator token configured: everyone here may run, cancel and import.")
            return
        if is_operator():
            st.caption("You are an **operator** for this session.")
            return
        st.caption("You are a **viewer**: you can watch and export. Operators run, cancel and import.")
        throttle = st.session_state.setdefault("token_throttle", Throttle())
        token = st.text_input("Operator token", type="password", key="operator_token_input")
        if not token:
            return
        wait = throttle.wait_s(time.monotonic())
        if wait > 0:
            st.error(f"Too many wrong tokens: try again in {wait:.0f} s.")
            return
        ok = role_for(token, operator_token()) == OPERATOR
        throttle.record(ok, time.monotonic())
        if ok:
            st.session_state["operator_token_entered"] = token
            st.rerun()
        st.error("That token is not the operator token.")


def persistence_banner(manager: JobManager) -> None:
    if manager.persistence_error:
        st.error(f"Saving to the history database failed — {manager.persistence_error}")


def listed(read: Callable[[], list[Any]], what: str) -> list[Any]:
    """A page's listing from the history database; one that cannot be read says so on the page and lists nothing."""
    try:
        return read()
    except sqlite3.Error as exc:
        st.error(f"Cannot read {what}: {exc}")
        return []
