"""The CLI's model sources: `--hf NAME_OR_PATH` (with `--attention`) and `--model-factory module:function`, read
into the run's BenchConfig with the shape flags as overrides (--depth, --width, --heads, --seq-len, --batch-size,
--vocab-size; models.hf_config keeps the head size and the query-to-KV ratio)."""
from __future__ import annotations

import argparse
from dataclasses import replace

from bench_core.config.bench_config import INT_FIELDS, BenchConfig, ConfigError, defaults_for, int_field, workload
from bench_core.config.settings import load_limits


def model_source_args(p: argparse.ArgumentParser, factory: bool = True) -> None:
    """--hf, --attention and --model-factory; `factory` False keeps the last out of the help (a command that refuses
    it, saying why)."""
    p.add_argument("--hf", default=None, metavar="NAME_OR_PATH",
                   help="a Hugging Face architecture: a catalog entry (e.g. gpt2, llama-3.2-1b, qwen3-0.6b), a "
                        "config.json file or folder, or a model id in the local Hugging Face cache; random weights "
                        "in float32, nothing downloaded; the shape flags override its config (docs/MODELS.md)")
    p.add_argument("--attention", default=None, help="with --hf: the attention implementation (default sdpa)")
    p.add_argument("--model-factory", dest="model_factory", default=None, metavar="MODULE:FUNCTION",
                   help="your own nn.Module: the function receives the run's config and returns the module, whose "
                        "forward(idx, targets) returns (logits or None, loss) (docs/MODELS.md)" if factory
                   else argparse.SUPPRESS)


def sourced_config(args: argparse.Namespace, base: BenchConfig, sizes: dict[str, int]) -> BenchConfig | None:
    """The run's config from --hf or --model-factory, or None when neither is given."""
    hf, factory = getattr(args, "hf", None), getattr(args, "model_factory", None)
    if hf is None and factory is None:
        if getattr(args, "attention", None):
            raise ConfigError("attention", args.attention, "applies only with --hf")
        return None
    given = "--hf" if hf is not None else "--model-factory"
    for flag, value in (("model", getattr(args, "model", None)), ("family", getattr(args, "family", None))):
        if value:
            raise ConfigError(flag, value, f"give either --{flag} or {given}: the model comes from {given}")
    if hf is not None and factory is not None:
        raise ConfigError("model_factory", factory, "give either --hf or --model-factory, not both")
    if hf is not None:
        from bench_core.models.hf_config import resolve_source, shape_from_source
        source = resolve_source(hf, load_limits(), args.attention or "sdpa")
        return shape_from_source(source, base, sizes)
    if getattr(args, "attention", None):
        raise ConfigError("attention", args.attention, "applies only with --hf")
    from bench_core.models.factory import factory_source
    shaped = BenchConfig.from_dict({**base.to_dict(), **sizes, "family": "factory"})
    return replace(shaped, source=factory_source(str(factory)))


def config_from_args(args: argparse.Namespace, device_kind: str, device: str,
                     skip: tuple[str, ...] = ()) -> BenchConfig:
    """The config a command's model flags ask for: `device_kind`'s defaults, --model's size, --family, each shape
    and run field given (but those in `skip`, which the command reads itself), then --hf or --model-factory where
    the command has them; `device` is what the config records (the flag as given, or already resolved)."""
    from bench_core.models.families import FAMILIES
    cfg = replace(defaults_for(device_kind), device=device)
    if getattr(args, "model", None):
        cfg = workload(args.model, cfg)
    if getattr(args, "family", None):
        if args.family not in FAMILIES:
            raise ConfigError("family", args.family, f"must be one of {', '.join(FAMILIES)}")
        cfg = replace(cfg, family=args.family)
    sizes = {n: int_field(n, getattr(args, n)) for n in INT_FIELDS
             if n not in skip and getattr(args, n, None) is not None}
    return sourced_config(args, cfg, sizes) or BenchConfig.from_dict({**cfg.to_dict(), **sizes})
