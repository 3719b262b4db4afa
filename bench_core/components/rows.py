"""The rows of a components run and the report that holds them: the counting (parameter shapes, bytes moved), the
result types, their shown columns (one registry: the page's table), the terminal's table and the CSV. A data model:
it renders no HTML.

Imports no torch. The measurement is in ``components.bench``; the command line in ``components.cli``.
"""
from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from bench_core.config.bench_config import BenchConfig
from bench_core.levers import kernels as kk
from bench_core.measure import breakdown, stats
from bench_core.models.families import NormType
from bench_core.results.columns import DISPLAY_COLUMNS, NA

VIEWS = ("optimizer", "norm")
DTYPES = ("fp32", "bf16-autocast")
STATUSES = ("ok", "unavailable", "failed")
DEFAULT_REPEATS = 30
DEFAULT_WARMUP = 5
DTYPE_TITLES = {"fp32": "FP32", "bf16-autocast": "BF16 autocast"}


class OptimizerPath(StrEnum):
    """How an optimizer row's step ran, read from the ops and kernels of its profiled call."""
    FOR_LOOP = "for-loop"     # a few ops per tensor, tensor after tensor
    FOREACH = "foreach"       # multi-tensor ops, each over every tensor at once
    FUSED = "fused"           # one fused kernel does the whole update


# ---------------------------------------------------------------- counting (torch-free, tested by hand)
def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def optimizer_step_bytes(numels: Iterable[int], moment_bytes: Callable[[int], int], dtype_bytes: int = 4) -> int:
    """Bytes one Adam-type step moves over tensors of these sizes: param read + write and grad read at dtype_bytes,
    each of the two moments read + written at the lever's own size (moment_bytes of the tensor's element count)."""
    return sum(3 * dtype_bytes * n + 4 * moment_bytes(n) for n in numels)


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


def rmsnorm_bytes(rows: int, width: int, dtype_bytes: int = 4, stat_bytes: int = 4, param_bytes: int = 4) -> int:
    """Bytes RMSNorm forward + backward must move over a (rows x width) input, each tensor touched once.

    forward:  read x (R·W·e), read gamma (W·p), write y (R·W·e), write rstd (R·s);
    backward: read dy, x (2·R·W·e), read rstd (R·s), read gamma (W·p), write dx (R·W·e), write dgamma (W·p).
    Total: 5·R·W·e + 2·R·s + 3·W·p (LayerNorm's count without the mean and beta)."""
    r, w = rows, width
    return 5 * r * w * dtype_bytes + 2 * r * stat_bytes + 3 * w * param_bytes


def norm_bytes(rows: int, width: int, dtype_bytes: int, norm: NormType, stat_bytes: int = 4,
               param_bytes: int = 4) -> int:
    """The architecture's norm type (LayerNorm for gpt and GPT-2, RMSNorm for llama and most others)."""
    count = rmsnorm_bytes if norm is NormType.RMSNORM else layernorm_bytes
    return count(rows, width, dtype_bytes=dtype_bytes, stat_bytes=stat_bytes, param_bytes=param_bytes)


def norm_shape(cfg: BenchConfig) -> tuple[int, int]:
    """(rows, width) of one norm call in the model: every token of a step, at the model's width."""
    return cfg.batch_size * cfg.seq_len, cfg.width


def gbps(nbytes: int, ms: float | None) -> float | None:
    return None if not ms or ms <= 0 else nbytes / (ms / 1e3) / 1e9


