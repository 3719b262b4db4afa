"""A stage's own training step on the point's model cut to one block and to two, and each part of a block timed
alone (the breakdown), all at the point's real shapes, through the components engine's row measurement
(components.bench.measure_row: the stages' timer, kernels counted by the profiler on CUDA); imports torch, so it
runs in the sweep's own measuring process, never in the dashboard's.

Only the (part, variant) pairs the two stages need are timed: their shallow steps, and their breakdown where asked
(sweep.predict.stage_parts). A part that cannot run
here (an FP8 GEMM below compute capability 8.9, a vendor's kernel without its package) is left out: without its
shallow steps a stage has no prediction, and the point is measured end to end.
"""
from __future__ import annotations

import contextlib
import gc
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from bench_core.components.bench import measure_row, param_shapes
from bench_core.config.bench_config import BenchConfig
from bench_core.levers.registry import LEVERS, HeadLever, NormLever, OptimizerLever
from bench_core.levers.stage import Stage
from bench_core.machine.timer import HOST_CALLS, host_rounds_ms
from bench_core.models.families import mlp_hidden
from bench_core.sweep.predict import (
    STEP_BLOCKS,
    KernelTime,
    Part,
    PointTimings,
    block_gemms,
    split_compiled,
    stage_parts,
)

DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}
LAUNCH_PROBE_KERNELS = 2000
# A whole step's host time is taken over 2 steps back to back, as a run issues them: a shallow step launches up to
# about 300 kernels, so 2 stay inside the launch queue (about a thousand) and the host never waits for the GPU (on
# the H200, call 28, gpt2-small's one-block step at batch 1 took 5.36 ms to issue alone after a sync, 4.23 ms a
# step back to back).
STEP_HOST_CALLS = 2
# Kineto leaves CUPTI attached after a profile unless told to tear it down, and every later launch in the process
# pays for it (pytorch/pytorch#144455: training 10-20% slower). On the H200 the enqueue probe read 14.3 us a kernel
# after the parts' profiles (calls 25, 28) and 10.3 us before any (calls 29-30). Each part is timed before it is
# profiled; the teardown keeps one part's profile out of the next part's timing.
PROFILER_TEARDOWN = ("TEARDOWN_CUPTI", "1")
# Timed calls per part (after as many warm-up calls as WARMUP): a GPU's kernels are steady and quick; a CPU sweep
# only exercises the path (its tiny parts take milliseconds, and the machine is often shared).
REPEATS = {"cuda": 20, "cpu": 7}
# A CPU's first steps allocate: with one warm-up call, a process's first shallow step read 1.8x its later ones.
WARMUP = {"cuda": 5, "cpu": 3}
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
    for k, n in block_gemms(cfg.family, cfg.width, mlp_hidden(cfg)):
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
    shape = (cfg.batch_size, cfg.heads, cfg.seq_len, cfg.width // cfg.heads)
    t = getattr(torch, DTYPES[dtype])
    q, k, v = (torch.randn(shape, device=device, dtype=t, generator=gen).requires_grad_() for _ in range(3))
    dy = torch.randn(shape, device=device, dtype=t, generator=gen)

    def run() -> None:
        q.grad = k.grad = v.grad = None
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).backward(dy)
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


def step_fn(torch, cfg: BenchConfig, device: str, stage: Stage, depth: int) -> Callable[[], Any]:
    """One training step of the stage, as its worker builds and runs it (run.step.build_stage: the family's model
    with the stage's parts, FP8 conversion, optimizer, autocast, torch.compile, a captured CUDA graph), on the
    point's model cut to `depth` blocks."""
    from bench_core.run.processes import StageJob
    from bench_core.run.step import build_stage
    built = build_stage(StageJob(replace(cfg, depth=depth), stage, device), stage, torch)
    if built.capture is not None:
        built.capture()   # warms up on a side stream, then captures one step; `built.step` replays it

    def run() -> Any:
        return built.step()
    return run


def part_fn(torch, cfg: BenchConfig, device: str, part: Part, name: str, gen, stage: Stage) -> Callable[[], Any]:
    """The part's one call, as the variant names it (see sweep.predict.stage_parts), for `stage`."""
    if part in STEP_BLOCKS:
        return step_fn(torch, cfg, device, stage, STEP_BLOCKS[part])
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


def launch_us(torch, device: str) -> float:
    """The host's time to enqueue one small kernel, measured without waiting for the GPU; 0 on CPU."""
    if device != "cuda":
        return 0.0
    x = torch.zeros(1, device="cuda")
    for _ in range(100):
        x.add_(1)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(LAUNCH_PROBE_KERNELS):
        x.add_(1)
    elapsed = time.perf_counter() - t0
    torch.cuda.synchronize()
    return elapsed / LAUNCH_PROBE_KERNELS * 1e6


