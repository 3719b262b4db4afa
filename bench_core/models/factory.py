"""Your own nn.Module through the ladder: `--model-factory module:function` (CLI only; the shared server refuses
it, as it would run the user's code). The contract (docs/MODELS.md):

- the function receives the run's BenchConfig (depth, width, heads, seq_len, batch_size, vocab_size, seed) and
  returns a torch.nn.Module, built on the current default device in float32;
- its forward(idx, targets) takes token ids (batch, seq_len) and the next tokens, same shape, and returns
  (logits or None, a scalar loss);
- optional `blocks` (the repeated layers) and `lm_head` (the output projection) let the levers that need them apply.

Its facts (families.Architecture) are read from the module built on the meta device: no memory, no init.
"""
from __future__ import annotations

import importlib
from typing import Any

from bench_core.config.bench_config import BenchConfig, ConfigError, ModelSource, SourceKind
from bench_core.models.architecture import Architecture, AttentionShape, Linear, NormType


def factory_source(spec: str) -> ModelSource:
    """--model-factory module:function, checked: both parts named, the function importable and callable."""
    module, _, function = spec.partition(":")
    if not module or not function:
        raise ConfigError("model_factory", spec, "must be module:function (e.g. mymodels:build)")
    load_factory(spec)
    return ModelSource(SourceKind.FACTORY, spec)


def load_factory(spec: str) -> Any:
    module, _, function = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as exc:
        raise ConfigError("model_factory", spec, f"cannot be imported: {exc} (the module must be on PYTHONPATH or "
                          "in the current folder)") from None
    if not callable(fn):
        raise ConfigError("model_factory", spec, "is not callable")
    return fn


def build_factory(cfg: BenchConfig) -> Any:
    import torch
    if cfg.source is None:
        raise ConfigError("source", None, "the factory family needs a module:function source")
    model = load_factory(cfg.source.name)(cfg)
    if not isinstance(model, torch.nn.Module):
        raise ConfigError("model_factory", cfg.source.name, f"returned {type(model).__name__}, not a torch.nn.Module")
    return model


def factory_architecture(cfg: BenchConfig) -> Architecture:
    """What can be read from the built module: its exact parameter count, its first block's linears, its norm
    type; the shape fields it was asked for."""
    import torch
    with torch.device("meta"):
        model = build_factory(cfg)
    blocks = getattr(model, "blocks", None)
    first = blocks[0] if blocks is not None and len(blocks) else model
    linears = tuple(Linear(name, m.in_features, m.out_features, m.bias is not None)
                    for name, m in first.named_modules() if isinstance(m, torch.nn.Linear))
    rms = any(type(m).__name__.endswith("RMSNorm") for m in model.modules())
    head = getattr(model, "lm_head", None)
    head_weight = getattr(head, "weight", None)
    tied = head_weight is not None and any(p is head_weight for name, p in model.named_parameters()
                                           if not name.startswith("lm_head"))
    lookup = sum(m.weight.numel() for m in model.modules()
                 if isinstance(m, torch.nn.Embedding) and m.weight is not head_weight)
    return Architecture(len(blocks) if blocks is not None else cfg.depth, cfg.width,
                        AttentionShape(cfg.heads, cfg.heads, cfg.width // cfg.heads), 0, cfg.vocab_size,
                        NormType.RMSNORM if rms else NormType.LAYERNORM, "unknown", False, tied, linears,
                        counted_params=sum(p.numel() for p in model.parameters()), counted_lookup_params=lookup)