# ---------------------------------------------------------------- results
@dataclass(frozen=True)
class ComponentRow:
    view: str                                  # "optimizer" | "norm"
    name: str                                  # a registry lever's name (e.g. "adam", "apex-fusedln"), or
                                               # "<native norm>-compiled"
    dtype: str                                 # "fp32" | "bf16-autocast"
    status: str                                # "ok" | "unavailable" | "failed"
    reason: str | None = None                  # why unavailable / failed; a note (e.g. a fallback) when ok
    median_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    bytes_moved: int | None = None             # per call, counted as in optimizer_step_bytes / layernorm_bytes
    gb_per_s: float | None = None              # bytes_moved / median
    copy_fraction: float | None = None         # gb_per_s / measured copy ceiling; None without one
    kernels_per_call: int | None = None        # GPU kernels (and memcpy/memset) in one profiled call; None on CPU
    kernel_ms: float | None = None             # their summed GPU time in that call (busy time); None on CPU
    kernel_names: tuple[str, ...] = ()         # a few distinct names: GPU kernels on CUDA, aten ops on CPU
    proof: str | None = None                   # "verified" | "fallback" | None (not checked)
    extra_kernels: tuple[str, ...] = ()        # Apex LN under autocast: kernels its wrapper adds ("name x count")
    title: str = ""                            # human name, e.g. "Apex FusedAdam (capturable)"

    def _bottleneck(self) -> breakdown.Bottleneck:
        """The stages' rule (measure.breakdown.bottleneck), over this call's kernels and its median wall time."""
        profile = None if self.kernel_ms is None else breakdown.StageProfile("cuda", 1, self.kernel_ms, None, None)
        return breakdown.bottleneck(profile, self.median_ms)

    @property
    def kernel_share(self) -> float | None:
        """Kernel time over the call's wall time, as a stage's kernel share."""
        return self._bottleneck().busy

    @property
    def bound_text(self) -> str | None:
        """The verdict with its deciding figure, worded as a stage's (Bottleneck.cell_text)."""
        return self._bottleneck().cell_text

    @property
    def noise_reason(self) -> str | None:
        """The Benchmark page's noise rule (stats.spread_reason, the part one series of calls can break): None for
        a steady row or one that did not run."""
        return stats.spread_reason(self.median_ms, self.p10_ms, self.p90_ms) if self.status == "ok" else None

    @property
    def noisy(self) -> bool | None:
        """As a stage's: None where the row has no timings."""
        return None if self.status != "ok" or self.median_ms is None else self.noise_reason is not None

    @property
    def kernel_gb_per_s(self) -> float | None:
        """bytes_moved over the kernels' own time: what the GPU achieves once the host's launch cost is left out."""
        return None if self.bytes_moved is None else gbps(self.bytes_moved, self.kernel_ms)

    @property
    def bound(self) -> str | None:
        """"gpu-bound" or "launch-bound", by the stages' rule; None on CPU. A launch-bound row's wall time follows
        the host CPU and moves between runs; its kernel_ms is the stable figure."""
        verdict = self._bottleneck().verdict
        return None if verdict == "unknown" else verdict

    @property
    def runs_as(self) -> OptimizerPath | None:
        """An optimizer row's path as its trace shows it (torch's default Adam is foreach on a GPU, a for-loop on a
        CPU); None for a norm row or one that did not run."""
        if self.view != "optimizer" or self.status != "ok":
            return None
        if any(kk.ATEN_FUSED_ADAM.match(n) or kk.APEX_ADAM.match(n) for n in self.kernel_names):
            return OptimizerPath.FUSED
        if any(kk.ATEN_FOREACH.match(n) for n in self.kernel_names):
            return OptimizerPath.FOREACH
        return OptimizerPath.FOR_LOOP

    @property
    def label(self) -> str:
        """The row in a few words: its title, how it ran where the title does not say, its precision."""
        path = self.runs_as
        ran = f" · {path}" if path and path.value not in self.title.lower() else ""
        return f"{self.title or self.name}{ran} · {DTYPE_TITLES.get(self.dtype, self.dtype)}"

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

    def not_run(self) -> list[str]:
        """Each row that did not run, with why: once a lever where its precisions share the reason."""
        why: dict[tuple[str, str, str], list[str]] = {}
        for r in self.rows:
            if r.status != "ok":
                why.setdefault((r.title or r.name, r.status, r.reason or "no reason recorded"), []).append(
                    DTYPE_TITLES.get(r.dtype, r.dtype))
        return [f"{title} ({', '.join(dtypes)}): {status}, {reason}" for (title, status, reason), dtypes in why.items()]

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
            d["kernel_share"], d["bound"], d["kernel_gb_per_s"] = r.kernel_share, r.bound, r.kernel_gb_per_s
            d["noisy"], d["noise_reason"] = r.noisy is True, r.noise_reason or ""
            out.append({"model": self.model, "device": self.device, "params": self.params,
                        "rows": self.rows_x_width[0], "width": self.rows_x_width[1], **d,
                        "copy_ceiling_gbps": ceil.get("copy_gbps"), "created_at": self.created_at})
        return out


