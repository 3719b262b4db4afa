"""Benchmark: choose a model and a ladder of stages, run it, watch it live."""
from __future__ import annotations

import time

import streamlit as st

from bench_core.config import DEVICES, MODEL_SIZES, BenchConfig, ConfigError, collect_errors, defaults_for, resolve_device
from bench_core.jobs import LimitExceeded, NotAllowed
from bench_core.levers import KINDS, PRESETS, Stage, across_gpus, names_of
from bench_core.probe import cuda_available, free_bytes
from bench_core.telemetry import has_nvidia_gpu
from pages import job_view
from pages.common import access_panel, get_manager, is_operator, persistence_banner, role, session_id

FIELDS = [("depth", "Depth (layers)"), ("width", "Width"), ("heads", "Heads"), ("seq_len", "Sequence length"),
          ("batch_size", "Batch size"), ("vocab_size", "Vocab size"), ("warmup", "Warm-up iterations"),
          ("iters", "Timed iterations")]

manager = get_manager()
sid = session_id()
access_panel()
probe = manager.probe(timeout=0)

st.title("⚡ Fused kernels & mixed precision: what does this GPU really gain?")
st.caption("Each stage runs in its own fresh process, timed with CUDA events after warm-up, and a profiler "
           "proves which kernels ran. Figures are whatever this GPU measures — nothing is smoothed or assumed.")
persistence_banner(manager)

if probe is None:
    st.info("Probing this machine (torch, GPU, Apex)… lever availability appears in a few seconds.", icon="🔎")
    device_kind = "cuda" if has_nvidia_gpu() else "cpu"

    @st.fragment(run_every=1.0)
    def wait_for_probe() -> None:
        if manager.probe(timeout=0) is not None:
            st.rerun()  # redraw the page with lever availability

    wait_for_probe()
else:
    device_kind = "cuda" if cuda_available(probe) else "cpu"
    cuda = probe.get("cuda") or {}
    apex = (probe.get("apex") or {}).get("status", "missing")
    st.caption(f"Machine: **{cuda.get('name', 'CPU only')}** · torch {probe.get('torch')} · Apex: **{apex}**")

defaults = defaults_for(device_kind)
for name, _ in FIELDS:
    st.session_state.setdefault(f"cfg_{name}", getattr(defaults, name))
st.session_state.setdefault("cfg_device", "auto")
errors: dict[str, str] = st.session_state.get("field_errors", {})


def apply_size() -> None:
    for name, value in MODEL_SIZES[st.session_state["size_preset"]].items():
        st.session_state[f"cfg_{name}"] = value
    st.session_state["field_errors"] = {}


def current_config() -> BenchConfig:
    return BenchConfig(**{name: st.session_state[f"cfg_{name}"] for name, _ in FIELDS},
                       seed=1234, device=st.session_state["cfg_device"])


def lever_reason(kind: str, name: str, device: str) -> str | None:
    if probe is None:
        return "waiting for the probe"
    return Stage(**{kind: name}).unavailable_reason(probe, device)


def chosen_stages() -> tuple[str, list[Stage]]:
    choice = st.session_state.get("stage_choice", "seed")
    if choice == "custom":
        return "custom", [Stage(**s) for s in st.session_state.get("custom_ladder", [])]
    return choice, across_gpus(PRESETS[choice], st.session_state.get("gpu_counts") or ["1"])


def submit() -> None:
    """Run button callback: validate first; nothing is queued unless every field passes."""
    st.session_state["submit_message"] = None
    cfg = current_config()
    found = collect_errors(cfg, manager.limits, cuda_available(probe or {}), free_bytes(probe or {}))
    st.session_state["field_errors"] = {e.field: str(e) for e in found}
    if found:
        return
    preset, stages = chosen_stages()
    try:
        snap = manager.submit(cfg, stages, preset, session_id=sid, role=role())
        st.session_state["submit_message"] = ("success", f"Submitted job {snap.job_id} ({len(stages)} stages).")
    except ConfigError as exc:
        st.session_state["field_errors"] = {exc.field: str(exc)}
    except (LimitExceeded, NotAllowed) as exc:
        st.session_state["submit_message"] = ("error", str(exc))


settings, picker = st.columns([3, 2], gap="large")
with settings:
    st.subheader("Model and run")
    st.selectbox("Start from a model size", list(MODEL_SIZES), key="size_preset", on_change=apply_size,
                 index=list(MODEL_SIZES).index("gpt2-small" if device_kind == "cuda" else "tiny"))
    cols = st.columns(3)
    for i, (name, label) in enumerate(FIELDS):
        with cols[i % 3]:
            st.number_input(label, min_value=1, step=1, key=f"cfg_{name}")
            if name in errors:
                st.error(errors[name], icon="🚫")
    with cols[len(FIELDS) % 3]:
        st.selectbox("Device", DEVICES, key="cfg_device", help="auto picks CUDA when there is a GPU")
        if "device" in errors:
            st.error(errors["device"], icon="🚫")
    other = {f: m for f, m in errors.items() if f not in {n for n, _ in FIELDS} | {"device"}}
    for field, message in other.items():
        st.error(message, icon="🚫")

