"""The measurement behind the components view (see components.py): imports torch, so call it in its own process.

Optimizer rows: one Adam step over GPT-shaped parameters (real shapes, real count) with random gradients.
LayerNorm rows: forward + backward over (batch x seq) rows at the model's width, fp32 and under BF16 autocast.
Each row: ``warmup`` untimed calls, ``repeats`` timed calls (CUDA events on the GPU, perf_counter on CPU), then one
more call under torch.profiler for the kernel count and the proof of which implementation ran.
"""
from __future__ import annotations

import contextlib
import gc
import importlib.metadata
import importlib.util
import platform
import statistics
import time
from collections import Counter
from datetime import UTC, datetime

from bench_core.components.report import (
    ComponentRow,
    ComponentsReport,
    adam_bytes,
    adam_bytes_per_param,
    gbps,
    gpt_param_shapes,
    layernorm_bytes,
    layernorm_shape,
)
from bench_core.config.bench_config import BenchConfig, ConfigError
from bench_core.levers.builders import LR  # the stages' learning rate, so a row times the same Adam math
from bench_core.machine import cache as machine_cache
from bench_core.machine.timer import time_calls
from bench_core.measure.stats import quantile
from bench_core.models.families import param_count

NAME_CHARS = 160
COMPILE_CPU_REASON = ("compiled LayerNorm row runs on CUDA only (CPU inductor compile takes minutes on small "
                      "machines)")
APEX_LN_KERNELS = ("cuApplyLayerNorm", "cuComputeGradInput", "cuComputePartGradGammaBeta", "cuComputeGradGammaBeta")

# (name, title) of each row, in display order
OPTIMIZERS = (("adam-forloop", "torch Adam (for-loop)"), ("adam-foreach", "torch Adam (foreach)"),
              ("adam-fused", "torch Adam (fused=True)"), ("apex-fusedadam", "Apex FusedAdam"),
              ("apex-fusedadam-capturable", "Apex FusedAdam (capturable=True)"))
NORMS = (("layernorm", "torch nn.LayerNorm"), ("apex-fusedln", "Apex FusedLayerNorm"),
         ("layernorm-compiled", "torch.compile(nn.LayerNorm)"))


def is_apex_adam_kernel(name: str) -> bool:
    """Apex's multi_tensor_apply_kernel<…AdamFunctor…> (torch's fused kernel is at::native::…FusedAdamMathFunctor)."""
    return "AdamFunctor" in name and "at::native" not in name


def is_apex_ln_kernel(name: str) -> bool:
    return any(k in name for k in APEX_LN_KERNELS)


def is_key_op(name: str) -> bool:
    """Host ops that tell the implementations apart: foreach, fused Adam, native LayerNorm."""
    return name.startswith(("aten::_foreach_", "aten::_fused_adam", "aten::native_layer_norm"))


def profile_call(torch, fn, cuda: bool) -> tuple[list[str], list[str], float | None]:
    """(host op names, GPU kernel names, summed GPU kernel ms) of one call; names repeat as often as they ran.

    The kernel list is empty and the time None on CPU. Summed kernel time next to the timed ms tells how much of
    a call the GPU was busy: the rest is launch and host overhead."""
    import warnings

    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Profiler clears events at the end of each cycle"
        with profile(activities=activities) as prof:
            fn()
            if cuda:
                torch.cuda.synchronize()
        events = list(prof.events())
    ops, kernels, kernel_us = [], [], 0.0
    for evt in events:
        if cuda and evt.device_type == DeviceType.CUDA:
            if getattr(evt, "is_user_annotation", False) or evt.name.startswith("Optimizer."):
                continue  # a record_function range drawn on the GPU timeline (e.g. Optimizer.step#Adam.step)
            kernels.append(evt.name)
            kernel_us += evt.time_range.elapsed_us()
        else:
            ops.append(evt.name)
    if cuda and not kernels:  # older profilers hang device activity on the host events instead
        for evt in events:
            for k in getattr(evt, "kernels", None) or ():
                kernels.append(k.name)
                kernel_us += getattr(k, "duration", 0) or 0
    return ops, kernels, (kernel_us / 1e3 if cuda else None)


NOISE = ("void ", "(anonymous namespace)::", "at::native::", "std::")


def _short(name: str) -> str:
    """A kernel name made readable: namespaces and 'void ' dropped, cut at NAME_CHARS."""
    for noise in NOISE:
        name = name.replace(noise, "")
    return name if len(name) <= NAME_CHARS else name[:NAME_CHARS - 1] + "…"


def is_key_kernel(name: str) -> bool:
    return any(k in name for k in ("AdamFunctor", "AdamCapturable", "FusedAdamMathFunctor", "LayerNorm",
                                   "layer_norm", "triton_"))