# ---------------------------------------------------------------- the Components view's table
@dataclass(frozen=True)
class ComponentColumn:
    """One shown column of a components report's table, as results.columns.DisplayColumn is of a run's: header,
    cell text (None: NA), help; `on_gpu`: only where the report was measured on CUDA (kernel figures, ceilings);
    `in_terminal`: a column of the terminal's table (long notes are listed under it instead)."""
    key: str
    header: str
    text: Callable[[ComponentRow], str | None]
    help: str
    on_gpu: bool = False
    in_terminal: bool = True

    def cell(self, row: ComponentRow) -> str:
        return self.text(row) or NA


_RUN = {c.key: c for c in DISPLAY_COLUMNS}   # a figure both tables show is headed as the run's table heads it


def _unit(value: float | None, spec: str, unit: str = "") -> str | None:
    return None if value is None else format(value, spec) + unit


COMPONENT_COLUMNS: tuple[ComponentColumn, ...] = (
    ComponentColumn("component", "Component", lambda r: r.title or r.name,
                    "the registry lever measured alone (its key in the Lever column), or the native norm compiled"),
    ComponentColumn("precision", "Precision", lambda r: DTYPE_TITLES.get(r.dtype, r.dtype),
                    "FP32, or the same call under BF16 autocast"),
    ComponentColumn("status", _RUN["status"].header, lambda r: r.status,
                    "ok, or unavailable / failed (why: in Notes, and listed under the table)"),
    ComponentColumn("runs_as", "Runs as", lambda r: r.runs_as,
                    "how an optimizer row's step ran, read from the ops of its profiled call: for-loop (ops per "
                    "tensor), foreach (multi-tensor ops over every tensor at once), fused (one fused kernel)"),
    ComponentColumn("median", _RUN["median_ms"].header, lambda r: _unit(r.median_ms, ",.3f", " ms"),
                    "median time of one call over the timed calls"),
    ComponentColumn("spread", _RUN["spread"].header,
                    lambda r: None if r.p10_ms is None or r.p90_ms is None else f"{r.p10_ms:,.3f}–{r.p90_ms:,.3f} ms",
                    _RUN["spread"].help.replace("step time", "call's time")),
    ComponentColumn("noise", _RUN["noise"].header,
                    lambda r: None if r.noisy is None else "noisy" if r.noisy else "steady",
                    f"noisy: the call's p10–p90 spread is over {stats.NOISE_SPREAD:.0%} of its median, the Benchmark "
                    "page's rule; its median and bandwidth are not a steady figure (the spread: in Notes)"),
    ComponentColumn("bandwidth", "Bandwidth", lambda r: _unit(r.gb_per_s, ",.1f", " GB/s"),
                    "the bytes the call must move (each tensor once, counted in the notes below) ÷ its median time"),
    ComponentColumn("copy_fraction", "Of copy ceiling", lambda r: _unit(r.copy_fraction, ".0%"),
                    "bandwidth ÷ this GPU's measured device-to-device copy bandwidth (none until it is measured)",
                    on_gpu=True),
    ComponentColumn("kernels", "Kernels per call", lambda r: _unit(r.kernels_per_call, ","),
                    "GPU kernels, copies and memsets in one profiled call", on_gpu=True),
    ComponentColumn("kernel_time", "Kernel time", lambda r: _unit(r.kernel_ms, ",.3f", " ms"),
                    "the kernels' summed GPU time in that call: the stable figure of a launch-bound row", on_gpu=True),
    ComponentColumn("bottleneck", _RUN["bottleneck"].header,
                    lambda r: r.bound_text,
                    "by the stages' rule: launch-bound when the kernels fill less of the call than the threshold "
                    "(shown: how long the GPU idled); its wall time then follows the host CPU", on_gpu=True),
    ComponentColumn("proof", _RUN["verdict"].header, lambda r: r.proof,
                    "verified: the profiler saw the lever's own kernels; fallback: a library's lever ran PyTorch's"),
    ComponentColumn("notes", _RUN["reason"].header,
                    lambda r: "; ".join(filter(None, (r.reason, r.noise_reason and f"noisy: {r.noise_reason}")))
                    or None,
                    "why a row did not run; a fallback or compile note of one that did", in_terminal=False),
    ComponentColumn("lever", "Lever", lambda r: r.name, "the row's key, as the CLI, the CSV and the JSON name it"),
)


