"""The live view of the running job, and the verdict card shown on every result (live and final)."""
from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from bench_core.results.answer import answer
from bench_core.results.headline import headline
from bench_core.results.summary import RunSummary, summarize
from bench_core.service.jobs import JobManager
from dashboard import job_view
from dashboard.examples import example_buttons
from dashboard.session import role

CONTRIBUTION_COLUMNS = {
    "lever": st.column_config.TextColumn("Lever"), "against": st.column_config.TextColumn("Against"),
    "effect": st.column_config.TextColumn("Effect (95% CI)", width="large",
                                          help="the against stage's step time ÷ the lever's, paired by round"),
    "bound": st.column_config.TextColumn("Bound", help="who set each stage's pace: the GPU, or the host CPU "
                                         "launching kernels"),
    "proof": st.column_config.TextColumn("Proof", help="the profiler's proof that the lever's kernels ran")}


def verdict_card(summary: RunSummary, cpu_switch: bool = False, key: str = "verdict") -> None:
    """st.container(key="verdict"): the answer card first (each vendor's word, with its figure and cause), each
    lever's contribution as a table row, a CPU run's next step, then the rest of the verdict. Several on one page
    (History) each get their own key, starting with "verdict"."""
    with st.container(key=key, border=True):
        card = answer(summary)
        verdict = headline(summary)
        so_far = " (so far)" if summary.run.status.value == "running" else ""
        with st.container(key=f"answer_{key}"):
            for line in card.lines:
                st.markdown(line.markdown)
        if card.rows:   # what each lever adds, from the pairs that differ by it alone
            st.markdown("#### What each lever adds" + so_far)
            st.dataframe(pd.DataFrame([{"lever": r.lever, "against": r.against, "effect": r.effect,
                                        "bound": r.bound, "proof": r.proof} for r in card.rows]),
                         hide_index=True, key=f"rows_{key}", column_config=CONTRIBUTION_COLUMNS)
            with st.expander("The two stages of each row"):
                st.markdown("\n".join(f"{i}. `{r.stages}`" + (f"; {r.settle}" if r.settle else "")
                                      for i, r in enumerate(card.rows, 1)))
        if card.combined:
            st.markdown(card.combined)
        if card.next_step:
            st.info(f"**Next step:** {card.next_step}")
            example_buttons(f"examples_{key}")
        rest = verdict.lines[len(verdict.contributions):]
        if rest or not card.rows:
            st.markdown("#### Verdict" + ("" if card.rows else so_far))
        for said in rest or (() if card.rows else ("No stage has finished yet.",)):
            st.markdown(f"- {said}")
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
