"""Each part's one call, built at a point's real shapes: a stage's whole training step on the model cut to a
given depth (what the prediction is made of), and each part of a block alone (the breakdown: GEMMs, attention,
norm, activation, loss head, optimizer). Imports torch through its callers (sweep.timing.process), never the dashboard.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bench_core.components.bench import param_shapes
from bench_core.config.bench_config import BenchConfig
from bench_core.levers.lever_types import HeadLever, NormLever, OptimizerLever
from bench_core.levers.registry import LEVERS
from bench_core.levers.stage import Stage
from bench_core.models.families import architecture, mlp_hidden
from bench_core.sweep.timing.timings import STEP_BLOCKS, STEP_PARTS, Part
from bench_core.sweep.timing.variants import block_gemms, split_compiled

if TYPE_CHECKING:
    from bench_core.run.step import Built

DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}
FP8_MAX = 448.0   # float8_e4m3fn's largest value: dynamic scaling maps each tensor's amax onto it


def _compile(torch, fn: Callable[..., Any], compiled: bool) -> Callable[..., Any]:
    """The function as a compiled stage's model runs it: traced whole by torch.compile (a graph break raises, so
    what is timed is never a partly eager fallback), or as it is."""
    return torch.compile(fn, fullgraph=True) if compiled else fn


def _autocast(torch, device: str, dtype: str):
    return contextlib.nullcontext() if dtype == "fp32" else torch.autocast(device, dtype=getattr(torch, DTYPES[dtype]))


def _fp8_mm(torch, a, b_t):
    """a @ b_t.T in float8 with tensorwise dynamic scales, the casts included (what torchao's float8 does)."""
    sa = (FP8_MAX / a.abs().amax().clamp(min=1e-12)).float()
    sb = (FP8_MAX / b_t.abs().amax().clamp(min=1e-12)).float()
    a8 = (a * sa).to(torch.float8_e4m3fn)
    b8 = (b_t * sb).to(torch.float8_e4m3fn)
    return torch._scaled_mm(a8, b8.t(), scale_a=sa.reciprocal(), scale_b=sb.reciprocal(), out_dtype=torch.bfloat16)


def gemm_fn(torch, cfg: BenchConfig, device: str, rate: str, gen, compiled: bool = False) -> Callable[[], list]:
    """One block's GEMMs: for each layer the forward product and both backward ones (dX, dW). Under autocast
    (bf16, fp16) the fp32 weight is cast down for the products and its gradient cast back up, as autocast does;
    FP8 casts, scales and transposes every operand each call, as torchao's float8 training does."""
    m = cfg.batch_size * cfg.seq_len
    dtype = getattr(torch, DTYPES.get(rate, "bfloat16"))
    cast = rate in ("bf16", "fp16")
    layers = []
    for k, n in block_gemms(architecture(cfg)):
        x = torch.randn(m, k, device=device, dtype=dtype, generator=gen)
        w = torch.randn(n, k, device=device, dtype=torch.float32 if cast else dtype, generator=gen) * 0.02
        dy = torch.randn(m, n, device=device, dtype=dtype, generator=gen)
        layers.append((x, w, dy))

    def products(layers: list) -> list:   # returned, so a compiled graph cannot drop them as unused
        out = []
        for x, w, dy in layers:
            if rate == "fp8":   # _scaled_mm takes its second operand column-major: each is a transposed copy
                out += [_fp8_mm(torch, x, w), _fp8_mm(torch, dy, w.t().contiguous()),
                        _fp8_mm(torch, dy.t().contiguous(), x.t().contiguous())]
            elif cast:
                low = w.to(dtype)
                out += [x @ low.t(), dy @ low, (dy.t() @ x).float()]
            else:
                out += [x @ w.t(), dy @ w, dy.t() @ x]
        return out

    traced = _compile(torch, products, compiled)

    def run() -> list:
        return traced(layers)

    if rate != "tf32":
        return run

    def tf32() -> list:
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return run()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
    return tf32


def attention_fn(torch, cfg: BenchConfig, device: str, dtype: str, gen) -> Callable[[], Any]:
    attn = architecture(cfg).attention   # keys and values at the KV heads: grouped-query attention as built
    q_shape = (cfg.batch_size, attn.heads, cfg.seq_len, attn.head_dim)
    kv_shape = (cfg.batch_size, attn.kv_heads, cfg.seq_len, attn.head_dim)
    t = getattr(torch, DTYPES[dtype])
    q, k, v = (torch.randn(shape, device=device, dtype=t, generator=gen).requires_grad_()
               for shape in (q_shape, kv_shape, kv_shape))
    dy = torch.randn(q_shape, device=device, dtype=t, generator=gen)
    gqa = {"enable_gqa": True} if attn.kv_heads != attn.heads else {}

    def run() -> None:
        q.grad = k.grad = v.grad = None
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa).backward(dy)
    return run


def norm_fn(torch, cfg: BenchConfig, device: str, name: str, dtype: str, gen,
            compiled: bool = False) -> Callable[[], Any]:
    lever: NormLever = LEVERS[name]  # type: ignore[assignment]
    module = _compile(torch, lever.build()(cfg.width).to(device), compiled)
    x = torch.randn(cfg.batch_size * cfg.seq_len, cfg.width, device=device, generator=gen).requires_grad_()

    def run() -> None:
        x.grad = None
        with _autocast(torch, device, dtype):   # outside the compiled module, as the training step enters it
            y = module(x)
        y.backward(torch.ones_like(y))
    return run


