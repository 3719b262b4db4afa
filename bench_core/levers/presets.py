"""Named ladders of stages (presets), per model family, and the per-family check of a stage list."""
from __future__ import annotations

from typing import Any

from bench_core.levers.registry import names_of
from bench_core.levers.stage import Stage

PRESETS: dict[str, tuple[Stage, ...]] = {
    "seed": (
        Stage("adam", "layernorm", "fp32"),
        Stage("apex-fusedadam", "layernorm", "fp32"),
        Stage("apex-fusedadam", "apex-fusedln", "fp32"),
        Stage("apex-fusedadam", "apex-fusedln", "bf16"),
    ),
    "native": (
        Stage("adam", "layernorm", "fp32"),
        Stage("adam-fused", "layernorm", "fp32"),
        Stage("adam-fused", "layernorm", "bf16"),
        Stage("adam-fused", "layernorm", "bf16", "compile"),
        Stage("adam-fused", "layernorm", "bf16", "graphs"),
    ),
    # today's alternatives to Apex, each against native BF16 (eager, the first stage) and its best (compiled)
    "peers": (
        Stage("adam-fused", "layernorm", "bf16"),
        Stage("adam-fused", "layernorm", "bf16", "compile"),
        Stage("apex-fusedadam", "apex-fusedln", "bf16"),
        Stage("adam-fused", "liger-ln", "bf16"),
        Stage("adam-fused", "liger-ln", "bf16", head="liger-flce"),
        Stage("adam-fused", "layernorm", "fp8-torchao"),
        Stage("adam-fused", "layernorm", "fp8-torchao", "compile"),
        Stage("adam-fused", "layernorm", "te-fp8"),
    ),
}
PRESETS["all"] = tuple(dict.fromkeys(PRESETS["seed"] + PRESETS["native"] + (
    Stage("apex-fusedadam", "layernorm", "bf16"),
    Stage("apex-fusedadam", "apex-fusedln", "bf16", "graphs"),
    Stage("adam-loop", "layernorm", "fp32"),
    Stage("adam-fused", "layernorm", "tf32"),
    Stage("adam-fused", "layernorm", "fp16"),
)))
# A preset written with a family's norms; any other family runs it with each norm's twin (LayerNorm <-> RMSNorm).
PRESET_FAMILY: dict[str, str] = {"llama-seed": "llama"}
PRESETS["llama-seed"] = tuple(stage.for_family("llama") for stage in PRESETS["seed"])


def preset(name: str, family: str = "gpt") -> tuple[Stage, ...]:
    """The preset's stages for a model family; a family-bound preset (llama-seed) refuses the other family."""
    from bench_core.config.bench_config import ConfigError
    if name not in PRESETS:
        raise ConfigError("preset", name, f"unknown preset; choose one of {', '.join(PRESETS)}")
    bound = PRESET_FAMILY.get(name)
    if bound and bound != family:
        raise ConfigError("preset", name, f"is the seed ladder for the {bound} family; this model is {family} "
                          f"(use --model llama-small or llama-1b, or the seed preset)")
    return tuple(dict.fromkeys(stage.for_family(family) for stage in PRESETS[name]))


def family_errors(stages: Any, family: str) -> list[Any]:
    """A ConfigError for each stage whose norm serves the other family (nothing is launched when any exists)."""
    from bench_core.config.bench_config import ConfigError
    out = []
    for stage in stages:
        why = stage.family_error(family)
        if why:
            out.append(ConfigError("norm", stage.norm, why))
    return out


def across_gpus(stages: Any, counts: Any) -> list[Stage]:
    """Each stage at each GPU count, so every multi-GPU stage has its one-GPU twin for scaling efficiency."""
    from dataclasses import replace

    from bench_core.config.bench_config import ConfigError
    counts = [str(c) for c in counts]
    for c in counts:
        if c not in names_of("gpus"):
            raise ConfigError("gpus", c, f"choose from {', '.join(names_of('gpus'))}")
    return [replace(stage, gpus=c) for stage in stages for c in counts]