def time_point(cfg: BenchConfig, stages: tuple[Stage, ...], device: str, warmup: int | None = None,
               repeats: int | None = None, breakdown: bool = False) -> tuple[PointTimings, tuple[str, ...]]:
    """The parts the stages need, timed at this config's shapes (with `breakdown`, each part of a block alone as
    well); and why any part could not be timed."""
    os.environ.setdefault(*PROFILER_TEARDOWN)
    import torch
    cuda = device == "cuda"
    enqueue_us = launch_us(torch, device)   # before any profile
    warmup = WARMUP[device] if warmup is None else warmup
    repeats = REPEATS[device] if repeats is None else repeats
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    needed = [(part, name, stage) for stage in stages for part, name in stage_parts(stage, breakdown)]
    times: list[KernelTime] = []
    missing: list[str] = []
    timed: set[tuple[Part, str]] = set()
    graphs = torch._dynamo.utils.counters["stats"]
    for part, name, stage in needed:
        if (part, name) in timed:   # a part both stages share is timed once
            continue
        timed.add((part, name))
        compiled = stage.compile_lever.traces_model if part in STEP_BLOCKS else split_compiled(name)[1]
        if compiled:   # a fresh start per part: a function compiled at many shapes would reach dynamo's recompile
            torch._dynamo.reset()   # limit and run eagerly; the compiled kernels stay cached on disk
        traced_before = graphs["unique_graphs"]
        flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        fn: Callable[[], Any] | None = None
        baseline = torch.cuda.memory_allocated() if cuda else 0
        try:
            fn = part_fn(torch, cfg, device, part, name, gen, stage)
            for _ in range(warmup):   # once: the host's timing and the timed calls both follow it
                fn()
            if cuda:   # the peak after the warm-up, as a worker reads its stage's (run.step)
                torch.cuda.reset_peak_memory_stats()
            # the host's time before the part's profile (see PROFILER_TEARDOWN)
            rounds = host_rounds_ms(torch, fn, STEP_HOST_CALLS if part in STEP_BLOCKS else HOST_CALLS) \
                if cuda else [0.0]
            row, _ = measure_row(torch, part.value, name, name, name, fn, 0, cuda, 0, repeats, None,
                                 lambda seen: (None, None))
            # a whole step's peak: its model, gradients, optimizer state and activations, less what was there before
            peak_mib = (torch.cuda.max_memory_allocated() - baseline) / 2**20 if cuda and part in STEP_BLOCKS else 0.0
        except Exception as exc:
            missing.append(f"{part.value} {name}: {type(exc).__name__}: {exc}"[:300])
            continue
        finally:   # a stage's build sets TF32 for its process: the next part runs as its own variant says
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags
            fn = None   # its model, optimizer and tensors go before the next part's are made
            if cuda:
                gc.collect()   # a built stage's closures hold cycles: freed before the next part's baseline
                torch.cuda.empty_cache()
        if row.status != "ok" or row.median_ms is None:
            missing.append(f"{part.value} {name}: {row.reason}")
            continue
        if compiled and graphs["unique_graphs"] == traced_before:
            missing.append(f"{part.value} {name}: torch.compile traced no graph (the part ran eagerly)")
            continue
        times.append(KernelTime(part, name, row.median_ms, row.p10_ms or row.median_ms, row.p90_ms or row.median_ms,
                                row.kernels_per_call or 0, calls_per_step(part, cfg), row.kernel_ms if cuda else None,
                                statistics.median(rounds), min(rounds), max(rounds), peak_mib))
    return PointTimings(tuple(times), enqueue_us, cfg.depth), tuple(missing)


def main() -> int:
    """`python -m bench_core.sweep.kernels`: one process times every point of a sweep (torch imported once).
    stdin: {"device", "a", "b", "configs": [BenchConfig dicts], "breakdown": bool}; stdout: one JSON line per
    point, in order."""
    import json
    import sys
    request = json.loads(sys.stdin.read())
    keyed = (Stage.from_key(request["a"]), Stage.from_key(request["b"]))
    for i, data in enumerate(request["configs"]):
        cfg = BenchConfig.from_dict(data)
        # A key leaves out the family's own parts (llama's SwiGLU is plain): each stage in the config's family form,
        # as the worker builds it (run.step) and the comparison was parsed (sweep.spec).
        stages = tuple(stage.for_family(cfg.family) or stage for stage in keyed)
        timings, missing = time_point(cfg, stages, request["device"], breakdown=bool(request.get("breakdown")))
        print(json.dumps({"index": i, "timings": timings.to_dict(), "missing": list(missing)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
