"""Where the form's model comes from: a built-in family, a Hugging Face architecture of the catalog, or an uploaded
config.json. The upload is data only: the engine's own validators (models.hf_config) read it, so remote code,
unknown model types and sizes past the limits are refused with the field and the limit named, and nothing runs.
The shape fields override the architecture's own values under its head rules, as the CLI's flags do."""
from __future__ import annotations

from enum import StrEnum

import streamlit as st

from bench_core.config.bench_config import BenchConfig, ConfigError, ModelSource, SourceKind
from bench_core.config.settings import Limits
from bench_core.models.families import Architecture, NormType, architecture, family

SHAPE_FIELDS = ("depth", "width", "heads", "vocab_size")   # what an architecture's config sets; the rest is the run's
UPLOAD_KEY = "hf_upload"
FOLLOWED_HEADS = "hf_heads_followed"   # the heads value follow_width last wrote into the field


class SourceChoice(StrEnum):
    BUILT_IN = "Built-in family"
    CATALOG = "Hugging Face architecture"
    UPLOAD = "Upload config.json"


def choice() -> SourceChoice:
    return SourceChoice(st.session_state.get("model_source", SourceChoice.BUILT_IN))


def init() -> None:
    st.session_state.setdefault("model_source", SourceChoice.BUILT_IN.value)
    st.session_state.setdefault("hf_entry", "gpt2")


def catalog() -> dict[str, dict]:
    from bench_core.models.hf_config import catalog as shipped
    return shipped()


def read(limits: Limits) -> tuple[ModelSource | None, ConfigError | None]:
    """The chosen source, checked as data, or the first rule it breaks. (None, None): no source (a built-in
    family, or no file uploaded yet)."""
    from bench_core.models.hf_config import CATALOG_DIR, source_from_bytes
    picked = choice()
    try:
        if picked is SourceChoice.CATALOG:
            entry = st.session_state["hf_entry"]
            return source_from_bytes((CATALOG_DIR / f"{entry}.json").read_bytes(), entry, SourceKind.CATALOG,
                                     limits), None
        upload = st.session_state.get(UPLOAD_KEY)
        if picked is SourceChoice.UPLOAD and upload is not None:
            return source_from_bytes(upload.getvalue(), upload.name, SourceKind.CONFIG, limits), None
    except ConfigError as exc:
        return None, exc
    return None, None


def own_shape(source: ModelSource) -> BenchConfig:
    """The architecture at its own size: the values the shape fields start from."""
    from bench_core.models.hf_config import shape_from_source
    return shape_from_source(source, BenchConfig(), {})


def shaped(source: ModelSource, base: BenchConfig) -> BenchConfig:
    """The run's config: the source's shape, with each field the user changed from the architecture's own value
    as an override (a width alone keeps the head size, as `--width` does). Heads equal to what the other fields
    give (follow_width wrote them into the field) are shown, not asked for."""
    from bench_core.models.hf_config import shape_from_source
    own = own_shape(source)
    overrides = {name: getattr(base, name) for name in SHAPE_FIELDS if getattr(base, name) != getattr(own, name)}
    if "heads" in overrides:
        rest = {name: value for name, value in overrides.items() if name != "heads"}
        try:
            if shape_from_source(source, base, rest).heads == overrides["heads"]:
                overrides = rest
        except ConfigError:
            pass
    return shape_from_source(source, base, overrides)


def follow_width(limits: Limits) -> None:
    """A width typed for an architecture: the heads field shows the heads that width gives at the architecture's
    head size, as `--width` alone does (it kept showing the architecture's own, while the run took others). Heads
    the user typed are theirs: only a value the page wrote (the architecture's own, or one followed) moves."""
    from bench_core.models.hf_config import shape_from_source
    if choice() is SourceChoice.BUILT_IN:
        return
    source, _ = read(limits)
    if source is None:
        return
    own = own_shape(source)
    shown = str(st.session_state.get("cfg_heads", "")).strip()
    if shown not in (str(own.heads), st.session_state.get(FOLLOWED_HEADS)):
        return
    try:
        width = int(str(st.session_state.get("cfg_width", "")).strip())
        heads = str(shape_from_source(source, own, {"width": width}).heads)
    except (ValueError, ConfigError):
        return   # the field's own error says why
    st.session_state["cfg_heads"] = st.session_state[FOLLOWED_HEADS] = heads


def fill_fields(limits: Limits) -> None:
    """On a new pick: the shape fields show the architecture's own values (a bad upload leaves them as they are)."""
    source, _ = read(limits)
    if source is None:
        return
    own = own_shape(source)
    for name in SHAPE_FIELDS:
        st.session_state[f"cfg_{name}"] = str(getattr(own, name))


def draw_picker(limits: Limits) -> None:
    """The source's own widget, in the form's first slot: the family, the catalog entry or the upload."""
    picked = choice()
    if picked is SourceChoice.CATALOG:
        entries = catalog()
        st.selectbox("Architecture", list(entries), key="hf_entry", on_change=fill_fields, args=(limits,),
                     format_func=lambda name: f"{name} ({entries[name].get('_id', name)})",
                     help="a config.json shipped with the package (numbers only, each with its public source); "
                          "random weights in float32, nothing downloaded")
    elif picked is SourceChoice.UPLOAD:
        st.file_uploader("config.json", type=["json"], key=UPLOAD_KEY, on_change=fill_fields, args=(limits,),
                         help=f"read as data: auto_map (remote code) is refused, trust_remote_code is never set; at "
                              f"most {limits.max_upload_mib} MiB")


def facts_line(arch: Architecture) -> str:
    """The architecture's facts in one line that wraps on a phone."""
    attn = arch.attention
    heads = f"{attn.heads} heads / {attn.kv_heads} KV heads (head size {attn.head_dim})"
    mlp = f"MLP {arch.mlp_width:,}" + (" gated" if arch.gated_mlp else "")
    norm = "RMSNorm" if arch.norm is NormType.RMSNORM else "LayerNorm"
    tied = "tied embeddings" if arch.tied_embeddings else "untied embeddings"
    count = f"{arch.params / 1e9:.2f}B" if arch.params >= 1e9 else f"{arch.params / 1e6:.2f}M"
    return " · ".join([f"**{count} parameters**", f"{arch.layers} layers",
                       f"hidden {arch.hidden:,}", heads, mlp, f"vocab {arch.vocab:,}", norm,
                       f"activation {arch.activation}", tied])


def source_line(source: ModelSource) -> str:
    """Which architecture, and where its numbers come from."""
    config = source.config
    hub, origin = config.get("_id"), config.get("_source")
    named = f"**{source.name}**" + (f" ({hub})" if hub else "") + f", model_type `{config.get('model_type')}`"
    where = f" · numbers from [its config.json]({origin})" if origin else f" · config sha256:{source.sha256[:12]}"
    return named + where + f" · attention {source.attention} · random weights, float32"


def facts(cfg: BenchConfig | None) -> None:
    """The model the fields describe, before it runs: its family's own typed facts. Shown also while a limit is
    broken (memory, parameters), as they say what to trim; not for a shape the architecture cannot build."""
    if cfg is None:
        return
    try:
        if cfg.width % cfg.heads or family(cfg.family).errors(cfg):
            return            # a shape its rules refuse: the field's error says why
        arch = architecture(cfg)
    except (ValueError, ZeroDivisionError):
        return
    with st.container(key="architecture"):
        if cfg.source is not None:
            st.markdown(source_line(cfg.source))
        st.markdown(facts_line(arch))
