"""The model-family registry: each family's builder, exact parameter count, matmul parameters (for FLOPs), MLP
width, validation and the model parts it takes (norm type, MLP type). A new family is one entry in FAMILY_SPECS.

Torch-free at import: the dashboard validates input with it; builders import their model lazily.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from bench_core.config.bench_config import GIB, BenchConfig, ConfigError, field_errors, limit_errors, resolve_device
from bench_core.config.settings import Limits


class NormType(StrEnum):
    LAYERNORM = "layernorm"
    RMSNORM = "rmsnorm"


class MlpType(StrEnum):
    GELU = "gelu"
    SWIGLU = "swiglu"


# How a message names a part type ("rmsnorm is an RMS norm, valid only for the llama family").
PART_NOUNS: dict[str, str] = {NormType.LAYERNORM: "a LayerNorm", NormType.RMSNORM: "an RMS norm",
                              MlpType.GELU: "a GELU MLP", MlpType.SWIGLU: "a SwiGLU MLP"}


class LanguageModel(Protocol):
    """The contract a family's model keeps: step.py, FP8 conversion and the loss heads rely on nothing else."""
    blocks: Any               # the repeated blocks (FP8 converts their modules; torchao filters on "blocks.")
    lm_head: Any              # its .weight is what a loss head multiplies the final hidden states with

    def forward(self, idx: Any, targets: Any = None) -> tuple[Any, Any]: ...   # (logits | None, loss | None)

    def parameters(self) -> Any: ...


@dataclass(frozen=True)
class ModelParts:
    """The stage's pieces of the model, each a lever's build: kind -> class or callable (norm, mlp, head)."""
    parts: Mapping[str, Any] = field(default_factory=dict)

    def get(self, kind: str, default: Any = None) -> Any:
        return self.parts.get(kind, default)


@dataclass(frozen=True)
class FamilySpec:
    name: str
    summary: str
    takes: Mapping[str, str]                        # model-part kind -> the type it takes (norm: rmsnorm, ...)
    mlp_hidden: Callable[[BenchConfig], int]
    param_count: Callable[[BenchConfig], int]       # exact, checked against the built model by the tests
    lookup_params: Callable[[BenchConfig], int]     # weights only looked up, never in a matmul
    build: Callable[[BenchConfig, ModelParts], LanguageModel] = field(repr=False)
    errors: Callable[[BenchConfig], list[ConfigError]] = field(default=lambda cfg: [], repr=False)


def _gpt_params(cfg: BenchConfig) -> int:
    d, L, v = cfg.width, cfg.depth, cfg.vocab_size
    return v * d + cfg.seq_len * d + L * (12 * d * d + 13 * d) + 2 * d   # LM head tied to the token embedding


def _llama_hidden(cfg: BenchConfig) -> int:
    return -(-8 * cfg.width // 3 // 256) * 256   # 2/3 of 4·d, rounded up to a multiple of 256


def _llama_params(cfg: BenchConfig) -> int:
    d, L, v, h = cfg.width, cfg.depth, cfg.vocab_size, _llama_hidden(cfg)
    return 2 * v * d + L * (4 * d * d + 3 * d * h + 2 * d) + d          # no biases, RMSNorm weights, untied head


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


FAMILY_SPECS: dict[str, FamilySpec] = {spec.name: spec for spec in [
    FamilySpec("gpt", "LayerNorm, GELU MLP, learned positions, tied head",
               {"norm": NormType.LAYERNORM, "mlp": MlpType.GELU}, mlp_hidden=lambda cfg: 4 * cfg.width,
               param_count=_gpt_params, lookup_params=lambda cfg: cfg.seq_len * cfg.width, build=_build_gpt),
    FamilySpec("llama", "RMSNorm, SwiGLU MLP, rotary embeddings, no biases, untied head",
               {"norm": NormType.RMSNORM, "mlp": MlpType.SWIGLU}, mlp_hidden=_llama_hidden,
               param_count=_llama_params, lookup_params=lambda cfg: cfg.vocab_size * cfg.width,
               build=_build_llama, errors=_llama_errors),
]}
FAMILIES = tuple(FAMILY_SPECS)


def family(name: str) -> FamilySpec:
    if name not in FAMILY_SPECS:
        raise ConfigError("family", name, f"must be one of {', '.join(FAMILIES)}")
    return FAMILY_SPECS[name]


def mlp_hidden(cfg: BenchConfig) -> int:
    """The MLP's inner width: 4·d for GPT; Llama's SwiGLU takes 2/3 of 4·d, rounded up to a multiple of 256
    (d 2048 -> 5632, d 768 -> 2048)."""
    return family(cfg.family).mlp_hidden(cfg)


def param_count(cfg: BenchConfig) -> int:
    """Exact parameter count of the family's model."""
    return family(cfg.family).param_count(cfg)


def matmul_params(cfg: BenchConfig) -> int:
    """Weights that take part in a matmul (the N of 6·N·tokens): all but the lookup-only embeddings. GPT's token
    embedding counts (it is the tied LM head), its position embedding does not; Llama's input embedding does not,
    its own head does."""
    return param_count(cfg) - family(cfg.family).lookup_params(cfg)


def build_model(cfg: BenchConfig, parts: ModelParts) -> LanguageModel:
    """The config's model family, with the stage's parts (norm class, MLP class, loss head)."""
    return family(cfg.family).build(cfg, parts)


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
    errors = field_errors(cfg, FAMILIES)
    if errors:
        return errors
    errors = limit_errors(cfg, limits, family(cfg.family).errors)
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
