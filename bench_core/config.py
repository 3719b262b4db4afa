"""Run configuration, its validation and the memory estimate used to refuse runs that cannot fit.

Torch-free on purpose: the dashboard validates input without importing torch.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from .settings import Limits

DEVICES = ("auto", "cuda", "cpu")
MIB = 1024 ** 2
GIB = 1024 ** 3


class ConfigError(ValueError):
    """Bad input: names the field, the value and the limit it broke."""

    def __init__(self, field: str, value: Any, limit: str):
        self.field, self.value, self.limit = field, value, limit
        super().__init__(f"{field}={value!r}: {limit}")


@dataclass(frozen=True)
class BenchConfig:
    # model
    depth: int = 12
    width: int = 768
    heads: int = 12
    seq_len: int = 1024
    batch_size: int = 8
    vocab_size: int = 50304
    # run
    warmup: int = 10
    iters: int = 30
    seed: int = 1234
    device: str = "auto"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "BenchConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def tokens_per_step(self) -> int:
        return self.seq_len * self.batch_size


MODEL_SIZES = {
    "tiny": dict(depth=2, width=128, heads=4, seq_len=64, batch_size=4, vocab_size=512),
    "gpt2-small": dict(depth=12, width=768, heads=12, seq_len=1024, batch_size=8, vocab_size=50304),
    "gpt2-medium": dict(depth=24, width=1024, heads=16, seq_len=1024, batch_size=8, vocab_size=50304),
}

MODEL_FIELDS = ("depth", "width", "heads", "seq_len", "batch_size", "vocab_size")
INT_FIELDS = MODEL_FIELDS + ("warmup", "iters", "seed")


def defaults_for(device_kind: str) -> BenchConfig:
    """GPT-2-small on a GPU; a tiny model on CPU so the seed ladder ends in seconds on 2 cores."""
    if device_kind == "cuda":
        return BenchConfig(**MODEL_SIZES["gpt2-small"], warmup=10, iters=30, device="auto")
    return BenchConfig(**MODEL_SIZES["tiny"], warmup=3, iters=10, device="auto")


def model_size(name: str, base: BenchConfig) -> BenchConfig:
    if name not in MODEL_SIZES:
        raise ConfigError("model", name, f"unknown model size; choose one of {', '.join(MODEL_SIZES)}")
    return replace(base, **MODEL_SIZES[name])


def param_count(cfg: BenchConfig) -> int:
    """Exact parameter count of bench_core.model.GPT (LM head tied to the token embedding)."""
    d, L = cfg.width, cfg.depth
    per_block = 12 * d * d + 13 * d
    return cfg.vocab_size * d + cfg.seq_len * d + L * per_block + 2 * d


def estimate_memory(cfg: BenchConfig) -> dict[str, int]:
    """Upper-bound bytes for an fp32 Adam step: weights, grads, two moments, activations, logits."""
    p = param_count(cfg)
    tokens = cfg.tokens_per_step
    states = 16 * p                                  # fp32 weight + grad + exp_avg + exp_avg_sq
    activations = cfg.depth * 68 * tokens * cfg.width  # ~34 B/token/width/layer in 16-bit, x2 for fp32
    logits = 12 * tokens * cfg.vocab_size            # logits, log-softmax and their grads in fp32
    return {"params": p, "states_bytes": states, "activation_bytes": activations + logits,
            "total_bytes": states + activations + logits}


def resolve_device(requested: str, cuda_available: bool) -> str:
    return ("cuda" if cuda_available else "cpu") if requested == "auto" else requested


def collect_errors(cfg: BenchConfig, limits: Limits, cuda_available: bool,
                   free_bytes: dict[str, int | None]) -> list[ConfigError]:
    """Every rule the config breaks, in field order. ``free_bytes`` maps device kind to free memory."""
    errors: list[ConfigError] = []
    for name in INT_FIELDS:
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(ConfigError(name, value, "must be an integer"))
        elif name == "seed" and value < 0:
            errors.append(ConfigError(name, value, "must be >= 0"))
        elif name != "seed" and value <= 0:
            errors.append(ConfigError(name, value, "must be a positive integer"))
    if cfg.device not in DEVICES:
        errors.append(ConfigError("device", cfg.device, f"must be one of {', '.join(DEVICES)}"))
    if errors:
        return errors

    caps = {"depth": limits.max_depth, "width": limits.max_width, "heads": limits.max_heads,
            "seq_len": limits.max_seq_len, "batch_size": limits.max_batch_size,
            "vocab_size": limits.max_vocab_size, "warmup": limits.max_warmup, "iters": limits.max_iters}
    for name, cap in caps.items():
        value = getattr(cfg, name)
        if value > cap:
            errors.append(ConfigError(name, value, f"exceeds the limit of {cap}"))
    if cfg.heads > cfg.width:
        errors.append(ConfigError("heads", cfg.heads, f"must not exceed width ({cfg.width})"))
    elif cfg.width % cfg.heads:
        errors.append(ConfigError("width", cfg.width, f"must be divisible by heads ({cfg.heads})"))
    if cfg.tokens_per_step > limits.max_tokens_per_step:
        errors.append(ConfigError("batch_size", cfg.batch_size,
                                  f"seq_len x batch_size = {cfg.tokens_per_step} exceeds the limit of "
                                  f"{limits.max_tokens_per_step}"))
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
