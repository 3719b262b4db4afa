"""The model-family registry: each family's builder, its architecture (linear shapes, norm type, attention shape
with KV heads, MLP: the parameter count, matmul parameters and GEMM shapes are derived from it), validation and the
model parts it takes (norm type, MLP type). A new family is one entry in FAMILY_SPECS; a Hugging Face architecture
is the "hf" family, its facts read from its config.

Torch-free at import: the dashboard validates input with it; builders import their model lazily.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench_core.config.bench_config import (
    GIB,
    BenchConfig,
    ConfigError,
    SourceKind,
    field_errors,
    limit_errors,
    resolve_device,
)
from bench_core.config.settings import Limits
from bench_core.models.architecture import (
    Architecture,
    AttentionShape,
    LanguageModel,
    MlpType,
    ModelParts,
    NormType,
    block_linears,
)


@dataclass(frozen=True)
class FamilySpec:
    name: str
    summary: str
    takes: Mapping[str, str]                        # model-part kind -> the type it takes (norm: rmsnorm, ...)
    architecture: Callable[[BenchConfig], Architecture]
    build: Callable[[BenchConfig, ModelParts], LanguageModel] = field(repr=False)
    errors: Callable[[BenchConfig], list[ConfigError]] = field(default=lambda cfg: [], repr=False)
    # The sources this family is built from (none: chosen by name). A family not built with the stage's parts
    # gets the levers by module surgery (levers.surgery).
    sources: tuple[SourceKind, ...] = ()

    @property
    def built_with_parts(self) -> bool:
        return not self.sources


def _gpt_architecture(cfg: BenchConfig) -> Architecture:
    d = cfg.width
    attn = AttentionShape(cfg.heads, cfg.heads, d // cfg.heads)
    return Architecture(cfg.depth, d, attn, 4 * d, cfg.vocab_size, NormType.LAYERNORM, "gelu_tanh", False, True,
                        block_linears(d, attn, 4 * d, False, True, True, True, True), positions=cfg.seq_len)


def _llama_hidden(cfg: BenchConfig) -> int:
    return -(-8 * cfg.width // 3 // 256) * 256   # 2/3 of 4·d, rounded up to a multiple of 256


def _llama_architecture(cfg: BenchConfig) -> Architecture:
    d, h = cfg.width, _llama_hidden(cfg)
    attn = AttentionShape(cfg.heads, cfg.heads, d // cfg.heads)
    return Architecture(cfg.depth, d, attn, h, cfg.vocab_size, NormType.RMSNORM, "silu", True, False,
                        block_linears(d, attn, h, True, True))


def _build_gpt(cfg: BenchConfig, parts: ModelParts) -> LanguageModel:
    from bench_core.models.gpt import GPT, GPTConfig
    return GPT(GPTConfig(cfg.depth, cfg.width, cfg.heads, cfg.seq_len, cfg.vocab_size), **_kwargs(parts))


def _build_llama(cfg: BenchConfig, parts: ModelParts) -> LanguageModel:
    from bench_core.models.llama import Llama, LlamaConfig
    return Llama(LlamaConfig(cfg.depth, cfg.width, cfg.heads, cfg.seq_len, cfg.vocab_size, _llama_hidden(cfg)),
                 **_kwargs(parts))


def _kwargs(parts: ModelParts) -> dict[str, Any]:
    """The model constructor's arguments for the parts the stage chose; absent ones keep the family's own."""
    names = {"norm": "norm_cls", "mlp": "mlp_cls", "head": "head"}
    return {names[kind]: part for kind, part in parts.parts.items() if part is not None}


def _llama_errors(cfg: BenchConfig) -> list[ConfigError]:
    if (cfg.width // cfg.heads) % 2:
        return [ConfigError("heads", cfg.heads, f"llama's rotary embedding needs an even head size; width "
                            f"{cfg.width} / heads {cfg.heads} = {cfg.width // cfg.heads}")]
    return []


def _hf_architecture(cfg: BenchConfig) -> Architecture:
    from bench_core.models.hf_config import hf_architecture
    return hf_architecture(cfg)


def _hf_errors(cfg: BenchConfig) -> list[ConfigError]:
    from bench_core.models.hf_config import hf_errors
    return hf_errors(cfg)


def _build_hf(cfg: BenchConfig, parts: ModelParts) -> LanguageModel:
    from bench_core.models.hf import build_hf
    return build_hf(cfg)


def _factory_architecture(cfg: BenchConfig) -> Architecture:
    from bench_core.models.factory import factory_architecture
    return factory_architecture(cfg)


def _build_factory(cfg: BenchConfig, parts: ModelParts) -> LanguageModel:
    from bench_core.models.factory import build_factory
    return build_factory(cfg)


FAMILY_SPECS: dict[str, FamilySpec] = {spec.name: spec for spec in [
    FamilySpec("gpt", "LayerNorm, GELU MLP, learned positions, tied head",
               {"norm": NormType.LAYERNORM, "mlp": MlpType.GELU}, _gpt_architecture, build=_build_gpt),
    FamilySpec("llama", "RMSNorm, SwiGLU MLP, rotary embeddings, no biases, untied head",
               {"norm": NormType.RMSNORM, "mlp": MlpType.SWIGLU}, _llama_architecture, build=_build_llama,
               errors=_llama_errors),
    FamilySpec("hf", "a Hugging Face causal-LM architecture, read from its config.json", {}, _hf_architecture,
               build=_build_hf, errors=_hf_errors,
               sources=(SourceKind.CATALOG, SourceKind.CONFIG, SourceKind.CACHE)),
    FamilySpec("factory", "your own nn.Module, from a module:function factory (docs/MODELS.md)", {},
               _factory_architecture, build=_build_factory, sources=(SourceKind.FACTORY,)),
]}
# The families chosen by name (a form's choices, --family); the others come with their source.
FAMILIES = tuple(name for name, spec in FAMILY_SPECS.items() if spec.built_with_parts)
ALL_FAMILIES = tuple(FAMILY_SPECS)


def family(name: str) -> FamilySpec:
    if name not in FAMILY_SPECS:
        raise ConfigError("family", name, f"must be one of {', '.join(ALL_FAMILIES)}")
    return FAMILY_SPECS[name]


def architecture(cfg: BenchConfig) -> Architecture:
    """The config's model facts, as its family states them."""
    return family(cfg.family).architecture(cfg)


