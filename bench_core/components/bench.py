"""The measurement behind the components view: imports torch, so call it in its own process.

The rows are the registry's levers, by their registry names: every optimizer lever (one step over the real model's
parameters, random gradients), and the model family's norm levers (forward + backward over (batch x seq) rows at
the model's width, fp32 and under BF16 autocast), plus the compiled native norm. Whether a row can run here is the
lever's own requirement; timing is the stages' CUDA-event timer (machine.timer); one more call under torch.profiler
is read by the stages' trace reader (measure.breakdown) and judged by the lever's expected and betraying kernels
(measure.proof).
"""
from __future__ import annotations

import contextlib
import gc
import importlib.metadata
import importlib.util
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from bench_core.components.rows import (
    ComponentRow,
    ComponentsReport,
    gbps,
    norm_bytes,
    norm_shape,
    numel,
    optimizer_step_bytes,
)
from bench_core.config.bench_config import BenchConfig, ConfigError
from bench_core.levers.lever_types import Lever, NormLever, OptimizerLever
from bench_core.levers.registry import KERNEL_PACKAGES, LEVERS, names_of
from bench_core.levers.same_code import same_here
from bench_core.levers.stage import Stage
from bench_core.machine import cache as machine_cache
from bench_core.machine.ceilings import Ceilings
from bench_core.machine.probe import Probe
from bench_core.machine.timer import time_calls
from bench_core.measure import breakdown, proof
from bench_core.measure.stats import quantile
from bench_core.measure.trace import from_profiler
from bench_core.models.families import NormType, architecture, param_count

COMPILE_CPU_REASON = "compiled norm row runs on CUDA only (CPU inductor compile takes minutes on small machines)"
DTYPES = ("fp32", "bf16-autocast")
NAMES_SHOWN = 4


def param_shapes(cfg: BenchConfig) -> list[tuple[int, ...]]:
    """The shapes of the model a stage's worker builds, read from ``parameters()`` of it built on the meta device
    (no memory, no copy of the model's layout to keep in step)."""
    import torch

    from bench_core.models.families import build_model
    from bench_core.run.step import model_parts
    with torch.device("meta"):
        model = build_model(cfg, model_parts(Stage(), cfg.family))
    return [tuple(p.shape) for p in model.parameters()]


def optimizer_levers() -> list[str]:
    return names_of("optimizer")


def norm_levers(cfg: BenchConfig) -> list[str]:
    """The family's norm levers, native first (the registry's order)."""
    takes = architecture(cfg).norm
    return [n for n in names_of("norm") if getattr(LEVERS[n], "part_type", None) == takes]


def compiled_name(native: str) -> str:
    return f"{native}-compiled"


def _class_name(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _profile(torch, fn, cuda: bool) -> tuple[breakdown.StageProfile, set[str]]:
    """One call under torch.profiler, read by the stages' trace reader."""
    import warnings

    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=activities) as prof:
            fn()
            if cuda:
                torch.cuda.synchronize()
    trace = from_profiler(prof)
    return breakdown.from_trace(trace, 1, cuda), set(trace.names)


def _shown_names(profile: breakdown.StageProfile, seen: dict[str, list[str]]) -> tuple[str, ...]:
    """The key kernels (or ops) that tell implementations apart first, then those that took the most time."""
    keys = [n for names in seen.values() for n in names if not n.startswith("gemm:")]
    ranked = list(dict.fromkeys(keys + [name for name, *_ in profile.top]))
    return tuple(n[:breakdown.NAME_CHARS] for n in ranked[:NAMES_SHOWN])


def _judge(levers: tuple[Lever, ...], stage: Stage, device: str, seen: dict[str, list[str]],
           facts: proof.Facts) -> tuple[str, str | None]:
    """The stages' verdict over just the levers a row measures (not the whole stage's others)."""
    state, warnings = proof.lever_verdict(levers, stage, device, seen, facts)
    return ("verified" if state == "verified" else state), ("; ".join(warnings) or None)


Judge = Callable[[dict[str, list[str]]], tuple[str | None, str | None]]  # the kernels seen -> (proof, note)


def _unjudged(seen: dict[str, list[str]]) -> tuple[str | None, str | None]:
    return None, None


@dataclass(frozen=True)
class RowCall:
    """One row to measure: what it is (view, registry name, title, dtype), the call timed, the bytes it moves
    (0: no bandwidth figure) and how its kernels are judged."""
    view: str
    name: str
    title: str
    dtype: str
    fn: Callable[[], object]
    nbytes: int = 0
    judge: Judge = _unjudged