def _key_names(ops: list[str], kernels: list[str], cuda: bool) -> tuple[str, ...]:
    """A few distinct names: those that tell implementations apart first, then the most run. Kernels on CUDA,
    host ops on CPU."""
    if cuda:
        counts = Counter(kernels)
        ranked = sorted(counts, key=lambda n: (not is_key_kernel(n), -counts[n]))
        return tuple(_short(n) for n in ranked[:4])
    keys = [n for n in dict.fromkeys(ops) if is_key_op(n)]
    if not keys:
        keys = [n for n, _ in Counter(o for o in ops if o.startswith("aten::")).most_common(4)]
    return tuple(keys[:4])


def _has(names, test) -> bool:
    return any(test(n) for n in names)


def proof_of(name: str, ops: list[str], kernels: list[str], cuda: bool) -> tuple[str, str | None]:
    """('verified' | 'fallback', what the trace lacked or showed) for a row's claimed implementation."""
    foreach = _has(ops, lambda n: n.startswith("aten::_foreach_"))
    fused = _has(ops, lambda n: n.startswith("aten::_fused_adam"))
    native_ln = _has(ops, lambda n: n.startswith("aten::native_layer_norm"))
    if name == "adam-forloop":
        ok, lack = not (foreach or fused), "trace shows aten::_foreach_* or aten::_fused_adam_"
    elif name == "adam-foreach":
        ok, lack = foreach and not fused, "no aten::_foreach_* op in the trace"
    elif name == "adam-fused":
        ok, lack = fused, "no aten::_fused_adam_ op in the trace"
    elif name == "apex-fusedadam":
        ok = _has(kernels, is_apex_adam_kernel) and not (foreach or fused)
        lack = "no multi_tensor_apply_kernel<…AdamFunctor…> kernel in the trace (or PyTorch Adam ops in it)"
    elif name == "apex-fusedadam-capturable":
        ok = _has(kernels, lambda n: "AdamCapturable" in n) and not (foreach or fused)
        lack = "no multi_tensor_apply_kernel<…AdamCapturableFunctor…> kernel in the trace (or PyTorch Adam ops)"
    elif name == "layernorm":
        ok, lack = native_ln, "no aten::native_layer_norm op in the trace"
    elif name == "apex-fusedln":
        ok = _has(kernels, is_apex_ln_kernel) and not native_ln
        lack = "no cuApplyLayerNorm/cuComputeGradInput kernel in the trace, or aten::native_layer_norm in it"
    elif name == "layernorm-compiled":
        ok = not native_ln and (not cuda or _has(kernels, lambda n: "triton" in n))
        lack = "aten::native_layer_norm in the trace, or no Triton kernel"
    else:
        return "fallback", f"unknown row {name}"
    return ("verified", None) if ok else ("fallback", "fell back: " + lack)


def apex_reason(device: str, ext: str, what: str, probe_apex_ok: bool | None, probe) -> str | None:
    """Why an Apex row cannot run here, or None. Never lets a PyTorch fallback run under an Apex name."""
    if device != "cuda":
        return (f"{what} runs CUDA kernels only ({ext}); no CPU path" if ext == "amp_C" else
                f"{what} falls back to F.layer_norm on CPU; the row would time PyTorch, so it is not run")
    if probe is not None:  # the probe is the one judge of Apex health (a Probe, or its dict)
        try:
            if isinstance(probe, dict):
                from bench_core.machine.probe import Probe
                probe = Probe.from_dict(probe)
            reason = probe.apex_reason(ext)
        except Exception as exc:
            reason = f"the probe could not judge Apex: {type(exc).__name__}: {exc}"
        if reason:
            return reason
    if probe_apex_ok is False:
        return "the probe found Apex's CUDA extensions not usable on this machine"
    if importlib.util.find_spec("apex") is None:
        return "NVIDIA apex is not installed"
    if importlib.util.find_spec(ext) is None:
        return f"apex {ext} extension not built ({what} needs --cuda_ext)"
    return None


def measure_row(torch, view: str, name: str, title: str, dtype: str, fn, nbytes: int, cuda: bool, warmup: int,
                repeats: int, copy_gbps: float | None) -> tuple[ComponentRow, list[str]]:
    """Time and profile one row. Returns the row and its GPU kernel names (with repeats) for comparisons."""
    try:
        times = time_calls(torch, fn, cuda, warmup, repeats)
        ops, kernels, kernel_ms = profile_call(torch, fn, cuda)
    except Exception as exc:
        return ComponentRow(view, name, dtype, "failed", reason=f"{type(exc).__name__}: {exc}"[:500],
                            bytes_moved=nbytes, title=title), []
    median = statistics.median(times)
    rate = gbps(nbytes, median)
    proof, note = proof_of(name, ops, kernels, cuda)
    return ComponentRow(
        view, name, dtype, "ok", reason=note, median_ms=median, p10_ms=quantile(times, 0.1),
        p90_ms=quantile(times, 0.9), bytes_moved=nbytes, gb_per_s=rate,
        copy_fraction=(rate / copy_gbps) if (rate and copy_gbps) else None,
        kernels_per_call=len(kernels) if cuda else None, kernel_ms=kernel_ms,
        kernel_names=_key_names(ops, kernels, cuda), proof=proof, title=title), kernels