def parts_family(cfg: BenchConfig) -> str:
    """The family whose parts the stage keys name for this model. A built-in family: itself. A Hugging Face
    architecture: the built-in family with its norm (LayerNorm: gpt, RMSNorm: llama), so its ladders name the norm
    the model has and the Apex/Liger norm swaps that act on it (seed on Llama swaps in FusedRMSNorm, not a
    FusedLayerNorm with nothing to replace). A factory's module: its own family (no part rule applies)."""
    spec = family(cfg.family)
    if spec.built_with_parts or cfg.source is None or cfg.source.kind is SourceKind.FACTORY:
        return cfg.family
    norm = architecture(cfg).norm
    return next((name for name in FAMILIES if FAMILY_SPECS[name].takes.get("norm") == norm), cfg.family)


def mlp_hidden(cfg: BenchConfig) -> int:
    """The MLP's inner width: 4·d for GPT; Llama's SwiGLU takes 2/3 of 4·d, rounded up to a multiple of 256
    (d 2048 -> 5632, d 768 -> 2048); a Hugging Face config's own (intermediate_size)."""
    return architecture(cfg).mlp_width


def param_count(cfg: BenchConfig) -> int:
    """Exact parameter count of the family's model."""
    return architecture(cfg).params


def matmul_params(cfg: BenchConfig) -> int:
    """Weights that take part in a matmul (the N of 6·N·tokens): all but the lookup-only embeddings. GPT's token
    embedding counts (it is the tied LM head), its position embedding does not; Llama's input embedding does not,
    its own head does."""
    return param_count(cfg) - architecture(cfg).lookup_params


def build_model(cfg: BenchConfig, parts: ModelParts) -> LanguageModel:
    """The config's model family, with the stage's parts (norm class, MLP class, loss head)."""
    return family(cfg.family).build(cfg, parts)


def source_errors(cfg: BenchConfig) -> list[ConfigError]:
    """A family chosen by name takes no source; one built from a source needs one of its kinds."""
    spec = family(cfg.family)
    kind = cfg.source.kind if cfg.source else None
    if not spec.sources and kind is not None:
        return [ConfigError("source", cfg.source.label if cfg.source else None,
                            f"the {spec.name} family is built by name, from no source")]
    if spec.sources and kind not in spec.sources:
        return [ConfigError("source", kind, f"the {spec.name} family needs a source of kind "
                            f"{' or '.join(k.value for k in spec.sources)}")]
    return []


def estimate_memory(cfg: BenchConfig) -> dict[str, int]:
    """Upper-bound bytes for an fp32 Adam step: weights, grads, two moments, activations, logits."""
    p = param_count(cfg)
    tokens = cfg.tokens_per_step
    states = 16 * p                                  # fp32 weight + grad + exp_avg + exp_avg_sq
    activations = cfg.depth * 68 * tokens * cfg.width  # ~34 B/token/width/layer in 16-bit, x2 for fp32
    logits = 12 * tokens * cfg.vocab_size            # logits, log-softmax and their grads in fp32
    return {"params": p, "states_bytes": states, "activation_bytes": activations + logits,
            "total_bytes": states + activations + logits}


def collect_errors(cfg: BenchConfig, limits: Limits, cuda_available: bool,
                   free_bytes: dict[str, int | None]) -> list[ConfigError]:
    """Every rule the config breaks, in field order. ``free_bytes`` maps device kind to free memory."""
    errors = field_errors(cfg, ALL_FAMILIES) or source_errors(cfg)
    if errors:
        return errors
    errors = limit_errors(cfg, limits, family(cfg.family).errors)
    if errors and not family(cfg.family).built_with_parts:
        return errors     # a sourced family's facts are read from a shape that must first pass its rules
    params = param_count(cfg)
    if params > limits.max_params:
        errors.append(ConfigError("width", cfg.width,
                                  f"model has {params / 1e9:.2f}B parameters, above the limit of "
                                  f"{limits.max_params / 1e9:.2f}B"))
    if cfg.device == "cuda" and not cuda_available:
        errors.append(ConfigError("device", "cuda", "no CUDA device is available on this machine"))
    if errors:
        return errors

    device = resolve_device(cfg.device, cuda_available)
    free = free_bytes.get(device)
    need = estimate_memory(cfg)
    if free is not None and need["total_bytes"] > free:
        errors.append(ConfigError(
            "batch_size", cfg.batch_size,
            f"estimated memory need {need['total_bytes'] / GIB:.1f} GiB "
            f"(weights, grads and Adam state {need['states_bytes'] / GIB:.1f} GiB, activations "
            f"{need['activation_bytes'] / GIB:.1f} GiB) exceeds the {free / GIB:.1f} GiB free on {device}"))
    return errors


def validate(cfg: BenchConfig, limits: Limits, cuda_available: bool,
             free_bytes: dict[str, int | None]) -> BenchConfig:
    """Raise the first ConfigError, or return the config unchanged."""
    errors = collect_errors(cfg, limits, cuda_available, free_bytes)
    if errors:
        raise errors[0]
    return cfg