def component_columns(device: str) -> tuple[ComponentColumn, ...]:
    """The columns that apply to a report measured on `device`: the GPU's figures only on CUDA."""
    return tuple(c for c in COMPONENT_COLUMNS if device == "cuda" or not c.on_gpu)


def component_cells(report: ComponentsReport) -> list[dict[str, str]]:
    """Each row's cells under their headers, as text: the Components page's table."""
    columns = component_columns(report.device)
    return [{c.header: c.cell(r) for c in columns} for r in report.rows]


def format_table(report: ComponentsReport) -> str:
    ceil = report.ceilings
    rows, width = report.rows_x_width
    lines = [f"components: {report.model} on {report.device} ({report.env.get('device_name', '?')}), "
             f"{report.params:,} parameters, norm {rows}x{width}"]
    if report.device == "cuda" and not ceil:
        lines.append("ceilings: not measured yet (no copy fraction); `python -m bench_core.machine.ceilings` "
                     "measures them")
    if ceil:
        lines.append(f"ceilings ({'cached' if ceil.get('from_cache') else 'measured'} {ceil.get('measured_at')}): "
                     f"bf16 GEMM {ceil['bf16_tflops']:.0f} TFLOP/s, fp32 GEMM (TF32 off) {ceil['fp32_tflops']:.1f} "
                     f"TFLOP/s, copy {ceil['copy_gbps']:,.0f} GB/s")
    # the page's columns, headers and cells (it printed its own: "median ms", "of copy"), each as wide as its text
    columns = [c for c in component_columns(report.device) if c.in_terminal]
    table = [[c.header for c in columns], *([c.cell(r) for c in columns] for r in report.rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    head, *body = ["  ".join(text.ljust(w) for text, w in zip(row, widths, strict=True)).rstrip() for row in table]
    lines += ["", head, "-" * len(head), *body]
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

    from bench_core.results.formats import neutralise
    rows = report.to_csv_rows()
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["model"], lineterminator="\n")
    writer.writeheader()
    writer.writerows([{k: neutralise(v) for k, v in row.items()} for row in rows])
    return buf.getvalue()


def write_csv(report: ComponentsReport, path: str) -> None:
    with open(path, "w", newline="") as fh:
        fh.write(write_csv_text(report))


REPORT_KEYS = ("model", "device", "rows", "rows_x_width", "created_at")


def is_components_json(data: bytes) -> bool:
    """A JSON object with a components report's keys (a run's JSON has none of rows_x_width)."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(doc, dict) and "rows_x_width" in doc


def parse_report(name: str, data: bytes, max_bytes: int = 5 * 2**20) -> ComponentsReport:
    """A components JSON (ComponentsReport.to_dict(), as `components --json` writes it) read back;
    ImportRejected naming what is wrong."""
    from bench_core.results.formats import ImportRejected
    if len(data) > max_bytes:
        raise ImportRejected(f"{name!r}: {len(data):,} bytes, above the {max_bytes:,}-byte limit")
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ImportRejected(f"{name!r}: not JSON ({exc})") from None
    missing = [k for k in REPORT_KEYS if not isinstance(doc, dict) or k not in doc]
    if missing:
        raise ImportRejected(f"{name!r}: not a components report: no {', '.join(missing)}")
    if not isinstance(doc["rows"], list):
        raise ImportRejected(f"{name!r}: rows must be a list")
    try:
        report = ComponentsReport.from_dict(doc)
    except (TypeError, ValueError, KeyError) as exc:
        raise ImportRejected(f"{name!r}: a row is not a components row: {exc}") from None
    for row in report.rows:
        if row.status not in STATUSES or row.dtype not in DTYPES:
            raise ImportRejected(f"{name!r}: row {row.name!r}: status must be one of {', '.join(STATUSES)} and "
                                 f"dtype one of {', '.join(DTYPES)}")
    return report
