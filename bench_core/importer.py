"""Read back CSV and JSON written by the CLI or the dashboard, refusing anything malformed whole."""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import replace

from .config import BenchConfig
from .kernels import KEY_KERNELS
from .levers import KINDS, LEVERS
from .results import CSV_COLUMNS, FINISHED, SCHEMA, FORMULA_PREFIXES, RunResult, StageResult

REQUIRED_COLUMNS = ["stage", "optimizer", "norm", "precision", "compile", "status", "reason", "median_ms",
                    "p10_ms", "p90_ms", "tokens_per_s", "speedup", "peak_mem_mib", "tflops", "mfu",
                    "loss_first", "loss_last", "kernels_seen", "device", "gpu", "torch", "apex", "depth",
                    "width", "heads", "seq_len", "batch_size", "vocab_size", "warmup", "iters"]
NUMERIC = {"scaling_efficiency", "median_ms", "p10_ms", "p90_ms", "mean_ms", "std_ms", "tokens_per_s", "speedup", "peak_mem_mib",
           "peak_reserved_mib", "tflops", "mfu", "loss_first", "loss_last", "warmup_s"}
INTEGER = {"depth", "width", "heads", "seq_len", "batch_size", "vocab_size", "warmup", "iters", "seed"}


class ImportRejected(ValueError):
    """The file is not a run this tool wrote; the message says what is wrong."""


def _text(data: bytes, max_bytes: int) -> str:
    if len(data) > max_bytes:
        raise ImportRejected(f"file is {len(data) / 2**20:.1f} MiB, above the {max_bytes / 2**20:.0f} MiB limit")
    if b"\x00" in data[:8192]:
        raise ImportRejected("file is binary, not CSV or JSON text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportRejected(f"file is not UTF-8 text (byte {exc.start})") from None


def _number(value: str, column: str, row: int, integer: bool):
    if value in ("", None):
        if integer:
            raise ImportRejected(f"row {row}, column {column}: empty, expected an integer")
        return None
    try:
        number = int(value) if integer else float(value)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise ImportRejected(f"row {row}, column {column}: {value!r} is not {kind}") from None
    if not integer and not math.isfinite(number):
        raise ImportRejected(f"row {row}, column {column}: {value!r} is not a finite number")
    return number


def _unescape(value: str, column: str, row: int) -> str:
    if value.startswith("'") and value[1:2] in FORMULA_PREFIXES:
        return value[1:]   # our own export's formula guard
    if value.startswith(FORMULA_PREFIXES):
        raise ImportRejected(f"row {row}, column {column}: cell starts with {value[0]!r} (a spreadsheet formula)")
    return value


def parse_csv(data: bytes, max_bytes: int = 5 * 2**20) -> list[RunResult]:
    text = _text(data, max_bytes)
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise ImportRejected(f"missing columns: {', '.join(missing)}")
    runs: dict[str, dict] = {}
    for n, raw in enumerate(reader, start=2):
        row = {}
        for column, value in raw.items():
            if column is None or value is None:
                raise ImportRejected(f"row {n}: wrong number of cells")
            value = _unescape(value, column, n)
            row[column] = _number(value, column, n, column in INTEGER) if column in NUMERIC | INTEGER else value
        row.setdefault("gpus", "1")
        row["gpus"] = str(row["gpus"] or "1")
        for kind in KINDS:
            if row[kind] not in LEVERS or LEVERS[row[kind]].kind != kind:
                raise ImportRejected(f"row {n}, column {kind}: unknown lever {row[kind]!r}")
        if row["status"] not in FINISHED:
            raise ImportRejected(f"row {n}, column status: unknown status {row['status']!r}")
        if row["device"] not in ("cuda", "cpu"):
            raise ImportRejected(f"row {n}, column device: {row['device']!r} is not cuda or cpu")
        run_id = row.get("run_id") or "imported"
        entry = runs.setdefault(run_id, {"rows": [], "first": row})
        entry["rows"].append(row)
    if not runs:
        raise ImportRejected("file has a header but no rows")
    return [_run_from_rows(run_id, entry["first"], entry["rows"]) for run_id, entry in runs.items()]


def _run_from_rows(run_id: str, first: dict, rows: list[dict]) -> RunResult:
    cfg = BenchConfig(**{k: first[k] for k in INTEGER if first.get(k) is not None}, device=first["device"])
    env = {"torch": first["torch"], "cuda_runtime": first.get("cuda") or None, "driver": first.get("driver") or None,
           "cuda": {"name": first["gpu"]} if first["device"] == "cuda" else {},
           "apex": {"status": first["apex"].split(" ")[0] or "missing"}, "imported": True}
    stages = []
    for i, row in enumerate(rows):
        kernels = {k: [k] for k in filter(None, row["kernels_seen"].split(";")) if k in KEY_KERNELS}
        stages.append(StageResult(
            index=i, key=row["stage"], label=row.get("label") or row["stage"], optimizer=row["optimizer"],
            norm=row["norm"], precision=row["precision"], compile=row["compile"],
            gpus=str(row.get("gpus") or "1"), status=row["status"],
            reason=row["reason"], iters_total=cfg.iters, kernels=kernels, verdict=row.get("verdict") or None,
            warnings=tuple(w for w in (row.get("warnings") or "").split(" | ") if w),
            peak_allocated_mib=row["peak_mem_mib"] if first["device"] == "cuda" else None,
            peak_rss_mib=row["peak_mem_mib"] if first["device"] == "cpu" else None,
            peak_reserved_mib=row.get("peak_reserved_mib"), warmup_s=row.get("warmup_s"),
            sdpa_backend=row.get("sdpa_backend") or None, autocast_dtype=row.get("autocast_dtype") or None,
            imported_metrics={k: row.get(k) for k in NUMERIC if k in row}))
    return RunResult(config=cfg, env=env, device=first["device"], preset=first.get("preset") or "imported",
                     stages=tuple(stages), run_id=run_id, created_at=first.get("created_at") or "", status="done")


def parse_json(data: bytes, max_bytes: int = 5 * 2**20) -> list[RunResult]:
    text = _text(data, max_bytes)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportRejected(f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ImportRejected(f"not a bench_core run: expected \"schema\": \"{SCHEMA}\"")
    for key, kind in (("run_id", str), ("device", str), ("config", dict), ("stages", list)):
        if not isinstance(doc.get(key), kind):
            raise ImportRejected(f"field {key!r} missing or not a {kind.__name__}")
    try:
        run = RunResult.from_dict(doc)
        for s in run.stages:
            if not all(isinstance(t, (int, float)) for t in s.times_ms + s.losses):
                raise ImportRejected(f"stage {s.key}: times_ms and losses must be numbers")
            if s.status not in FINISHED:
                raise ImportRejected(f"stage {s.key}: unknown status {s.status!r}")
    except ImportRejected:
        raise
    except (TypeError, KeyError, ValueError) as exc:
        raise ImportRejected(f"malformed run: {type(exc).__name__}: {exc}") from None
    return [replace(run, env={**run.env, "imported": True})]


def parse_upload(name: str, data: bytes, max_bytes: int = 5 * 2**20) -> list[RunResult]:
    lower = name.lower()
    if lower.endswith(".json"):
        return parse_json(data, max_bytes)
    if lower.endswith(".csv"):
        return parse_csv(data, max_bytes)
    raise ImportRejected(f"{name!r}: expected a .csv or .json file written by bench_core")


__all__ = ["ImportRejected", "parse_csv", "parse_json", "parse_upload", "CSV_COLUMNS"]
