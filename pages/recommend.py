"""Recommend: what should I switch on? Every combination of this machine's levers the registry allows, times the
batch sizes that fit, predicted, then the few that could still win measured end to end in fresh processes while
the budget lasts; the answer with its interval over the user's current setup, what it saves, and its recipe."""
from __future__ import annotations

import time

import streamlit as st

from bench_core.config.bench_config import ConfigError, resolve_device
from bench_core.levers.stage import Stage
from bench_core.machine.telemetry import has_nvidia_gpu
from bench_core.models.families import parts_family
from bench_core.recommend.cli import DEFAULT_BUDGET
from bench_core.recommend.memory import default_budget
from bench_core.results.records import Status
from bench_core.service.jobs import LimitExceeded, NotAllowed
from bench_core.service.recommendations import RecommendRequest
from dashboard import form, model_source, recommendation
from dashboard.page_header import open_page, page_header
from dashboard.session import get_recommendations, is_operator, listed, role

manager = open_page()
recs = get_recommendations()
probe = manager.probe(timeout=0)
device_kind = ("cuda" if probe.cuda_available else "cpu") if probe else ("cuda" if has_nvidia_gpu() else "cpu")
page_header(manager, "Recommend: what should I switch on?",
            "Every combination of the levers this machine has that the lever registry allows together, times the "
            "batch sizes that fit your memory, is predicted; those that could still win run end to end in fresh "
            "processes, fewest first, until the leader's interval separates from the rest or the budget ends. Only "
            "a candidate measured with verified kernels is ever recommended.")
recommendation.style()

# the Benchmark page's fields, shared: a field set through the session state keeps its value across pages (left as
# the other page's widget, it opened empty here)
for shared in [f"cfg_{n}" for n in form.FORM_FIELDS] + ["cfg_device", "cfg_family", "size_preset"]:
    if shared in st.session_state:
        st.session_state[shared] = st.session_state[shared]
form.init(device_kind)
cfg, errors = form.validate(manager.limits, probe)
device = resolve_device(st.session_state["cfg_device"], device_kind == "cuda")
linked = st.query_params.get("recommendation")
with st.expander("Ask for a new recommendation", expanded=False) if linked else st.container():
    st.subheader("Your model")
    form.draw(device_kind, errors, manager.limits)
    model_source.facts(form.parse(manager.limits)[0])
    memory = default_budget(probe.free_bytes.get(device), device) if probe else None
    baseline = ((Stage().for_family(parts_family(cfg)) if cfg is not None else None) or Stage()).key
    # only the button starts one: Enter in a field would launch minutes of measuring
    with st.form("recommend_form", enter_to_submit=False):
        st.subheader("The search")
        left, right = st.columns(2)
        left.text_input("Batch sizes: N, or A:B for every doubling (empty: the batch size above)", key="rec_batch")
        right.text_input("Memory GiB (empty: the default below)", key="rec_memory")
        left.text_input("Your current setup, a stage key (--from)", key="rec_from", placeholder=baseline)
        right.text_input("Budget for measuring (e.g. 10m, 90s)", key="rec_budget", value=DEFAULT_BUDGET)
        left.text_input("Training run's tokens (for what it saves)", key="rec_tokens", placeholder="e.g. 1e9")
        right.text_input("GPU price per hour (for the cost saved)", key="rec_price")
        st.text_input("Levers to leave out, comma separated (e.g. compile)", key="rec_exclude")
        st.checkbox("Hold tokens per step at the model's (one batch size only)", key="rec_hold")
        st.caption(f"Default memory: **{memory.gib:.1f} GiB**, {memory.why}." if memory else
                   "Default memory: free memory unknown until the machine is probed; give one.")
        start = st.form_submit_button("Find what to switch on", type="primary",
                                      disabled=not is_operator() or recs.running)

if start:
    if cfg is None:
        st.error("Nothing was launched: fix the model's fields marked above.")
    else:
        state = st.session_state
        request = RecommendRequest(cfg, state["rec_batch"], state["rec_hold"], state["rec_memory"], state["rec_from"],
                                   state["rec_budget"], state["rec_tokens"], state["rec_price"], state["rec_exclude"])
        try:
            st.session_state["rec_watching"] = recs.start(request, role())
            st.rerun()   # the page again, its button off while the search runs
        except ConfigError as exc:
            st.error(f"Nothing was launched: {exc.field}: {exc.limit} (got {exc.value!r})")
        except (LimitExceeded, NotAllowed) as exc:
            st.error(f"Nothing was launched: {exc}")
if not is_operator():
    st.caption("Only operators start and cancel recommendations.")


# polled only while one runs: an idle page sends nothing
@st.fragment(run_every=1.0 if recs.running else None)
def live() -> None:
    job = recs.current()
    if job is None or not recs.running:
        watched = st.session_state.pop("rec_watching", None)
        if watched is not None and job is not None and job.job_id == watched:
            st.session_state["rec_ended"] = watched
            st.rerun()   # the whole page: the answer shows and the form is free
        return
    st.session_state["rec_watching"] = job.job_id   # also one another session started
    p = job.progress
    eta = f", about {job.eta_s:.0f} s left" if job.eta_s is not None else ", time left: known after the first process"
    text = f"{p.text} ({p.measured_processes} processes so far{eta})" if p else "predicting the candidates"
    elapsed = max(time.time() - job.started_at, 0.0)
    st.progress(0.0 if job.eta_s is None else elapsed / (elapsed + job.eta_s) if elapsed + job.eta_s else 1.0,
                text=f"Searching {job.candidates} candidates: {text}")
    st.button("Cancel (keeps what was measured)", on_click=lambda: recs.cancel(role()), disabled=not is_operator(),
              key="rec_cancel")


live()
ended = st.session_state.pop("rec_ended", None)
job = recs.current()
if ended is not None and job is not None and job.job_id == ended:
    if job.status is Status.FAILED:
        st.error(f"The recommendation failed: {job.error}")
    else:
        st.success(f"The search ended ({job.status.value})"
                   + ("; the answer is built from what was measured." if job.status is Status.CANCELLED else "."))
    st.session_state["rec_pick"] = ended

st.divider()
st.subheader("Recommendations")
rows = listed(recs.store.list_recommendations, "the history database") if recs.store else []
if not rows:
    st.info("No recommendation yet: ask for one above, run `python -m bench_core recommend`, or import one's JSON "
            "on the History page.")
else:
    labels = {r["recommendation_id"]: f"{r['created_at'][:16].replace('T', ' ')} · {r['recommended'] or 'none'} · "
              f"{r['gpu'] or r['device']} · {r['recommendation_id']}" for r in rows}
    if linked in labels and st.session_state.get("rec_link") != linked:   # History's "open", honoured once
        st.session_state["rec_pick"] = st.session_state["rec_link"] = linked
    if st.session_state.get("rec_pick") not in labels:
        st.session_state["rec_pick"] = next(iter(labels))
    chosen = st.selectbox("Recommendation", list(labels), format_func=lambda i: labels[i], key="rec_pick")
    loaded = recs.store.load(chosen) if recs.store and chosen else None
    if loaded is not None:
        recommendation.show(loaded, "past")
