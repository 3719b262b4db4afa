"""The components view: the optimizer step alone and LayerNorm forward + backward alone, at the model's real shapes.

``python -m bench_core.components --model gpt2-small --device auto|cpu|cuda [--json] [--out FILE.csv]``

This module holds the counting (parameter shapes, bytes moved), the result types and the command line; it imports no
torch. The measurement itself is in ``components_bench`` (imported by ``run``).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from .breakdown import BUSY_THRESHOLD
from .config import WORKLOADS, BenchConfig, ConfigError, defaults_for, exit_code_of

# The rows measure GPT's parts (torch and Apex LayerNorm, Adam over GPT's parameter shapes): GPT sizes only.
GPT_WORKLOADS = {name: shape for name, shape in WORKLOADS.items() if shape.get("family", "gpt") == "gpt"}

VIEWS = ("optimizer", "layernorm")
DTYPES = ("fp32", "bf16-autocast")
STATUSES = ("ok", "unavailable", "failed")
DEFAULT_REPEATS = 30
DEFAULT_WARMUP = 5


# ---------------------------------------------------------------- counting (torch-free, tested by hand)
def gpt_param_shapes(cfg: BenchConfig) -> list[tuple[int, ...]]:
    """The shapes of ``bench_core.model.GPT(cfg).parameters()``, in that order.

    The LM head is tied to the token embedding, so its weight is not listed twice (as ``parameters()`` does)."""
    d, v, t = cfg.width, cfg.vocab_size, cfg.seq_len
    block = [(d,), (d,),                       # ln1 weight, bias
             (3 * d, d), (3 * d,),             # attn.qkv
             (d, d), (d,),                     # attn.proj
             (d,), (d,),                       # ln2
             (4 * d, d), (4 * d,),             # mlp.fc
             (d, 4 * d), (d,)]                 # mlp.proj
    return [(v, d), (t, d)] + block * cfg.depth + [(d,), (d,)]


def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def adam_bytes_per_param(dtype_bytes: int = 4, state_bytes: int | None = None) -> int:
    """Bytes one Adam step must move per parameter, each tensor touched once (the ideal a fused kernel reaches).

    param: read + write (2 x dtype_bytes); grad: read (dtype_bytes); exp_avg: read + write (2 x state_bytes);
    exp_avg_sq: read + write (2 x state_bytes). fp32 everywhere: 8 + 4 + 8 + 8 = 28 bytes. ``state_bytes``
    defaults to ``dtype_bytes`` (torch keeps the moments in the parameter's dtype; Apex keeps them in fp32)."""
    state = dtype_bytes if state_bytes is None else state_bytes
    return 3 * dtype_bytes + 4 * state


def adam_bytes(n_params: int, dtype_bytes: int = 4, state_bytes: int | None = None) -> int:
    return n_params * adam_bytes_per_param(dtype_bytes, state_bytes)


def layernorm_bytes(rows: int, width: int, dtype_bytes: int = 4, stat_bytes: int = 4, param_bytes: int = 4) -> int:
    """Bytes LayerNorm forward + backward must move over a (rows x width) input, each tensor touched once.

    forward:  read x (R·W·e), read gamma and beta (2·W·p), write y (R·W·e), write mean and rstd (2·R·s);
    backward: read dy, x (2·R·W·e), read mean and rstd (2·R·s), read gamma (W·p), write dx (R·W·e),
              write dgamma and dbeta (2·W·p).
    Total: 5·R·W·e + 4·R·s + 5·W·p, with e = dtype_bytes (the dtype the LayerNorm reads and writes), s = stat_bytes
    (mean/rstd, fp32) and p = param_bytes (gamma/beta and their grads, fp32). Not counted: the partial sums a
    backward kernel may write and re-read for dgamma/dbeta, and any casts around the call."""
    r, w = rows, width
    return 5 * r * w * dtype_bytes + 4 * r * stat_bytes + 5 * w * param_bytes


def layernorm_shape(cfg: BenchConfig) -> tuple[int, int]:
    """(rows, width) of one LayerNorm call in the model: every token of a step, at the model's width."""
    return cfg.batch_size * cfg.seq_len, cfg.width


def gbps(nbytes: int, ms: float | None) -> float | None:
    return None if not ms or ms <= 0 else nbytes / (ms / 1e3) / 1e9


# ---------------------------------------------------------------- results
@dataclass(frozen=True)
class ComponentRow:
    view: str                                  # "optimizer" | "layernorm"
    name: str                                  # e.g. "adam-foreach", "apex-fusedln"
    dtype: str                                 # "fp32" | "bf16-autocast"
    status: str                                # "ok" | "unavailable" | "failed"
    reason: str | None = None                  # why unavailable / failed; a note (e.g. a fallback) when ok
    median_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    bytes_moved: int | None = None             # per call, counted as in adam_bytes / layernorm_bytes
    gb_per_s: float | None = None              # bytes_moved / median
    copy_fraction: float | None = None         # gb_per_s / measured copy ceiling; None without one
    kernels_per_call: int | None = None        # GPU kernels (and memcpy/memset) in one profiled call; None on CPU
    kernel_ms: float | None = None             # their summed GPU time in that call (busy time); None on CPU
    kernel_names: tuple[str, ...] = ()         # a few distinct names: GPU kernels on CUDA, aten ops on CPU
    proof: str | None = None                   # "verified" | "fallback" | None (not checked)
    extra_kernels: tuple[str, ...] = ()        # Apex LN under autocast: kernels its wrapper adds ("name x count")
    title: str = ""                            # human name, e.g. "Apex FusedAdam (capturable)"

    @property
    def gpu_busy(self) -> float | None:
        """Kernel time over the call's wall time: below BUSY_THRESHOLD the host's launches set the pace."""
        if self.kernel_ms is None or not self.median_ms:
            return None
        return min(1.0, self.kernel_ms / self.median_ms)

    @property
    def kernel_gb_per_s(self) -> float | None:
        """bytes_moved over the kernels' own time: what the GPU achieves once the host's launch cost is left out."""
        return None if self.bytes_moved is None else gbps(self.bytes_moved, self.kernel_ms)

    @property
    def bound(self) -> str | None:
        """"gpu-bound" or "host-bound" (as for stages); None on CPU. A host-bound row's wall time follows the host
        CPU and moves between runs; its kernel_ms is the stable figure."""
        busy = self.gpu_busy
        return None if busy is None else ("gpu-bound" if busy >= BUSY_THRESHOLD else "host-bound")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ComponentRow:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in known}
        for key in ("kernel_names", "extra_kernels"):
            kw[key] = tuple(kw.get(key) or ())
        return cls(**kw)


