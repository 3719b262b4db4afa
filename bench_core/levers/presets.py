"""Named ladders of stages (presets), per model family, and the per-family check of a stage list."""
from __future__ import annotations

from typing import Any

from bench_core.levers.registry import names_of
from bench_core.levers.stage import Stage
from bench_core.models.families import FAMILIES

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
    # native without its compiled and captured stages: a CPU's first ladder. A CPU inductor compile takes minutes on
    # a small machine (as the Components page says) and CUDA graphs need a GPU; `native` adds compile back.
    "native-eager": (
        Stage("adam", "layernorm", "fp32"),
        Stage("adam-fused", "layernorm", "fp32"),
        Stage("adam-fused", "layernorm", "bf16"),
    ),
    # today's alternatives to Apex, each against native BF16 (eager, the first stage) and its best (compiled)
    "peers": (
        Stage("adam-fused", "layernorm", "bf16"),
        Stage("adam-fused", "layernorm", "bf16", "compile"),
        Stage("apex-fusedadam", "apex-fusedln", "bf16"),
        Stage("adam-fused", "liger-ln", "bf16"),
        Stage("adam-fused", "liger-ln", "bf16", head="liger-flce"),
        Stage("adam-fused", "rmsnorm", "bf16", mlp="liger-swiglu"),   # llama only: gpt has no Liger GELU MLP
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
# Native twin stages a preset runs after its own, so each lever it changes is measured against PyTorch's own lever
# alone (results/contributions.py): torch fused Adam in FP32 for Apex FusedAdam; FusedLayerNorm under BF16 without
# it; native BF16 for the whole Apex stage. Shown as twins, after the ladder's own stages, which keep their order.
TWINS: dict[str, tuple[Stage, ...]] = {
    "seed": (
        Stage("adam-fused", "layernorm", "fp32"),
        Stage("apex-fusedadam", "layernorm", "bf16"),
        Stage("adam-fused", "layernorm", "bf16"),
    ),
}
# A preset written with a family's parts; any other family runs it with each part's twin (LayerNorm <-> RMSNorm),
# and leaves out a stage whose part has no twin there.
PRESET_FAMILY: dict[str, str] = {"llama-seed": "llama"}
FAMILY_VARIANT: dict[tuple[str, str], str] = {("seed", "llama"): "llama-seed"}  # (preset, family) -> its variant


def _for_family(stages: tuple[Stage, ...], family: str) -> tuple[Stage, ...]:
    return tuple(dict.fromkeys(s for s in (stage.for_family(family) for stage in stages) if s is not None))


PRESETS["llama-seed"] = _for_family(PRESETS["seed"], "llama")
TWINS["llama-seed"] = _for_family(TWINS["seed"], "llama")


# The ladder a run takes when none is named (the CLI's `run`, the dashboard's first choice): one whose stages run on
# the device, in bounded time. Apex's seed ladder needs CUDA (1 of its stages runs on a CPU); on a CPU, PyTorch's
# native ladder without compile (its compile stage is one choice away: the `native` preset).
DEFAULT_PRESET: dict[str, str] = {"cuda": "seed", "cpu": "native-eager"}


def default_preset(device: str) -> str:
    """The preset to run on `device` ("cuda" or "cpu", as resolved) when none is chosen."""
    return DEFAULT_PRESET.get(device, DEFAULT_PRESET["cpu"])


def is_twin(name: str, stage: Stage) -> bool:
    """A stage the preset `name` runs only as a native twin of its own stages."""
    own = {s.for_family(f) for s in PRESETS.get(name, ()) for f in FAMILIES}
    return stage.replace(gpus="1") not in own and any(stage.replace(gpus="1") == t.for_family(f)
                                                       for t in TWINS.get(name, ()) for f in FAMILIES)


def preset(name: str, family: str = "gpt") -> tuple[Stage, ...]:
    """The preset's stages for a model family, its native twins after its own; a family-bound preset (llama-seed)
    refuses the other family."""
    from bench_core.config.bench_config import ConfigError
    if name not in PRESETS:
        raise ConfigError("preset", name, f"unknown preset; choose one of {', '.join(PRESETS)}")
    bound = PRESET_FAMILY.get(name)
    if bound and bound != family:
        raise ConfigError("preset", name, f"is the seed ladder for the {bound} family; this model is {family} "
                          f"(use --model llama-small or llama-1b, or the seed preset)")
    return _for_family(PRESETS[name] + TWINS.get(name, ()), family)


def family_variant(name: str, family: str) -> str:
    """The preset that `name` runs as for `family` (seed on llama is llama-seed, as the history names it)."""
    return FAMILY_VARIANT.get((name, family), name)


def family_errors(stages: Any, family: str) -> list[Any]:
    """A ConfigError for each stage with a part another family takes (nothing is launched when any exists)."""
    from bench_core.config.bench_config import ConfigError
    out = []
    for stage in stages:
        conflict = stage.family_conflict(family)
        if conflict:
            out.append(ConfigError(conflict[0], stage.name_of(conflict[0]), conflict[1]))
    return out


def across_gpus(stages: Any, counts: Any) -> list[Stage]:
    """Each stage at each GPU count, so every multi-GPU stage has its one-GPU twin for scaling efficiency."""
    from bench_core.config.bench_config import ConfigError
    counts = [str(c) for c in counts]
    for c in counts:
        if c not in names_of("gpus"):
            raise ConfigError("gpus", c, f"choose from {', '.join(names_of('gpus'))}")
    return [stage.replace(gpus=c) for stage in stages for c in counts]