def _build_optimizer(torch, name: str, params, cuda: bool):
    if name == "adam-forloop":
        return torch.optim.Adam(params, lr=LR, foreach=False, fused=False)
    if name == "adam-foreach":
        return torch.optim.Adam(params, lr=LR, foreach=True)
    if name == "adam-fused":
        return torch.optim.Adam(params, lr=LR, fused=True)
    from apex.optimizers import FusedAdam
    return FusedAdam(params, lr=LR, adam_w_mode=False, capturable=name.endswith("capturable"))


def optimizer_rows(torch, cfg: BenchConfig, device: str, warmup: int, repeats: int, probe_apex_ok, probe,
                   copy_gbps) -> list[ComponentRow]:
    cuda = device == "cuda"
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    params = []
    for shape in gpt_param_shapes(cfg):
        p = torch.nn.Parameter(torch.randn(shape, device=device, generator=gen) * 0.02)
        p.grad = torch.randn(shape, device=device, generator=gen) * 1e-2  # random, never zeros
        params.append(p)
    nbytes = adam_bytes(sum(p.numel() for p in params))
    rows = []
    for name, title in OPTIMIZERS:
        if name.startswith("apex"):
            reason = apex_reason(device, "amp_C", "Apex FusedAdam", probe_apex_ok, probe)
            if reason:
                rows.append(ComponentRow("optimizer", name, "fp32", "unavailable", reason=reason, title=title))
                continue
        try:
            opt = _build_optimizer(torch, name, params, cuda)
            if name == "adam-fused":
                opt.step()  # torch raises here, not in the constructor, where fused is not supported
        except Exception as exc:
            what = (f"torch.optim.Adam(fused=True) is not supported on {device} in torch {torch.__version__}"
                    if name == "adam-fused" else f"{title} could not be built")
            rows.append(ComponentRow("optimizer", name, "fp32", "unavailable", title=title,
                                     reason=f"{what}: {type(exc).__name__}: {exc}"[:500]))
            continue
        row, _ = measure_row(torch, "optimizer", name, title, "fp32", opt.step, nbytes, cuda, warmup, repeats,
                             copy_gbps)
        rows.append(row)
        del opt
        gc.collect()
    del params
    gc.collect()
    return rows


def _norm_module(torch, name: str, width: int, device: str):
    if name == "apex-fusedln":
        from apex.normalization import FusedLayerNorm
        module = FusedLayerNorm(width)
    else:
        module = torch.nn.LayerNorm(width)
    module = module.to(device)
    with torch.no_grad():
        module.weight.copy_(1 + 0.1 * torch.randn(width))
        module.bias.copy_(0.1 * torch.randn(width))
    return torch.compile(module, dynamic=False) if name == "layernorm-compiled" else module