def activation_fn(torch, cfg: BenchConfig, device: str, name: str, dtype: str, gen,
                  compiled: bool = False) -> Callable[[], Any]:
    rows, hidden = cfg.batch_size * cfg.seq_len, mlp_hidden(cfg)
    t = getattr(torch, DTYPES[dtype])
    a, b = (torch.randn(rows, hidden, device=device, dtype=t, generator=gen).requires_grad_() for _ in range(2))
    dy = torch.randn(rows, hidden, device=device, dtype=t, generator=gen)
    F = torch.nn.functional
    if name == "gelu":
        def act(a, b) -> Any:
            return F.gelu(a, approximate="tanh")
    elif name == "swiglu":
        def act(a, b) -> Any:
            return F.silu(a) * b
    elif name == "liger-swiglu":
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction

        def act(a, b) -> Any:
            return LigerSiLUMulFunction.apply(a, b)
    else:
        raise LookupError(f"no activation timing for {name}")
    traced = _compile(torch, act, compiled)

    def run() -> None:
        a.grad = b.grad = None
        traced(a, b).backward(dy)
    return run


def loss_fn(torch, cfg: BenchConfig, device: str, name: str, dtype: str, gen,
            compiled: bool = False) -> Callable[[], Any]:
    """The LM head's GEMMs and the loss, forward and backward, through the head lever's own function."""
    lever: HeadLever = LEVERS[name]  # type: ignore[assignment]
    head = _compile(torch, lever.build(), compiled)
    rows = cfg.batch_size * cfg.seq_len
    hidden = torch.randn(rows, cfg.width, device=device, generator=gen).requires_grad_()
    weight = (torch.randn(cfg.vocab_size, cfg.width, device=device, generator=gen) * 0.02).requires_grad_()
    targets = torch.randint(0, cfg.vocab_size, (rows,), device=device, generator=gen)

    def run() -> None:
        hidden.grad = weight.grad = None
        with _autocast(torch, device, dtype):
            _, loss = head(hidden, weight, targets)
        loss.backward()
    return run


def optimizer_fn(torch, cfg: BenchConfig, device: str, name: str, gen) -> Callable[[], Any]:
    lever: OptimizerLever = LEVERS[name]  # type: ignore[assignment]
    params = []
    for shape in param_shapes(cfg):
        p = torch.nn.Parameter(torch.randn(shape, device=device, generator=gen) * 0.02)
        p.grad = torch.randn(shape, device=device, generator=gen) * 1e-2
        params.append(p)
    return lever.build(params).step


def calls_per_step(part: Part, cfg: BenchConfig) -> int:
    """How often a step runs the part: per block, the norms twice per block plus the final one, the rest once."""
    return {Part.GEMM: cfg.depth, Part.ATTENTION: cfg.depth, Part.NORM: 2 * cfg.depth + 1,
            Part.ACTIVATION: cfg.depth}.get(part, 1)   # a shallow step: once


class StepCall:
    """One training step of a built stage (run.step.Built), as a part's call; `built` is there for what reads the
    step by its phases (sweep.timing.process.phase_peaks_mib)."""
    def __init__(self, built: Built):
        self.built = built

    def __call__(self) -> Any:
        return self.built.step()


def step_fn(torch, cfg: BenchConfig, device: str, stage: Stage, depth: int) -> StepCall:
    """One training step of the stage, as its worker builds and runs it (run.step.build_stage: the family's model
    with the stage's parts, FP8 conversion, optimizer, autocast, torch.compile, a captured CUDA graph), on the
    point's model cut to `depth` blocks."""
    from bench_core.run.processes import StageJob
    from bench_core.run.step import build_stage
    built = build_stage(StageJob(replace(cfg, depth=depth), stage, device), stage, torch)
    if built.capture is not None:
        built.capture()   # warms up on a side stream, then captures one step; `built.step` replays it
    return StepCall(built)


def tf32_restorer(torch) -> Callable[[], None]:
    """What puts the process's TF32 settings back as they are now, exactly. Exactly: torch's unset matmul precision
    ("none") read through allow_tf32 and written back comes back "ieee", and the compile cache keys on it, so a
    step compiled ahead in a fresh process (sweep.timing.ahead) was not found by the timing process after its first part
    (on CPU, where a stage's build leaves TF32 as it finds it)."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    flags = (matmul.allow_tf32, cudnn.allow_tf32)
    precision = getattr(matmul, "fp32_precision", None)   # torch 2.9 on

    def restore() -> None:
        matmul.allow_tf32, cudnn.allow_tf32 = flags
        if precision is not None:
            matmul.fp32_precision = precision
    return restore


def part_fn(torch, cfg: BenchConfig, device: str, part: Part, name: str, gen, stage: Stage) -> Callable[[], Any]:
    """The part's one call, as the variant names it (see sweep.timing.variants.stage_parts), for `stage`."""
    if part in STEP_PARTS:   # the full-depth step at its own config's depth (sweep.timing.process.probe_config)
        return step_fn(torch, cfg, device, stage, STEP_BLOCKS.get(part, cfg.depth))
    base, compiled = split_compiled(name)
    lever, _, dtype = base.partition("@")
    if part == Part.GEMM:
        return gemm_fn(torch, cfg, device, base, gen, compiled)
    if part == Part.ATTENTION:
        return attention_fn(torch, cfg, device, base, gen)
    if part == Part.NORM:
        return norm_fn(torch, cfg, device, lever, dtype, gen, compiled)
    if part == Part.ACTIVATION:
        return activation_fn(torch, cfg, device, lever, dtype, gen, compiled)
    if part == Part.LOSS:
        return loss_fn(torch, cfg, device, lever, dtype, gen, compiled)
    return optimizer_fn(torch, cfg, device, base, gen)
