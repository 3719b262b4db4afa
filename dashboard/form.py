"""The model-and-run form. Fields are text inputs, so every value the user typed reaches the app's own
validation, which says what is wrong under the field; nothing runs while a field is invalid."""
from __future__ import annotations

import re

import streamlit as st

from bench_core.config.bench_config import (
    DEVICES,
    FIELD_HELP,
    FIELD_LABELS,
    INT_FIELDS,
    WORKLOADS,
    BenchConfig,
    ConfigError,
    defaults_for,
)
from bench_core.config.settings import Limits
from bench_core.machine.probe import Probe
from bench_core.models.families import FAMILIES, collect_errors
from dashboard import model_source
from dashboard.model_source import SourceChoice

FORM_FIELDS = [n for n in INT_FIELDS if n != "seed"]


def init(device_kind: str) -> None:
    defaults = defaults_for(device_kind)
    for name in FORM_FIELDS:
        st.session_state.setdefault(f"cfg_{name}", str(getattr(defaults, name)))
    st.session_state.setdefault("cfg_device", "auto")
    st.session_state.setdefault("cfg_family", defaults.family)
    model_source.init()


def apply_size() -> None:
    for name, value in WORKLOADS[st.session_state["size_preset"]].items():
        st.session_state[f"cfg_{name}"] = str(value)


# code names that read as no word (seq_len, batch_size…): a limit that names one says its label instead
CODE_NAMES = re.compile(r"\b(" + "|".join(name for name in FIELD_LABELS if "_" in name) + r")\b")


def labelled(error: ConfigError) -> str:
    """The error as the form shows it: the field's label, as it reads above the box, not its code name, also
    where the limit names another field ("Sequence length x Batch size = …")."""
    label = FIELD_LABELS.get(error.field, error.field)
    limit = CODE_NAMES.sub(lambda m: FIELD_LABELS[m[1]], error.limit)
    return f"{label}: {limit}" if error.value == "" else f"{label} = {error.value}: {limit}"


def parse(limits: Limits) -> tuple[BenchConfig | None, dict[str, str]]:
    """The config the fields and the model source say, and every error by field. Recomputed on each rerun: no
    stale message."""
    values: dict[str, int] = {}
    errors = {}
    for name in FORM_FIELDS:
        raw = str(st.session_state.get(f"cfg_{name}", "")).strip()
        try:
            values[name] = int(raw)
        except ValueError:
            errors[name] = labelled(ConfigError(name, raw, "must be an integer" if raw else "is empty: enter a number"))
    if errors:
        return None, errors
    base = BenchConfig.from_dict({**values, "seed": 1234, "device": st.session_state["cfg_device"],
                                  "family": st.session_state.get("cfg_family", "gpt")})
    if model_source.choice() is SourceChoice.BUILT_IN:
        return base, {}
    source, error = model_source.read(limits)
    if error is not None:
        return None, {error.field: labelled(error)}
    if source is None:
        return None, {"config": "config.json: none uploaded yet; choose a file (nothing runs until one is read)"}
    try:
        return model_source.shaped(source, base), {}
    except ConfigError as exc:
        return None, {exc.field: labelled(exc)}


def validate(limits: Limits, probe: Probe | None) -> tuple[BenchConfig | None, dict[str, str]]:
    cfg, errors = parse(limits)
    if cfg is None:
        return None, errors
    probe = probe or Probe.from_dict({})
    found = collect_errors(cfg, limits, probe.cuda_available, probe.free_bytes)
    by_field: dict[str, str] = {}
    for e in found:
        by_field.setdefault(e.field, labelled(e))
    return (cfg if not by_field else None), by_field


def draw(device_kind: str, errors: dict[str, str], limits: Limits) -> None:
    st.radio("Model", list(SourceChoice), key="model_source", horizontal=True, on_change=model_source.fill_fields,
             args=(limits,), help="a Hugging Face architecture's shape fields start at its own values; each one "
             "you change overrides it, keeping the head size and the query-to-KV head ratio")
    built_in = model_source.choice() is SourceChoice.BUILT_IN
    if built_in:
        st.selectbox("Start from a model size", list(WORKLOADS), key="size_preset", on_change=apply_size,
                     index=list(WORKLOADS).index("gpt2-small" if device_kind == "cuda" else "tiny"))
    # Two fields a row, in reading order, so a narrow screen stacks them in the same order.
    first = "family" if built_in else "config"
    names = [first] + FORM_FIELDS + ["device"]
    other = {f: m for f, m in errors.items() if f not in names}
    for start in range(0, len(names), 2):
        cols = st.columns(2)
        for col, name in zip(cols, names[start:start + 2], strict=False):
            with col:
                if name == "device":
                    st.selectbox(FIELD_LABELS["device"], DEVICES, key="cfg_device", help=FIELD_HELP["device"])
                elif name == "family":
                    st.selectbox(FIELD_LABELS["family"], FAMILIES, key="cfg_family", help=FIELD_HELP["family"])
                elif name == "config":
                    model_source.draw_picker(limits)
                    for message in other.values():   # the config's own errors, under the picker
                        st.error(message)
                else:   # an architecture's heads follow its width (model_source.follow_width)
                    follows = name == "width" and not built_in
                    st.text_input(FIELD_LABELS[name], key=f"cfg_{name}", help=FIELD_HELP[name] or None,
                                  on_change=model_source.follow_width if follows else None,
                                  args=(limits,) if follows else None)
                if name in errors:
                    st.error(errors[name])
    if built_in:
        for message in other.values():
            st.error(message)