@dataclass(frozen=True)
class ComponentsReport:
    model: str
    device: str
    config: dict
    rows: tuple[ComponentRow, ...]
    ceilings: dict | None
    params: int
    rows_x_width: tuple[int, int]
    env: dict
    created_at: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["rows"] = [r.to_dict() for r in self.rows]
        data["rows_x_width"] = list(self.rows_x_width)
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> ComponentsReport:
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in known}
        kw["rows"] = tuple(ComponentRow.from_dict(r) for r in data.get("rows") or ())
        kw["rows_x_width"] = tuple(data.get("rows_x_width") or (0, 0))
        kw["notes"] = tuple(data.get("notes") or ())
        return cls(**kw)

    def row(self, view: str, name: str, dtype: str = "fp32") -> ComponentRow | None:
        return next((r for r in self.rows if (r.view, r.name, r.dtype) == (view, name, dtype)), None)

    def to_csv_rows(self) -> list[dict[str, Any]]:
        """One flat dict per row (tuples joined with ' | '), with the model, device and ceilings alongside."""
        ceil = self.ceilings or {}
        out = []
        for r in self.rows:
            d = r.to_dict()
            d["kernel_names"] = " | ".join(r.kernel_names)
            d["extra_kernels"] = " | ".join(r.extra_kernels)
            d["gpu_busy"], d["bound"], d["kernel_gb_per_s"] = r.gpu_busy, r.bound, r.kernel_gb_per_s
            out.append({"model": self.model, "device": self.device, "params": self.params,
                        "rows": self.rows_x_width[0], "width": self.rows_x_width[1], **d,
                        "copy_ceiling_gbps": ceil.get("copy_gbps"), "created_at": self.created_at})
        return out


def run(cfg: BenchConfig, device: str, probe_apex_ok: bool | None = None, repeats: int = DEFAULT_REPEATS, *,
        warmup: int = DEFAULT_WARMUP, model: str = "custom", ceilings: dict | None = None,
        refresh_ceilings: bool = False, probe: Any = None) -> ComponentsReport:
    """Measure every row on ``device`` ("cpu" | "cuda"). See components_bench.run for the details."""
    from .components_bench import run as _run
    return _run(cfg, device, probe_apex_ok, repeats, warmup=warmup, model=model, ceilings=ceilings,
                refresh_ceilings=refresh_ceilings, probe=probe)


# ---------------------------------------------------------------- command line
class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, like the rest of the engine's bad-input answers
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m bench_core.components",
                description="Optimizer step and LayerNorm fwd+bwd alone, at a GPT model's real shapes")
    p.add_argument("--model", default=None, help=f"one of {', '.join(GPT_WORKLOADS)} (default: tiny on CPU, "
                   "gpt2-small on CUDA)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--repeats", default=str(DEFAULT_REPEATS), help="timed calls per row (median, p10, p90)")
    p.add_argument("--warmup", default=str(DEFAULT_WARMUP), help="untimed calls per row first")
    p.add_argument("--measure-again", action="store_true", help="measure the GPU ceilings again, not from cache")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--out", default=None, help="also write the rows as CSV to this file")
    p.add_argument("--db", default=None, help="history database (default: the dashboard's, $BENCH_DB)")
    p.add_argument("--no-db", action="store_true", help="do not save the report to the history")
    return p