@dataclass(frozen=True)
class RowTiming:
    """How every row of one measurement is timed: the device's timer, the calls before and in the timing, and
    the copy ceiling a bandwidth is set against (None: no share of it)."""
    cuda: bool
    warmup: int
    repeats: int
    copy_gbps: float | None = None


def measure_call(torch: Any, call: RowCall, timing: RowTiming) -> tuple[ComponentRow, breakdown.StageProfile | None]:
    """Time and profile one row. Returns the row and its trace profile."""
    cuda = timing.cuda
    try:
        times = time_calls(torch, call.fn, cuda, timing.warmup, timing.repeats)
        profile, names = _profile(torch, call.fn, cuda)
    except Exception as exc:
        return ComponentRow(call.view, call.name, call.dtype, "failed", reason=f"{type(exc).__name__}: {exc}"[:500],
                            bytes_moved=call.nbytes, title=call.title), None
    seen = proof.classify(names)
    verdict, note = call.judge(seen)
    median = statistics.median(times)
    rate = gbps(call.nbytes, median)
    return ComponentRow(
        call.view, call.name, call.dtype, "ok", reason=note, median_ms=median, p10_ms=quantile(times, 0.1),
        p90_ms=quantile(times, 0.9), bytes_moved=call.nbytes, gb_per_s=rate,
        copy_fraction=(rate / timing.copy_gbps) if (rate and timing.copy_gbps) else None,
        kernels_per_call=round(profile.kernels_per_step) if cuda and profile.kernels_per_step is not None else None,
        kernel_ms=profile.gpu_kernel_ms if cuda else None, kernel_names=_shown_names(profile, seen), proof=verdict,
        title=call.title), profile


def optimizer_rows(torch, cfg: BenchConfig, device: str, warmup: int, repeats: int, probe: Probe,
                   copy_gbps: float | None) -> list[ComponentRow]:
    cuda = device == "cuda"
    timing = RowTiming(cuda, warmup, repeats, copy_gbps)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    params = []
    for shape in param_shapes(cfg):
        p = torch.nn.Parameter(torch.randn(shape, device=device, generator=gen) * 0.02)
        p.grad = torch.randn(shape, device=device, generator=gen) * 1e-2  # random, never zeros
        params.append(p)
    rows: list[ComponentRow] = []
    for name in optimizer_levers():
        lever: OptimizerLever = LEVERS[name]  # type: ignore[assignment]
        twin = next((i for i, r in enumerate(rows) if r.status == "ok" and same_here(LEVERS[r.name], lever, device)),
                    None)
        if twin is not None:   # the same code here as a row already measured: one row, saying so
            rows[twin] = _with(rows[twin], reason="; ".join(filter(None, (
                rows[twin].reason, f"{lever.title} (`{name}`) runs this same code on {device.upper()}: "
                                   "measured once"))))
            continue
        stage = Stage(optimizer=name)
        reason = lever.requires(probe, device, stage)
        if reason:
            rows.append(ComponentRow("optimizer", name, "fp32", "unavailable", reason=reason, title=lever.title))
            continue
        try:
            opt = lever.build(params)
            opt.step()  # torch raises here, not in the constructor, where an option is not supported
        except Exception as exc:
            rows.append(ComponentRow("optimizer", name, "fp32", "unavailable", title=lever.title,
                                     reason=f"{lever.title} could not be built: {type(exc).__name__}: {exc}"[:500]))
            continue
        facts = proof.Facts(optimizer_class=_class_name(opt))
        nbytes = optimizer_step_bytes((p.numel() for p in params), lever.moment_bytes)
        row, _ = measure_call(torch, RowCall(
            "optimizer", name, lever.title, "fp32", opt.step, nbytes,
            partial(_judge, (lever,), stage, device, facts=facts)), timing)
        rows.append(row)
        del opt
        gc.collect()
    del params
    gc.collect()
    return rows


def _norm_module(torch, lever: NormLever, width: int, device: str, compiled: bool):
    module: Any = lever.build()(width).to(device)
    with torch.no_grad():
        module.weight.copy_(1 + 0.1 * torch.randn(width))
        bias = getattr(module, "bias", None)  # RMSNorm has none
        if bias is not None:
            bias.copy_(0.1 * torch.randn(width))
    return torch.compile(module, dynamic=False) if compiled else module


