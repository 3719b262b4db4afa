"""A Hugging Face architecture as a family source: its config.json read (catalog entry, file, folder, cached model
id or uploaded bytes) and checked as data, the run's shape applied under the architecture's head rules, and the
architecture's facts (families.Architecture) read from the config.

Nothing is downloaded and no remote code runs: `auto_map` is refused and so is a model_type transformers does not
know. transformers is imported only here and in models.hf, on the paths that need it.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from bench_core.config.bench_config import MIB, BenchConfig, ConfigError, ModelSource, SourceKind, canonical_json
from bench_core.config.settings import Limits
from bench_core.models.architecture import Architecture, AttentionShape, NormType, block_linears

CATALOG_DIR = Path(__file__).with_name("catalog")
PROVENANCE_KEYS = ("_source", "_id")    # a catalog entry's own keys: where its numbers come from, not config
ATTENTION_IMPLEMENTATIONS = ("sdpa", "eager", "flash_attention_2", "flash_attention_3", "flex_attention")


@dataclass(frozen=True)
class HfLayout:
    """What a model_type's modeling code builds that its config does not state. A bias is a constant or the name
    of the config field that sets it."""
    norm: NormType
    gated_mlp: bool
    activation_field: str
    qkv_bias: bool | str = False
    out_bias: bool | str = False
    mlp_bias: bool | str = False
    fused_qkv: bool = False           # GPT-2's c_attn (a Conv1D)
    qk_norm: bool = False             # Qwen3: an RMSNorm over each head's queries and keys
    learned_positions: bool = False   # GPT-2's wpe; the others are rotary
    mlp_field: str = "intermediate_size"


# Read from transformers' modeling_<type>.py (5.17): which linears carry biases, what each block holds.
LAYOUTS: dict[str, HfLayout] = {
    "gpt2": HfLayout(NormType.LAYERNORM, False, "activation_function", True, True, True, fused_qkv=True,
                     learned_positions=True, mlp_field="n_inner"),
    "llama": HfLayout(NormType.RMSNORM, True, "hidden_act", "attention_bias", "attention_bias", "mlp_bias"),
    "mistral": HfLayout(NormType.RMSNORM, True, "hidden_act"),
    "qwen2": HfLayout(NormType.RMSNORM, True, "hidden_act", qkv_bias=True),
    "qwen3": HfLayout(NormType.RMSNORM, True, "hidden_act", "attention_bias", "attention_bias", qk_norm=True),
    "gemma": HfLayout(NormType.RMSNORM, True, "hidden_act", "attention_bias", "attention_bias"),
}


def catalog() -> dict[str, dict[str, Any]]:
    """The shipped architectures by name (the file's stem): numbers only, each with its public source."""
    paths = sorted(CATALOG_DIR.glob("*.json"), key=lambda p: p.stem)   # by name: gpt2 before gpt2-medium
    return {path.stem: json.loads(path.read_text()) for path in paths}


def catalog_entry(name: str) -> str | None:
    """The catalog name for `name`, given as the entry's name or its hub id, in any case."""
    wanted = name.lower()
    for entry, config in catalog().items():
        if wanted in (entry, str(config.get("_id", "")).lower()):
            return entry
    return None


def config_errors(config: Any, limits: Limits) -> list[ConfigError]:
    """Every rule a config.json breaks as data: an object, no remote code, a causal-LM model_type transformers
    knows and this tool reads, positive integer dimensions."""
    if not isinstance(config, dict):
        return [ConfigError("config", type(config).__name__, "config.json must be a JSON object")]
    if "auto_map" in config or config.get("trust_remote_code"):
        return [ConfigError("auto_map", sorted(config.get("auto_map") or {}), "names remote code; a config runs "
                            "only transformers' own classes (trust_remote_code is never set)")]
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        return [ConfigError("model_type", model_type, "transformers does not know this model_type")]
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return [ConfigError("model_type", model_type, "is not a causal language model in transformers")]
    if model_type not in LAYOUTS:
        return [ConfigError("model_type", model_type, f"this tool reads the architectures {', '.join(LAYOUTS)}; "
                            f"{model_type} is not one of them yet")]
    try:
        conf = _config_class(model_type)(**_without_provenance(config))
    except Exception as exc:   # noqa: BLE001 (transformers' validators raise their own error classes)
        return [ConfigError("config", model_type, f"transformers refused it: {exc}")]
    errors = []
    for name in ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size"):
        value = getattr(conf, name, None)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            errors.append(ConfigError(name, value, "must be a positive integer"))
    mlp = _mlp_width(conf, LAYOUTS[model_type])
    if isinstance(mlp, bool) or not isinstance(mlp, int) or mlp < 1:
        errors.append(ConfigError(LAYOUTS[model_type].mlp_field, mlp, "must be a positive integer"))
    return errors


def source_from_bytes(data: bytes, name: str, kind: SourceKind, limits: Limits,
                      attention: str = "sdpa") -> ModelSource:
    """A config.json given as bytes (an upload, or a file read), checked as data before anything is built."""
    cap = limits.max_upload_mib * MIB
    if len(data) > cap:
        raise ConfigError("config", name, f"is {len(data) / MIB:.1f} MiB, above the limit of "
                          f"{limits.max_upload_mib} MiB (BENCH_MAX_UPLOAD_MIB)")
    try:
        config = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError("config", name, f"is not valid JSON: {exc}") from None
    errors = config_errors(config, limits)
    if errors:
        raise errors[0]
    if attention not in ATTENTION_IMPLEMENTATIONS:
        raise ConfigError("attention", attention, f"must be one of {', '.join(ATTENTION_IMPLEMENTATIONS)}")
    return ModelSource(kind, name, canonical_json(config), attention)


def resolve_source(name_or_path: str, limits: Limits, attention: str = "sdpa") -> ModelSource:
    """--hf NAME_OR_PATH: a catalog entry, a config.json (file or folder), or a model id's config.json in the
    local Hugging Face cache. Nothing is downloaded."""
    entry = catalog_entry(name_or_path)
    if entry is not None:
        return source_from_bytes((CATALOG_DIR / f"{entry}.json").read_bytes(), entry, SourceKind.CATALOG, limits,
                                 attention)
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        return source_from_bytes(path.read_bytes(), str(path.resolve()), SourceKind.CONFIG, limits, attention)
    cached = _cached_config(name_or_path)
    if cached is not None:
        return source_from_bytes(Path(cached).read_bytes(), name_or_path, SourceKind.CACHE, limits, attention)
    raise ConfigError("hf", name_or_path, f"is not a catalog entry ({', '.join(catalog())}), a config.json file or "
                      "folder, or a model id in the local Hugging Face cache (nothing is downloaded)")


def _cached_config(model_id: str) -> str | None:
    if model_id.count("/") != 1 or os.path.isabs(model_id):
        return None
    from huggingface_hub import try_to_load_from_cache
    found = try_to_load_from_cache(model_id, "config.json")
    return found if isinstance(found, str) else None


def _without_provenance(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in PROVENANCE_KEYS and k != "model_type"}


def _config_class(model_type: str) -> Any:
    from transformers import CONFIG_MAPPING
    return CONFIG_MAPPING[model_type]


def _flag(conf: Any, value: bool | str) -> bool:
    return bool(getattr(conf, value, False)) if isinstance(value, str) else value


def _mlp_width(conf: Any, layout: HfLayout) -> Any:
    value = getattr(conf, layout.mlp_field, None)
    return 4 * conf.hidden_size if value is None and layout.mlp_field == "n_inner" else value


@lru_cache(maxsize=32)
def _base_config(source: ModelSource) -> Any:
    config = source.config
    return _config_class(config["model_type"])(**_without_provenance(config))


def head_dim_of(conf: Any) -> int:
    return getattr(conf, "head_dim", None) or conf.hidden_size // conf.num_attention_heads


def kv_heads_of(conf: Any) -> int:
    return getattr(conf, "num_key_value_heads", None) or conf.num_attention_heads


def shape_from_source(source: ModelSource, base: BenchConfig, overrides: dict[str, int]) -> BenchConfig:
    """The run's config for a source: the architecture's own depth, width, heads and vocabulary, then the given
    overrides. A width alone keeps the head size (and the query width's share of it): heads scale with it."""
    conf = _base_config(source)
    width0, heads0 = conf.hidden_size, conf.num_attention_heads
    shape = {"depth": conf.num_hidden_layers, "width": width0, "heads": heads0, "vocab_size": conf.vocab_size}
    if "width" in overrides and "heads" not in overrides:
        width = overrides["width"]
        if width * heads0 % width0:
            raise ConfigError("width", width, f"keeps the head size {head_dim_of(conf)}: heads = width × "
                              f"{heads0} / {width0} must be a whole number (or give --heads too)")
        shape["heads"] = width * heads0 // width0
    return replace(base, family="hf", source=source, **{**shape, **overrides})


@lru_cache(maxsize=64)
def resolved_config(cfg: BenchConfig) -> Any:
    """The transformers config the run builds: the source's, with the run's depth, width, heads, vocabulary and
    sequence length. The head size stays the source's while heads keep their ratio to the width, else it is
    width / heads; KV heads keep the source's query-to-KV ratio; the MLP keeps its ratio to the width."""
    if cfg.source is None:
        raise ConfigError("source", None, "the hf family needs a model source")
    conf = _base_config(cfg.source)
    layout = LAYOUTS[conf.model_type]
    width0, heads0 = conf.hidden_size, conf.num_attention_heads
    head_dim = head_dim_of(conf) if cfg.heads * width0 == heads0 * cfg.width else cfg.width // cfg.heads
    values = _without_provenance(cfg.source.config)
    values.pop("layer_types", None)          # derived from the depth: the config class recomputes it
    aliases = {v: k for k, v in getattr(conf, "attribute_map", {}).items()}
    for k in list(values):
        values[aliases.get(k, k)] = values.pop(k)
    mlp0 = getattr(conf, layout.mlp_field, None)
    values.update(num_hidden_layers=cfg.depth, hidden_size=cfg.width, num_attention_heads=cfg.heads,
                  vocab_size=cfg.vocab_size, use_cache=False,
                  max_position_embeddings=max(conf.max_position_embeddings, cfg.seq_len))
    if mlp0 is not None:
        values[layout.mlp_field] = round(mlp0 * cfg.width / width0)
    if not layout.fused_qkv:
        values.update(head_dim=head_dim, num_key_value_heads=max(1, cfg.heads * kv_heads_of(conf) // heads0))
    for token in ("bos_token_id", "eos_token_id", "pad_token_id"):   # ids past a trimmed vocabulary mean none
        if isinstance(values.get(token), int) and values[token] >= cfg.vocab_size:
            values[token] = None
    if "max_window_layers" in values:
        values["max_window_layers"] = min(values["max_window_layers"], cfg.depth)
    try:
        return _config_class(conf.model_type)(**values)
    except Exception as exc:   # noqa: BLE001 (transformers' validators raise their own error classes)
        raise ConfigError("config", conf.model_type, f"transformers refused this shape: {exc}") from None


def hf_errors(cfg: BenchConfig) -> list[ConfigError]:
    """The architecture's rules at the run's shape: KV heads divide the heads at the source's ratio, rotary
    embeddings need an even head size."""
    if cfg.source is None:
        return [ConfigError("source", None, "the hf family needs a model source")]
    errors = config_errors(cfg.source.config, Limits())
    if errors:
        return errors
    conf = _base_config(cfg.source)
    heads0, kv0 = conf.num_attention_heads, kv_heads_of(conf)
    if cfg.heads * kv0 % heads0:
        return [ConfigError("heads", cfg.heads, f"keeps {conf.model_type}'s {heads0 // kv0} query heads per KV head "
                            f"({heads0} / {kv0}): heads must be a multiple of {heads0 // kv0}")]
    if not LAYOUTS[conf.model_type].learned_positions and head_dim_of(resolved_config(cfg)) % 2:
        return [ConfigError("heads", cfg.heads, f"rotary embeddings need an even head size; this shape gives "
                            f"{head_dim_of(resolved_config(cfg))}")]
    return []


def hf_architecture(cfg: BenchConfig) -> Architecture:
    """The facts of the model this run builds, read from its resolved config and the model_type's layout."""
    conf = resolved_config(cfg)
    layout = LAYOUTS[conf.model_type]
    d, mlp = conf.hidden_size, _mlp_width(conf, layout)
    attn = AttentionShape(conf.num_attention_heads, kv_heads_of(conf), head_dim_of(conf))
    linears = block_linears(d, attn, mlp, layout.gated_mlp, layout.fused_qkv, _flag(conf, layout.qkv_bias),
                            _flag(conf, layout.out_bias), _flag(conf, layout.mlp_bias))
    return Architecture(conf.num_hidden_layers, d, attn, mlp, conf.vocab_size, layout.norm,
                        str(getattr(conf, layout.activation_field)), layout.gated_mlp,
                        bool(conf.tie_word_embeddings), linears,
                        positions=conf.max_position_embeddings if layout.learned_positions else 0,
                        block_extra_params=2 * attn.head_dim if layout.qk_norm else 0)
