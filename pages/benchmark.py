"""Benchmark: choose a model and a ladder of stages, run it, watch it live, read the verdict."""
from __future__ import annotations

import streamlit as st

from bench_core.cluster.nodes import EVERY_GPU_TYPE, Retry, pick
from bench_core.config.bench_config import resolve_device
from bench_core.levers import presets
from bench_core.machine.telemetry import has_nvidia_gpu
from bench_core.machine.timer import TIMER_NAMES
from bench_core.measure.estimate import WARN_ABOVE_S, bf16_note
from bench_core.results.eta import run_estimate
from bench_core.results.summary import summarize
from bench_core.run.runner import new_run
from bench_core.service.jobs import LimitExceeded, NotAllowed
from dashboard import form, job_view, ladder, model_source
from dashboard.live import live, verdict_card
from dashboard.page_header import open_page, page_header
from dashboard.session import (
    cluster_nodes,
    is_operator,
    role,
    session_id,
)

manager = open_page()
sid = session_id()
probe = manager.probe(timeout=0)
device_kind = ("cuda" if probe.cuda_available else "cpu") if probe else ("cuda" if has_nvidia_gpu() else "cpu")

page_header(manager, "Fused kernels and mixed precision: what does this machine gain?" if device_kind == "cpu" else
            "Fused kernels and mixed precision: what does this GPU gain?",
            f"Each stage runs in its own fresh process, timed with {TIMER_NAMES[device_kind]} after warm-up, and "
           "the profiler proves which kernels ran and where the time goes. Nothing is smoothed or assumed.")

if probe is None:
    st.info("Probing this machine (torch, GPU, Apex)… lever availability appears in a few seconds.")

    @st.fragment(run_every=1.0)
    def wait_for_probe() -> None:
        if manager.probe(timeout=0) is not None:
            st.rerun()  # redraw the page with lever availability

    wait_for_probe()
else:
    st.caption(f"Machine: **{probe.cuda.name or 'CPU only'}** · torch {probe.torch} · Apex: **{probe.apex.label}**")
    if not probe.cuda_available:
        seed = presets.preset("seed")
        runs_here = [s for s in seed if not s.unavailable_reason(probe, "cpu")]
        st.info(f"No CUDA GPU here: Apex's stages need one (and a CUDA build of torch), so the seed ladder runs "
                f"{len(runs_here)} of its {len(seed)} stages (its {len(presets.PRESETS['seed'])} steps and their "
                f"twins) on this machine (the PyTorch ones). The "
                f"**{presets.default_preset('cpu')}** ladder, chosen below, runs on the CPU.")

form.init(device_kind)
cfg, errors = form.validate(manager.limits, probe)
device = resolve_device(st.session_state["cfg_device"], device_kind == "cuda")


def submit() -> None:
    """Run button callback: validate the raw field values; nothing is queued unless every field passes."""
    st.session_state["submit_message"] = None
    cfg, errors = form.validate(manager.limits, probe)
    if cfg is None:
        st.session_state["submit_message"] = ("error", "Nothing was run: fix the fields marked below.")
        return
    preset, stages = ladder.chosen(probe, device)
    try:
        nodes = cluster_nodes()
        machines: list[str | None] = [None] if nodes is None else \
            list(pick(nodes, st.session_state.get("machines_choice") or []))
        if not machines:
            raise ValueError("machine: pick at least one machine of the cluster")
        retry = st.session_state.get("retry_where", Retry.SAME_GPU) if st.session_state.get("retry_on_lost") \
            else Retry.NEVER
        jobs = [manager.submit(cfg, stages, preset, session_id=sid, role=role(), machine=m, retry=retry)
                for m in machines]
        where = "" if nodes is None else " on " + ", ".join(str(m) for m in machines)
        st.session_state["submit_message"] = ("success", f"Submitted job(s) {', '.join(j.job_id for j in jobs)} "
                                                         f"({len(stages)} stages){where}.")
    except (LimitExceeded, NotAllowed, ValueError) as exc:
        st.session_state["submit_message"] = ("error", str(exc))


settings, picker = st.columns([3, 2], gap="large")
with settings:
    st.subheader("Model and run")
    form.draw(device_kind, errors, manager.limits)
    model_source.facts(form.parse(manager.limits)[0])
ladder.init(device)
with picker:
    st.subheader("Stages")
    ladder.draw(probe, device, manager.limits.max_stages_per_job)
if st.session_state.get("stage_choice") == "custom":
    ladder.builder(probe, device, manager.limits.max_stages_per_job)
cluster = cluster_nodes()
if cluster is not None:  # a cluster is configured: the same ladder on each chosen machine, each run on its own GPU
    st.multiselect("Machines", [EVERY_GPU_TYPE] + [n.name for n in cluster if n.alive], key="machines_choice",
                   default=[EVERY_GPU_TYPE], help="the Machines page lists each node's GPU and probe")
    if st.checkbox("Retry on another machine if the node is lost", key="retry_on_lost",
                   help="the stage being measured then fails 'node lost'; the stages not yet measured run on the "
                        "other machine, and each stage names the machine that ran it"):
        st.radio("Retry on", [Retry.SAME_GPU, Retry.ANY], format_func=lambda r: r.label, key="retry_where",
                 horizontal=True)

preset, stages = ladder.chosen(probe, device)
can_run = [s for s, reason in ladder.runnable(stages, probe, device) if reason is None]
operator = is_operator()
run_col, msg_col = st.columns([1, 4])
run_col.button("Run", type="primary", on_click=submit, disabled=not operator or bool(errors),
               help=None if operator else "viewers cannot start runs: enter the operator token in the sidebar")
planned = run_estimate(new_run(cfg, can_run, probe, preset)) if cfg and probe and can_run else None
estimate = planned.seconds if planned else None
if errors:  # the stages could run, the form cannot: say what holds the run back, not that stages are ready
    msg_col.caption(f"Nothing runs until {'the field' if len(errors) == 1 else f'{len(errors)} fields'} marked "
                    f"above {'is' if len(errors) == 1 else 'are'} mended")
else:
    msg_col.caption(f"{len(can_run)} of {len(stages)} chosen stages can run on this machine"
                    + (f" · {cfg.repeats} round(s)" if cfg else "") + (f" · {planned.text()}" if planned else ""))
emulated = bf16_note(cfg, probe, device, can_run) if cfg and probe else ""
if emulated:
    msg_col.info(emulated)
if estimate and estimate > WARN_ABOVE_S:
    msg_col.warning(f"This run is estimated to take about {estimate / 60:.0f} minutes on this machine. A smaller "
                    "model size, fewer iterations or fewer stages would finish sooner.")
message = st.session_state.get("submit_message")
if message and not (message[0] == "error" and not errors and message[1].startswith("Nothing was run")):
    (msg_col.success if message[0] == "success" else msg_col.error)(message[1])

st.divider()
live(manager, operator)

if manager.active() is None:
    finished = [j for j in manager.jobs() if not j.active]
    mine = [j for j in finished if j.session_id == sid]
    latest = next(iter(mine or finished), None)
    if latest is not None:
        st.subheader("Latest result" + ("" if latest.session_id == sid else " (started by another viewer)"))
        verdict_card(summarize(latest.run), cpu_switch=True)
        job_view.finished_job(latest, key="final")
    else:
        st.caption("No run yet on this server. Pick a ladder and press Run; past runs are on the History page.")