def norm_rows(torch, cfg: BenchConfig, device: str, warmup: int, repeats: int, probe: Probe,
              copy_gbps: float | None) -> list[ComponentRow]:
    cuda = device == "cuda"
    timing = RowTiming(cuda, warmup, repeats, copy_gbps)
    rows_n, width = norm_shape(cfg)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    x = torch.randn(rows_n, width, device=device, generator=gen).requires_grad_()
    dy = {torch.float32: torch.randn(rows_n, width, device=device, generator=gen)}
    dy[torch.bfloat16] = dy[torch.float32].to(torch.bfloat16)
    names = norm_levers(cfg)
    out: list[ComponentRow] = []
    profiles: dict[tuple[str, str], breakdown.StageProfile] = {}
    for name in [*names, compiled_name(names[0])]:
        compiled = name not in LEVERS
        lever: NormLever = LEVERS[names[0] if compiled else name]  # type: ignore[assignment]
        stage = Stage(norm=lever.name, compile="compile" if compiled else "eager")
        levers = (lever, stage.lever("compile")) if compiled else (lever,)
        title = f"torch.compile({lever.title})" if compiled else lever.title
        reason = (COMPILE_CPU_REASON if compiled and not cuda else
                  next((r for r in (lv.requires(probe, device, stage) for lv in levers) if r), None))
        if reason:
            out += [ComponentRow("norm", name, d, "unavailable", reason=reason, title=title) for d in DTYPES]
            continue
        try:
            module = _norm_module(torch, lever, width, device, compiled)
        except Exception as exc:
            out += [ComponentRow("norm", name, d, "unavailable", title=title,
                                 reason=f"{title} could not be built: {type(exc).__name__}: {exc}"[:500])
                    for d in DTYPES]
            continue
        facts = proof.Facts(norm_class=None if compiled else _class_name(module))
        for dtype in DTYPES:
            auto = dtype == "bf16-autocast"

            def step(module=module, auto=auto):
                x.grad = None
                for p in module.parameters():
                    p.grad = None
                with torch.autocast(device, dtype=torch.bfloat16) if auto else contextlib.nullcontext():
                    y = module(x)
                y.backward(dy[y.dtype])
                return y

            try:  # the first call compiles (torch.compile) and tells which dtype the norm writes
                t0 = time.perf_counter()
                io_bytes = step().element_size()
                first_s = time.perf_counter() - t0
            except Exception as exc:
                out.append(ComponentRow("norm", name, dtype, "failed", title=title,
                                        reason=f"{type(exc).__name__}: {exc}"[:500]))
                continue
            nbytes = norm_bytes(rows_n, width, io_bytes, architecture(cfg).norm, lever.stat_bytes, lever.param_bytes)
            row, profile = measure_call(torch, RowCall(
                "norm", name, title, dtype, step, nbytes,
                partial(_judge, levers, stage, device, facts=facts)), timing)
            if compiled and row.status == "ok":
                note = f"first call (compile) took {first_s:.1f} s, not timed"
                row = _with(row, reason=f"{row.reason}; {note}" if row.reason else note)
            if profile is not None:
                profiles[(name, dtype)] = profile
            out.append(row)
    return _wrapper_kernels(out, profiles, cuda)


def _wrapper_kernels(rows: list[ComponentRow], profiles: dict[tuple[str, str], breakdown.StageProfile],
                     cuda: bool) -> list[ComponentRow]:
    """A vendor norm under autocast: the kernels its wrapper adds over its fp32 call (its own kernels left out)."""
    for name in {n for n, _ in profiles}:
        lever = LEVERS.get(name)
        low, full = profiles.get((name, "bf16-autocast")), profiles.get((name, "fp32"))
        if not (cuda and lever is not None and lever.vendor and low and full):
            continue
        own = [proof.KEY_KERNELS[k].match for k in lever.expected("cuda", Stage(norm=name))]
        calls_full = {n: calls for n, _, _, calls in full.top}
        added = [(n, calls - calls_full.get(n, 0.0)) for n, _, _, calls in low.top
                 if calls > calls_full.get(n, 0.0) and not any(m(n) for m in own)]
        extra = tuple(f"{n} x{c:g}" for n, c in sorted(added, key=lambda nc: -nc[1]))
        rows = [_with(r, extra_kernels=extra) if (r.name, r.dtype) == (name, "bf16-autocast") else r for r in rows]
    return rows


def _with(row: ComponentRow, **changes) -> ComponentRow:
    from dataclasses import replace
    return replace(row, **changes)