def layernorm_rows(torch, cfg: BenchConfig, device: str, warmup: int, repeats: int, probe_apex_ok, probe,
                   copy_gbps) -> list[ComponentRow]:
    cuda = device == "cuda"
    rows_n, width = layernorm_shape(cfg)
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    x = torch.randn(rows_n, width, device=device, generator=gen).requires_grad_()
    dy = {torch.float32: torch.randn(rows_n, width, device=device, generator=gen)}
    dy[torch.bfloat16] = dy[torch.float32].to(torch.bfloat16)
    out: list[ComponentRow] = []
    traces: dict[tuple[str, str], list[str]] = {}
    for name, title in NORMS:
        reason = None
        if name == "apex-fusedln":
            reason = apex_reason(device, "fused_layer_norm_cuda", "Apex FusedLayerNorm", probe_apex_ok, probe)
        elif name == "layernorm-compiled" and not cuda:
            reason = COMPILE_CPU_REASON
        if reason:
            out += [ComponentRow("layernorm", name, d, "unavailable", reason=reason, title=title) for d in
                    ("fp32", "bf16-autocast")]
            continue
        try:
            module = _norm_module(torch, name, width, device)
        except Exception as exc:
            out += [ComponentRow("layernorm", name, d, "unavailable", title=title,
                                 reason=f"{title} could not be built: {type(exc).__name__}: {exc}"[:500])
                    for d in ("fp32", "bf16-autocast")]
            continue
        for dtype in ("fp32", "bf16-autocast"):
            auto = dtype == "bf16-autocast"

            def step(module=module, auto=auto):
                x.grad = None
                for p in module.parameters():
                    p.grad = None
                with torch.autocast(device, dtype=torch.bfloat16) if auto else contextlib.nullcontext():
                    y = module(x)
                y.backward(dy[y.dtype])
                return y

            try:  # the first call compiles (torch.compile) and tells which dtype the LayerNorm writes
                t0 = time.perf_counter()
                io_bytes = step().element_size()
                first_s = time.perf_counter() - t0
            except Exception as exc:
                out.append(ComponentRow("layernorm", name, dtype, "failed", title=title,
                                        reason=f"{type(exc).__name__}: {exc}"[:500]))
                continue
            nbytes = layernorm_bytes(rows_n, width, dtype_bytes=io_bytes)
            row, kernels = measure_row(torch, "layernorm", name, title, dtype, step, nbytes, cuda, warmup,
                                       repeats, copy_gbps)
            if name == "layernorm-compiled" and row.status == "ok":
                note = f"first call (compile) took {first_s:.1f} s, not timed"
                row = _with(row, reason=f"{row.reason}; {note}" if row.reason else note)
            traces[(name, dtype)] = kernels
            out.append(row)
    apex16, apex32 = traces.get(("apex-fusedln", "bf16-autocast")), traces.get(("apex-fusedln", "fp32"))
    if cuda and apex16 and apex32:
        added = Counter(apex16) - Counter(apex32)
        extra = tuple(f"{_short(n)} x{c}" for n, c in added.most_common()
                      if not any(k in n for k in APEX_LN_KERNELS))
        out = [_with(r, extra_kernels=extra) if (r.name, r.dtype) == ("apex-fusedln", "bf16-autocast") else r
               for r in out]
    return out


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


def notes(cfg: BenchConfig, n_params: int, rows_n: int, width: int, warmup: int, repeats: int, cuda: bool,
          ceilings: dict | None) -> tuple[str, ...]:
    timer = "CUDA events around each call" if cuda else "time.perf_counter around each call"
    out = [f"optimizer: one step over {len(gpt_param_shapes(cfg))} fp32 tensors, {n_params:,} parameters, random "
           f"grads; {adam_bytes_per_param()} bytes per parameter moved (param read+write 8, grad read 4, exp_avg "
           f"read+write 8, exp_avg_sq read+write 8) = {adam_bytes(n_params):,} bytes per step",
           f"layernorm: forward + backward at {rows_n}x{width}; bytes = 5*R*W*e + 4*R*4 + 5*W*4 (x, y, dy, x again, "
           "dx at e bytes: the dtype the LayerNorm reads and writes, fp32 for torch even under autocast, bf16 for "
           "Apex under autocast; mean/rstd fp32; gamma/beta read and their grads written in fp32); casts not counted",
           f"timing: {warmup} warm-up calls, then {repeats} timed calls, {timer}; median, p10, p90. Kernel count and "
           "proof: one more call under torch.profiler"]
    if ceilings:
        out.append("copy fraction = GB/s / measured device-to-device copy GB/s (read + written). Ceilings: "
                   + str(ceilings.get("method")))
    return tuple(out)


def run(cfg: BenchConfig, device: str, probe_apex_ok: bool | None = None, repeats: int = 30, *, warmup: int = 5,
        model: str = "custom", ceilings: dict | None = None, refresh_ceilings: bool = False,
        probe: dict | None = None) -> ComponentsReport:
    import torch
    if device not in ("cpu", "cuda"):
        raise ConfigError("device", device, "must be cpu or cuda")
    cuda = device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise ConfigError("device", "cuda", "no CUDA device is available on this machine")
    if repeats < 1:
        raise ConfigError("repeats", repeats, "must be a positive integer")
    if cuda and ceilings is None:
        from bench_core.machine.ceilings import cached_or_measure
        measured = cached_or_measure(torch, refresh=refresh_ceilings)
        ceilings = measured.to_dict() if measured else None
    copy = (ceilings or {}).get("copy_gbps") if cuda else None
    torch.manual_seed(cfg.seed)
    rows = optimizer_rows(torch, cfg, device, warmup, repeats, probe_apex_ok, probe, copy)
    rows += layernorm_rows(torch, cfg, device, warmup, repeats, probe_apex_ok, probe, copy)
    rows_n, width = layernorm_shape(cfg)
    n_params = param_count(cfg)
    return ComponentsReport(
        model=model, device=device, config=cfg.to_dict(), rows=tuple(rows), ceilings=ceilings if cuda else None,
        params=n_params, rows_x_width=(rows_n, width), env=_env(torch, device),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        notes=notes(cfg, n_params, rows_n, width, warmup, repeats, cuda, ceilings if cuda else None))
