"""What a stage is timed as, one (part, variant) pair each: its whole step at one block and at two (what the
prediction is made of), and, where asked, each part of a block alone (the breakdown), with the compiled variants
of the parts torch.compile traces; and a block's GEMM shapes. The timing process times these and the predictor
reads them back by the same pairs."""
from __future__ import annotations

from bench_core.levers.stage import Stage
from bench_core.models.families import Architecture
from bench_core.sweep.timing.timings import STEP_BLOCKS, Part


def compute_dtype(stage: Stage) -> str:
    """What the stage's non-GEMM work runs in: the autocast dtype, or fp32."""
    return {"bfloat16": "bf16", "float16": "fp16"}.get(stage.precision_lever.plan.autocast_dtype or "", "fp32")


def gemm_variant(stage: Stage) -> str:
    """The rate the stage's block GEMMs run at: FP8 stages fp8, otherwise the precision's own."""
    return stage.precision_lever.gemm_rate or stage.precision


def variant(name: str, dtype: str) -> str:
    return f"{name}@{dtype}"


COMPILED = "+compile"
# What torch.compile traces in a compiled model: attention keeps its fused SDPA kernel, the optimizer runs eagerly.
COMPILED_PARTS = (Part.GEMM, Part.NORM, Part.ACTIVATION, Part.LOSS)


def split_compiled(name: str) -> tuple[str, bool]:
    """A variant without its COMPILED suffix, and whether it had one."""
    return (name[:-len(COMPILED)], True) if name.endswith(COMPILED) else (name, False)


def breakdown_parts(stage: Stage) -> list[tuple[Part, str]]:
    """The (part, variant) a block's time breaks into, each timed alone (the stage in its family's form: its MLP
    lever is gelu, swiglu or a fused one); a stage that torch.compile traces names its traced parts' compiled
    variants. Not added into the prediction (see the module's docstring)."""
    dtype = compute_dtype(stage)
    parts = [(Part.GEMM, gemm_variant(stage)), (Part.ATTENTION, dtype), (Part.NORM, variant(stage.norm, dtype)),
             (Part.ACTIVATION, variant(stage.mlp, dtype)), (Part.LOSS, variant(stage.head, dtype)),
             (Part.OPTIMIZER, stage.optimizer)]
    if not stage.compile_lever.traces_model:
        return parts
    return [(part, name + COMPILED if part in COMPILED_PARTS else name) for part, name in parts]




def step_parts(stage: Stage) -> list[tuple[Part, str]]:
    """The stage's whole step at one block and at two: what the prediction is made of (variant: the stage's key)."""
    return [(part, stage.key) for part in STEP_BLOCKS]


def stage_parts(stage: Stage, breakdown: bool = True) -> list[tuple[Part, str]]:
    """Everything timed for a stage: its shallow steps, then (where asked) its breakdown."""
    return step_parts(stage) + (breakdown_parts(stage) if breakdown else [])


def block_gemms(arch: Architecture) -> list[tuple[int, int]]:
    """(K, N) of each linear layer in one block, as the family's architecture states it: the QKV projection(s)
    at the attention's KV heads, the attention output, then the MLP's."""
    return [(linear.fan_in, linear.fan_out) for linear in arch.block_linears]