def _count(name: str, raw: str, low: int, high: int) -> int:
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ConfigError(name, raw, "must be an integer") from None
    if not low <= value <= high:
        raise ConfigError(name, value, f"must be between {low} and {high}")
    return value


def _cuda_available() -> bool:
    import torch
    return torch.cuda.is_available()


def resolve(args) -> tuple[str, BenchConfig, str, int, int]:
    """(model name, config, device, repeats, warmup) from parsed arguments; ConfigError on bad input."""
    if args.device not in ("auto", "cpu", "cuda"):
        raise ConfigError("device", args.device, "must be one of auto, cpu, cuda")
    if args.model is not None and args.model not in GPT_WORKLOADS:
        raise ConfigError("model", args.model, f"the components view measures GPT models; choose one of "
                          f"{', '.join(GPT_WORKLOADS)}")
    repeats = _count("repeats", args.repeats, 1, 100_000)
    warmup = _count("warmup", args.warmup, 0, 10_000)
    if args.out:
        folder = os.path.dirname(os.path.abspath(args.out))
        if not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
            raise ConfigError("out", args.out, f"folder {folder} does not exist or is not writable")
    cuda = args.device != "cpu" and _cuda_available()
    if args.device == "cuda" and not cuda:
        raise ConfigError("device", "cuda", "no CUDA device is available on this machine")
    device = "cuda" if cuda else "cpu"
    name = args.model or ("gpt2-small" if device == "cuda" else "tiny")
    cfg = replace(defaults_for(device), **WORKLOADS[name], device=device)  # type: ignore[arg-type]
    return name, cfg, device, repeats, warmup


def _fmt(value, spec: str, none: str = "-") -> str:
    return none if value is None else format(value, spec)


def format_table(report: ComponentsReport) -> str:
    ceil = report.ceilings
    rows, width = report.rows_x_width
    lines = [f"components: {report.model} on {report.device} ({report.env.get('device_name', '?')}), "
             f"{report.params:,} parameters, LayerNorm {rows}x{width}"]
    if ceil:
        lines.append(f"ceilings ({'cached' if ceil.get('from_cache') else 'measured'} {ceil.get('measured_at')}): "
                     f"bf16 GEMM {ceil['bf16_tflops']:.0f} TFLOP/s, fp32 GEMM (TF32 off) {ceil['fp32_tflops']:.1f} "
                     f"TFLOP/s, copy {ceil['copy_gbps']:,.0f} GB/s")
    head = f"{'view':<10} {'row':<28} {'dtype':<13} {'status':<11} {'median ms':>10} {'p10-p90 ms':>17} " \
           f"{'GB/s':>9} {'of copy':>8} {'kernels':>8} {'kernel ms':>10} {'bound':>10}  proof"
    lines += ["", head, "-" * len(head)]
    for r in report.rows:
        spread = "-" if r.p10_ms is None else f"{r.p10_ms:.3f}-{r.p90_ms:.3f}"
        lines.append(f"{r.view:<10} {r.name:<28} {r.dtype:<13} {r.status:<11} {_fmt(r.median_ms, '.3f'):>10} "
                     f"{spread:>17} {_fmt(r.gb_per_s, ',.1f'):>9} {_fmt(r.copy_fraction, '.0%'):>8} "
                     f"{_fmt(r.kernels_per_call, 'd'):>8} {_fmt(r.kernel_ms, '.3f'):>10} {r.bound or '-':>10}  "
                     f"{r.proof or '-'}")
    lines.append("")
    for r in report.rows:
        if r.reason:
            lines.append(f"  {r.name} [{r.dtype}]: {r.reason}")
        if r.extra_kernels:
            lines.append(f"  {r.name} [{r.dtype}] adds: {'; '.join(r.extra_kernels)}")
    lines += [f"  note: {n}" for n in report.notes]
    return "\n".join(lines)


def write_csv_text(report: ComponentsReport) -> str:
    import io

    from .formats import neutralise
    rows = report.to_csv_rows()
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["model"], lineterminator="\n")
    writer.writeheader()
    writer.writerows([{k: neutralise(v) for k, v in row.items()} for row in rows])
    return buf.getvalue()


def write_csv(report: ComponentsReport, path: str) -> None:
    with open(path, "w", newline="") as fh:
        fh.write(write_csv_text(report))


def main(argv: list[str] | None = None) -> int:
    return exit_code_of(lambda: command(parser().parse_args(argv)))


def command(args: argparse.Namespace) -> int:
    name, cfg, device, repeats, warmup = resolve(args)
    report = run(cfg, device, None, repeats, warmup=warmup, model=name, refresh_ceilings=args.measure_again)
    if args.out:
        write_csv(report, args.out)
    if not args.no_db:
        from .store import Store
        store = Store(args.db)
        print(f"saved to the history: {store.path} (report {store.save_components(report.to_dict())})",
              file=sys.stderr)
    print(json.dumps(report.to_dict(), indent=1) if args.json else format_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
