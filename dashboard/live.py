"""The live view of the running job, and the verdict card shown on every result (live and final)."""
from __future__ import annotations

import time

import streamlit as st

from bench_core.results.headline import headline
from bench_core.results.summary import RunSummary, summarize
from bench_core.service.jobs import JobManager
from dashboard import job_view
from dashboard.session import role


def verdict_card(summary: RunSummary, cpu_switch: bool = False, key: str = "verdict") -> None:
    """st.container(key="verdict"): the answer in a few plain sentences, with figures and intervals. Several on
    one page (History) each get their own key, starting with "verdict"."""
    with st.container(key=key, border=True):
        verdict = headline(summary)
        so_far = " (so far)" if summary.run.status.value == "running" else ""
        if verdict.contributions:   # first: what each lever adds, from the pairs that differ by it alone
            st.markdown("#### What each lever adds" + so_far)
            for line in verdict.contributions:
                st.markdown(f"- {line}")
        rest = verdict.lines[len(verdict.contributions):]
        if rest or not verdict.contributions:
            st.markdown("#### Verdict" + ("" if verdict.contributions else so_far))
        for line in rest or (() if verdict.contributions else ("No stage has finished yet.",)):
            st.markdown(f"- {line}")
        if cpu_switch and summary.run.device == "cpu" and summary.run.preset == "seed":
            st.button("Switch to the native ladder (runs on this CPU)", key="to_native",
                      on_click=lambda: st.session_state.update(stage_choice="native"))


@st.fragment(run_every=1.0)
def live(manager: JobManager, operator: bool) -> None:
    if st.session_state.pop("redraw_page", False):
        st.rerun()  # the job ended a tick ago: now redraw the whole page with its final results
    snap = manager.active()
    queued = manager.queued()
    if snap is None:
        if st.session_state.get("was_live"):
            st.session_state["was_live"] = False
            done = next((j for j in manager.jobs() if not j.active), None)
            if done is not None:
                # The verdict at once, from this fragment (a whole-page rerun takes a second or more on a small
                # server); the page with every chart follows on the next tick.
                verdict_card(summarize(done.run))
                st.session_state["redraw_page"] = True
                return
            st.rerun()
        if queued:
            st.info(f"{len(queued)} job(s) queued; starting…")
        return
    st.session_state["was_live"] = True
    st.subheader("Running now")
    top, cancel_col = st.columns([6, 1])
    with top:
        job_view.job_header(snap)
    if cancel_col.button("Cancel", key=f"cancel_{snap.job_id}", disabled=not operator,
                         help="stops the running stage and drops the rest"):
        manager.cancel(snap.job_id, role=role())
    for q in queued:
        st.caption(f"Queued #{(q.position or 0) + 1}: job `{q.job_id}` · {q.run.preset} · {len(q.run.stages)} stages")
    job_view.stage_progress(snap)
    summary = summarize(snap.run)
    verdict_card(summary)
    job_view.fallback_warnings(snap.run)
    # Snapshots change with every iteration; charts are rebuilt at most once a second and shared by all viewers.
    job_view.charts(summary, key="live", version=(snap.job_id, int(time.time())))
