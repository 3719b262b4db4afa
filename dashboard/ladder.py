"""Choosing the stages: a preset ladder (at one or more GPU counts) or a custom one, lever by lever."""
from __future__ import annotations

import streamlit as st

from bench_core.config.settings import load_limits
from bench_core.levers.presets import PRESETS, TWINS, across_gpus, default_preset, family_variant, preset
from bench_core.levers.registry import KINDS, names_of
from bench_core.levers.stage import Stage
from bench_core.machine import stage_costs
from bench_core.machine.probe import Probe
from bench_core.models.families import parts_family
from dashboard import model_source
from dashboard.model_source import SourceChoice

# seed under the llama family is the llama-seed ladder: each preset takes the form's family's norms
PRESET_CAPTIONS = {"seed": f"Apex's {len(PRESETS['seed'])} steps and {len(TWINS['seed'])} twins",
                   "native-eager": "PyTorch's own, no compile", "native": "PyTorch's own + compile",
                   "peers": "Apex vs Liger, FP8",
                   "all": "seed + native + more", "custom": "build your own"}


def family() -> str:
    """The family whose parts the form's ladders name: a Hugging Face architecture takes the built-in family with
    its norm (its levers act by module surgery); "hf" until a valid source is picked."""
    if model_source.choice() is not SourceChoice.BUILT_IN:
        source, _ = model_source.read(load_limits())
        return parts_family(model_source.own_shape(source)) if source is not None else "hf"
    return st.session_state.get("cfg_family", "gpt")


def preset_name(choice: str) -> str:
    """The preset a radio choice runs for the form's family (seed on llama is llama-seed, as the history names it)."""
    return family_variant(choice, family())


def init(device: str) -> None:
    """The first ladder offered is the engine's default for this device (native on a CPU: it runs there)."""
    st.session_state.setdefault("stage_choice", default_preset(device))


def chosen(probe: Probe | None, device: str) -> tuple[str, list[Stage]]:
    choice = st.session_state.get("stage_choice", default_preset(device))
    if choice == "custom":
        return "custom", [Stage.from_key(key) for key in st.session_state.get("custom_ladder", [])]
    name = preset_name(choice)
    return name, across_gpus(preset(name, family()), st.session_state.get("gpu_counts") or ["1"])


def runnable(stages: list[Stage], probe: Probe | None, device: str) -> list[tuple[Stage, str | None]]:
    def reason(s: Stage) -> str | None:
        return s.family_error(family()) or (s.unavailable_reason(probe, device) if probe else "waiting for the probe")
    return [(s, reason(s)) for s in stages]


def captions(device: str) -> list[str]:
    """Each ladder's caption; a ladder that compiles states the compile's cost on this machine."""
    costs = stage_costs.load(device)
    how = "measured here" if costs.measured_compile else "assumed until measured here"
    out = []
    for name, caption in PRESET_CAPTIONS.items():
        compiled = sum(1 for s in PRESETS.get(name, ()) if s.compile_lever.traces_model)
        if compiled and device == "cpu":
            caption += f" (compiling adds about {compiled * costs.compile_s:.0f} s a round, {how})"
        out.append(caption)
    return out


def draw(probe: Probe | None, device: str, max_stages: int) -> None:
    st.radio("Ladder", list(PRESET_CAPTIONS), key="stage_choice", horizontal=True, captions=captions(device))
    choice = st.session_state["stage_choice"]
    if choice != "custom":
        counts = [n for n in names_of("gpus") if probe and not Stage(gpus=n).unavailable_reason(probe, device)]
        if len(counts) > 1 and device == "cuda":   # CPU runs >1 only as gloo processes: no GPU count to pick
            st.multiselect("GPU counts (each stage runs at each; > 1 through torchrun + DDP)", counts,
                           default=["1"], key="gpu_counts")
        for i, (stage, reason) in enumerate(runnable(list(preset(preset_name(choice), family())), probe, device)):
            st.markdown(f"{i + 1}. `{stage.key}` — " + (f"*unavailable: {reason}*" if reason else "runs here"))
        return
    ladder = st.session_state.setdefault("custom_ladder", [])
    if not ladder:
        st.caption("No stage yet: build one below, lever by lever, and add it to the ladder.")
    for i, key in enumerate(list(ladder)):  # stage keys, as the CLI's --stages and the CSV write them
        a, b = st.columns([5, 1])
        reason = runnable([Stage.from_key(key)], probe, device)[0][1] if probe else None
        a.markdown(f"{i + 1}. `{key}`" + (f" — *unavailable: {reason}*" if reason else ""))
        if b.button("Remove", key=f"remove_{i}", help="remove this stage"):
            ladder.pop(i)
            st.rerun()


def builder(probe: Probe | None, device: str, max_stages: int) -> None:
    """Full-width lever picker. Each lever is checked with the levers already picked (the GPU count first), so
    a lever that needs 2 GPUs is offered once 2 are picked."""
    st.subheader("Build a stage")
    ladder = st.session_state.setdefault("custom_ladder", [])
    picked: dict[str, str] = {}
    order = ["gpus"] + [k for k in KINDS if k != "gpus"]
    cols = dict(zip(order, st.columns(len(order)), strict=False))
    for kind in order:
        with cols[kind]:
            def reason_of(name: str, kind: str = kind) -> str | None:
                if probe is None:
                    return "waiting for the probe"
                try:
                    stage = Stage(**{**picked, kind: name})
                    return stage.family_error(family()) or stage.unavailable_reason(probe, device)
                except Exception as exc:  # an invalid combination so far
                    return str(exc)
            available = [n for n in names_of(kind) if not reason_of(n)]
            picked[kind] = st.radio(kind, available or names_of(kind)[:1], key=f"lever_{kind}")
            for name in names_of(kind):
                reason = reason_of(name)
                if reason:
                    st.caption(f"{name}: {reason}")
    if st.button("Add stage to the ladder", disabled=len(ladder) >= max_stages):
        ladder.append(Stage(**{kind: st.session_state[f"lever_{kind}"] for kind in KINDS}).key)
        st.rerun()