def _env(torch, device: str) -> dict:
    try:
        apex = importlib.metadata.version("apex")
    except importlib.metadata.PackageNotFoundError:
        apex = None
    cuda = device == "cuda"
    return {"torch": torch.__version__, "cuda_runtime": torch.version.cuda, "python": platform.python_version(),
            "device_name": torch.cuda.get_device_name(0) if cuda else (machine_cache._cpu_model() or "CPU"),
            "cpu_threads": torch.get_num_threads(), "apex": apex,
            "apex_extensions": {e: importlib.util.find_spec(e) is not None for e in machine_cache.APEX_EXTENSIONS},
            "fingerprint": machine_cache.environment_fingerprint()}


def step_bytes_note(numels: list[int]) -> str:
    """Each optimizer lever's bytes per parameter over these tensors, levers alike in one group: fp32 moments make
    28; an 8-bit state less, by its own count (registry: OptimizerLever.moment_bytes)."""
    n_params = sum(numels)
    groups: dict[str, list[str]] = {}
    for name in optimizer_levers():
        moved = optimizer_step_bytes(numels, LEVERS[name].moment_bytes)  # type: ignore[attr-defined]
        groups.setdefault(f"{moved / n_params:.4g} bytes per parameter = {moved:,} bytes per step", []).append(name)
    return "; ".join(f"{', '.join(names)}: {moved}" for moved, names in groups.items())


def notes(cfg: BenchConfig, numels: list[int], n_params: int, rows_n: int, width: int, warmup: int, repeats: int,
          cuda: bool, ceilings: Ceilings | None) -> tuple[str, ...]:
    timer = "CUDA events around each call" if cuda else "time.perf_counter around each call"
    affine = "gamma/beta" if architecture(cfg).norm is NormType.LAYERNORM else "gamma (RMSNorm has no beta)"
    out = [f"optimizer: one step over the {len(numels)} fp32 tensors of the {cfg.family} model, {n_params:,} "
           "parameters, random grads; bytes per parameter moved: param read+write 8, grad read 4, and each of "
           "exp_avg and exp_avg_sq read+written at the lever's own state size (" + step_bytes_note(numels) + ")",
           f"norm: forward + backward at {rows_n}x{width}; x, y, dy, x again and dx at e bytes (the dtype the norm "
           f"reads and writes, fp32 for torch even under autocast), its statistics in fp32, {affine} read and their "
           "grads written in fp32; casts not counted",
           f"timing: {warmup} warm-up calls, then {repeats} timed calls, {timer}; median, p10, p90. Kernel count and "
           "proof: one more call under torch.profiler"]
    if cuda:
        out.append("copy fraction = GB/s / measured device-to-device copy GB/s (read + written). Ceilings: "
                   + (ceilings.method if ceilings else "not measured yet, so no copy fraction"))
    return tuple(out)


def run(cfg: BenchConfig, device: str, repeats: int = 30, *, warmup: int = 5, model: str = "custom",
        ceilings: Ceilings | None = None, refresh_ceilings: bool = False,
        probe: Probe | None = None) -> ComponentsReport:
    """Every row on ``device`` ("cpu" | "cuda"). ``probe``: the machine's (default: the cached probe), the one judge
    of what can run. On CUDA the ceilings are the cached ones, or measured now (this is a measurement run)."""
    import torch
    if device not in ("cpu", "cuda"):
        raise ConfigError("device", device, "must be cpu or cuda")
    cuda = device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise ConfigError("device", "cuda", "no CUDA device is available on this machine")
    if repeats < 1:
        raise ConfigError("repeats", repeats, "must be a positive integer")
    if probe is None:
        from bench_core.machine.probe import cached_probe
        probe = cached_probe(packages=KERNEL_PACKAGES)[0]
    if cuda and ceilings is None:
        from bench_core.machine.ceilings import cached_or_measure
        ceilings = cached_or_measure(torch, refresh=refresh_ceilings)
    ceilings = ceilings if cuda else None
    copy = ceilings.copy_gbps if ceilings else None
    torch.manual_seed(cfg.seed)
    rows = optimizer_rows(torch, cfg, device, warmup, repeats, probe, copy)
    rows += norm_rows(torch, cfg, device, warmup, repeats, probe, copy)
    rows_n, width = norm_shape(cfg)
    n_params = param_count(cfg)
    return ComponentsReport(
        model=model, device=device, config=cfg.to_dict(), rows=tuple(rows),
        ceilings=ceilings.to_dict() if ceilings else None, params=n_params, rows_x_width=(rows_n, width),
        env=_env(torch, device), created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        notes=notes(cfg, [numel(s) for s in param_shapes(cfg)], n_params, rows_n, width, warmup, repeats, cuda,
                    ceilings))