with picker:
    st.subheader("Stages")
    st.radio("Ladder", ["seed", "native", "all", "custom"], key="stage_choice", horizontal=True,
             captions=["the article's 4 steps", "PyTorch's own", "both + peers", "build your own"])
    device = resolve_device(st.session_state["cfg_device"], device_kind == "cuda")
    if st.session_state["stage_choice"] == "custom":
        ladder = st.session_state.setdefault("custom_ladder", [])
        if not ladder:
            st.caption("No stage yet: build one below, lever by lever, and add it to the ladder.")
        for i, spec in enumerate(list(ladder)):
            a, b = st.columns([5, 1])
            reason = Stage(**spec).unavailable_reason(probe, device) if probe else None
            a.markdown(f"{i + 1}. `{Stage(**spec).key}`" + (f" — ⛔ *{reason}*" if reason else ""))
            if b.button("✖", key=f"remove_{i}", help="remove this stage"):
                ladder.pop(i)
                st.rerun()
    else:
        counts = [n for n in names_of("gpus") if not lever_reason("gpus", n, device)]
        if len(counts) > 1:
            st.multiselect("GPU counts (each stage runs at each; > 1 through torchrun + DDP)", counts,
                           default=["1"], key="gpu_counts",
                           help="limited to torch.cuda.device_count(); on CPU, gloo processes")
        for i, stage in enumerate(PRESETS[st.session_state["stage_choice"]]):
            reason = stage.unavailable_reason(probe, device) if probe else None
            mark = f"⛔ *unavailable: {reason}*" if reason else "✅"
            st.markdown(f"{i + 1}. `{stage.key}` — {mark}")

if st.session_state["stage_choice"] == "custom":
    st.subheader("Build a stage")
    ladder = st.session_state.setdefault("custom_ladder", [])
    for col, kind in zip(st.columns(len(KINDS)), KINDS):
        with col:
            available = [n for n in names_of(kind) if not lever_reason(kind, n, device)]
            st.radio(kind, available or names_of(kind)[:1], key=f"lever_{kind}")
            for name in names_of(kind):
                reason = lever_reason(kind, name, device)
                if reason:
                    st.checkbox(name, value=False, disabled=True, key=f"na_{kind}_{name}", help=reason)
                    st.caption(f"↳ {reason}")
    if st.button("➕ Add stage to the ladder", disabled=len(ladder) >= manager.limits.max_stages_per_job):
        ladder.append({kind: st.session_state[f"lever_{kind}"] for kind in KINDS})
        st.rerun()

operator = is_operator()
run_col, msg_col = st.columns([1, 4])
run_col.button("▶ Run", type="primary", on_click=submit, disabled=not operator,
               help=None if operator else "viewers cannot start runs: enter the operator token in the sidebar")
message = st.session_state.get("submit_message")
if message:
    (msg_col.success if message[0] == "success" else msg_col.error)(message[1])

st.divider()


@st.fragment(run_every=1.0)
def live() -> None:
    snap = manager.active()
    queued = manager.queued()
    if snap is None:
        if st.session_state.get("was_live"):
            st.session_state["was_live"] = False
            st.rerun()  # the job just ended: redraw the page with its final results
        if queued:
            st.info(f"{len(queued)} job(s) queued; starting…")
        return
    st.session_state["was_live"] = True
    st.subheader("Running now")
    top, cancel_col = st.columns([6, 1])
    with top:
        job_view.job_header(snap)
    if cancel_col.button("■ Cancel", key=f"cancel_{snap.job_id}", disabled=not operator,
                         help="stops the running stage and drops the rest"):
        manager.cancel(snap.job_id, role=role())
    for q in queued:
        st.caption(f"Queued #{q.position + 1}: job `{q.job_id}` · {q.run.preset} · {len(q.run.stages)} stages")
    job_view.stage_progress(snap)
    job_view.fallback_warnings(snap.run)
    # Snapshots change with every iteration; charts are rebuilt at most once a second and shared by all viewers.
    job_view.charts(snap.run, key="live", version=(snap.job_id, int(time.time())))


live()

if manager.active() is None:
    finished = [j for j in manager.jobs() if not j.active]
    mine = [j for j in finished if j.session_id == sid]
    latest = (mine or finished or [None])[0]
    if latest is not None:
        st.subheader("Latest result" + ("" if latest.session_id == sid else " (started by another viewer)"))
        job_view.finished_job(latest, key="final")
    else:
        st.caption("No run yet on this server. Pick a ladder and press Run; past runs are on the History page.")
