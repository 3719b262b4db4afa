"""Files: the CSV and JSON a run is written to, and the strict reader that imports them back.

The CSV's columns are one table (results.file_columns: name, type, where the value comes from); the writer and the
reader here both read it. Imports
are refused whole, on the first bad value, naming the field, the row and the value; a stage the file was saved in
the middle of (its run still going) is kept as interrupted, with the reason, beside the stages that finished.
"""
from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from bench_core.config.bench_config import INT_FIELDS, BenchConfig
from bench_core.config.settings import Limits
from bench_core.levers.registry import KINDS, LEVERS
from bench_core.levers.stage import Stage, saved_names
from bench_core.machine.conditions import ClocksLocked
from bench_core.measure.proof import KEY_KERNELS
from bench_core.measure.stats import IntervalScope
from bench_core.measure.warmup import traces_from
from bench_core.models.families import collect_errors
from bench_core.results.file_columns import COLUMNS, CSV_COLUMNS, REQUIRED_COLUMNS, STAGE_METRICS
from bench_core.results.records import OLD_SCHEMAS, RUN_ACTIVE, SCHEMA, STAGE_FINISHED, RunResult, StageResult, Status
from bench_core.results.summary import RunSummary, summarize

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
INTERVAL_SCOPES = {"", *(scope.value for scope in IntervalScope)}
CLOCKS_LOCKED = {"", *(value.value for value in ClocksLocked)}


class ImportRejected(ValueError):
    """The file is not a run this tool wrote; the message says what is wrong."""


# A stage a file was saved in the middle of (`run --out/--json` rewrites its files after every round): imported
# as interrupted, with the reason, beside the stages that finished.
IN_PROGRESS = {Status.QUEUED: "had not started", Status.PENDING: "had not started",
               Status.RUNNING: "was still running"}
SWEEP_ID = "sweep_id"
SWEEP_CSV = ("this is a sweep's CSV export (one row per point, from `python -m bench_core sweep --csv`), not a run. "
             "A sweep is imported from its JSON (`sweep --json`, or the Sweep page's Download JSON), here or on "
             "the Sweep page")


def _stage_status(value: Any, where: str) -> tuple[Status, str | None]:
    """A stage's status word: a finished one as it is; one the run had not finished becomes interrupted, with the
    reason (None: keep the file's). Anything else is refused."""
    if isinstance(value, str) and value in IN_PROGRESS:
        return Status.INTERRUPTED, (f"the file was saved while the run was in progress: this stage "
                                    f"{IN_PROGRESS[Status(value)]}, so it has no result")
    if not isinstance(value, str) or value not in {s.value for s in STAGE_FINISHED}:
        raise ImportRejected(f"{where}: unknown status {value!r}")
    return Status(value), None


def _run_status(status: Status, stages: tuple[StageResult, ...]) -> Status:
    """A run saved while it was going is imported as interrupted: nothing here will finish it."""
    stopped = any(s.status == Status.INTERRUPTED for s in stages)
    return Status.INTERRUPTED if stopped or status in RUN_ACTIVE else status


def incomplete_note(run: RunResult) -> str | None:
    """What an import message says of a run some of whose stages did not finish: each one, and why."""
    stopped = [s for s in run.stages if s.status == Status.INTERRUPTED]
    if not stopped:
        return None
    done = len(run.stages) - len(stopped)
    return ("; ".join(f"stage {s.index + 1} ({s.key}) is interrupted: {s.reason}" for s in stopped)
            + f"; {done} finished stage{'' if done == 1 else 's'} imported")


def is_sweep_csv(header: Sequence[str]) -> bool:
    """A sweep's CSV export: its points' id column, no run's stage column. (sweep.views.rows.CSV_FIELDS opens with
    SWEEP_ID; results stands below sweep, so the name is written here, and a test holds the two together.)"""
    return SWEEP_ID in header and "stage" not in header


def neutralise(value: Any) -> Any:
    """Spreadsheet formula injection guard for text cells."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def summary_rows(summary: RunSummary) -> list[dict[str, Any]]:
    """One flat row per stage, config and environment repeated: the CSV's content."""
    return [{c.name: c.get(summary, stage) for c in COLUMNS} for stage in summary.stages]


def to_csv(runs: RunResult | list[RunResult]) -> str:
    runs = [runs] if isinstance(runs, RunResult) else runs
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for run in runs:
        for row in summary_rows(summarize(run)):
            writer.writerow({k: "" if v is None else neutralise(v) for k, v in row.items()})
    return buf.getvalue()


def _guard_text(value: Any) -> Any:
    if isinstance(value, str):
        return neutralise(value)
    if isinstance(value, list):
        return [_guard_text(v) for v in value]
    if isinstance(value, dict):
        return {k: _guard_text(v) for k, v in value.items()}
    return value


def to_json(run: RunResult) -> str:
    """The raw run (every series) plus each stage's summary row, its breakdown and its change from the previous."""
    summary = summarize(run)
    rows = summary_rows(summary)
    for row, stage in zip(rows, summary.stages, strict=False):
        row["breakdown_ms"] = stage.profile.breakdown_ms if stage.profile else None
        row["delta_vs_previous"] = ({"ms_by_category": stage.delta.ms_by_category,
                                     "kernels_per_step": stage.delta.kernels_per_step, "text": stage.delta.text}
                                    if stage.delta else None)
        row["bottleneck_sentence"] = stage.bottleneck.sentence
    return json.dumps(_guard_text({**run.to_dict(), "summary": rows}), indent=1, default=str)


# ---------------------------------------------------------------- reading back
def _text(data: bytes, max_bytes: int) -> str:
    if len(data) > max_bytes:
        raise ImportRejected(f"file is {len(data) / 2**20:.1f} MiB, above the {max_bytes / 2**20:.0f} MiB limit")
    if b"\x00" in data[:8192]:
        raise ImportRejected("file is binary, not CSV or JSON text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportRejected(f"file is not UTF-8 text (byte {exc.start})") from None


def _unescape(value: str, where: str) -> str:
    if value.startswith("'") and value[1:2] in FORMULA_PREFIXES and value[1:2]:
        return value[1:]   # our own export's formula guard
    if value.startswith(FORMULA_PREFIXES):
        raise ImportRejected(f"{where}: {value[:40]!r} starts with {value[0]!r} (a spreadsheet formula)")
    return value


def _cell(value: str, kind: str, where: str) -> Any:
    value = _unescape(value, where)
    if kind == "str":
        return value
    if value == "":
        if kind == "int":
            raise ImportRejected(f"{where}: empty, expected an integer")
        return None
    if kind == "bool":
        if value not in ("True", "False"):
            raise ImportRejected(f"{where}: {value!r} is not True or False")
        return value == "True"
    try:
        number = int(value) if kind in ("int", "int?") else float(value)
    except ValueError:
        raise ImportRejected(f"{where}: {value!r} is not {'an integer' if 'int' in kind else 'a number'}") from None
    if not math.isfinite(number):
        raise ImportRejected(f"{where}: {value!r} is not a finite number")
    return number


def _check_config(cfg: BenchConfig, where: str) -> None:
    errors = collect_errors(cfg, Limits(), True, {})
    if errors:
        raise ImportRejected(f"{where}: {errors[0]}")


def parse_csv(data: bytes, max_bytes: int = 5 * 2**20) -> list[RunResult]:
    reader = csv.DictReader(io.StringIO(_text(data, max_bytes)))
    header = reader.fieldnames or []
    if is_sweep_csv(header):
        raise ImportRejected(SWEEP_CSV)
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise ImportRejected(f"missing columns: {', '.join(missing)}")
    kinds = {c.name: c.kind for c in COLUMNS}
    runs: dict[str, list[dict]] = {}
    for n, raw in enumerate(reader, start=2):
        row: dict[str, Any] = {}
        for column, value in raw.items():
            if column is None or value is None:
                raise ImportRejected(f"row {n}: wrong number of cells")
            row[column] = _cell(value, kinds.get(column, "str"), f"row {n}, column {column}")
        row.update(saved_names(row))
        for kind in KINDS:
            if row[kind] not in LEVERS or LEVERS[row[kind]].kind != kind:
                raise ImportRejected(f"row {n}, column {kind}: unknown lever {row[kind]!r}")
        row["status"], stopped = _stage_status(row["status"], f"row {n}, column status")
        row["reason"] = stopped or row["reason"]
        if row["device"] not in ("cuda", "cpu"):
            raise ImportRejected(f"row {n}, column device: {row['device']!r} is not cuda or cpu")
        if row.get("interval_scope", "") not in INTERVAL_SCOPES:
            raise ImportRejected(f"row {n}, column interval_scope: {row['interval_scope']!r} is not one of "
                                 f"{', '.join(repr(v) for v in sorted(INTERVAL_SCOPES) if v)} or empty")
        if row.get("clocks_locked", "") not in CLOCKS_LOCKED:
            raise ImportRejected(f"row {n}, column clocks_locked: {row['clocks_locked']!r} is not one of "
                                 f"{', '.join(repr(v) for v in sorted(CLOCKS_LOCKED) if v)} or empty")
        runs.setdefault(row.get("run_id") or "imported", []).append(row)
    if not runs:
        raise ImportRejected("file has a header but no rows")
    return [_run_from_rows(run_id, rows) for run_id, rows in runs.items()]


def _run_from_rows(run_id: str, rows: list[dict]) -> RunResult:
    first = rows[0]
    cfg = BenchConfig(**{k: first[k] for k in INT_FIELDS if first.get(k) is not None}, device=first["device"])
    _check_config(cfg, f"run {run_id}")
    machine = {"torch": first["torch"], "cuda_runtime": first.get("cuda") or None,
               "driver": first.get("driver") or None,
               "cuda": {"available": True, "name": first["gpu"]} if first["device"] == "cuda" else {},
               "apex": {"status": first["apex"].split(" ")[0] or "missing"}, "imported": True}
    from bench_core.machine.probe import Probe
    stages: list[StageResult] = []
    for i, row in enumerate(rows):
        kernels = {k: [k] for k in filter(None, (row.get("kernels_seen") or "").split(";")) if k in KEY_KERNELS}
        stages.append(StageResult(
            index=i, stage=Stage(**{kind: str(row[kind]) for kind in KINDS}),
            status=row["status"], reason=row["reason"], iters_total=cfg.iters, kernels=kernels,
            verdict=row.get("verdict") or None,
            warnings=tuple(w for w in (row.get("warnings") or "").split(" | ") if w),
            peak_allocated_mib=row.get("peak_mem_mib") if first["device"] == "cuda" else None,
            peak_rss_mib=row.get("peak_mem_mib") if first["device"] == "cpu" else None,
            peak_reserved_mib=row.get("peak_reserved_mib"), warmup_s=row.get("warmup_s"),
            skipped_steps=row.get("skipped_steps"),
            sdpa_backend=row.get("sdpa_backend") or None, autocast_dtype=row.get("autocast_dtype") or None,
            imported_metrics={k: row.get(k) for k in STAGE_METRICS if k in row}))
    return RunResult(config=cfg, machine=Probe.from_dict(machine), device=first["device"],
                     preset=first.get("preset") or "imported", stages=tuple(stages), run_id=run_id,
                     created_at=first.get("created_at") or "",
                     status=_run_status(Status.DONE, tuple(stages)), imported=True)


class _NonFinite:
    """NaN or Infinity met while parsing: kept as a marker so the check can name its stage and field."""

    def __init__(self, name: str):
        self.name = name


def _mark_constant(name: str) -> _NonFinite:
    return _NonFinite(name)


def _finite(value: Any, where: str) -> None:
    if isinstance(value, _NonFinite):
        raise ImportRejected(f"{where}: {value.name} is not a finite number")
    if isinstance(value, list):
        for j, v in enumerate(value):
            _finite(v, f"{where}[{j}]" if not isinstance(v, (dict, list)) else where)
    elif isinstance(value, dict):
        for k, v in value.items():
            _finite(v, f"{where}, field {k}")


NUMBER_LISTS = ("times_ms", "losses", "host_ms", "rank_peak_mib")
NUMBER_FIELDS = ("warmup_s", "wall_s", "peak_allocated_mib", "peak_reserved_mib", "peak_rss_mib", "energy_j")


def _check_json_stage(i: int, stage: Any) -> None:
    where = f"stage {i}"
    if not isinstance(stage, dict):
        raise ImportRejected(f"{where}: not an object")
    for name in NUMBER_LISTS:
        values = stage.get(name) or []
        if not isinstance(values, list):
            raise ImportRejected(f"{where}, field {name}: not a list")
        for j, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ImportRejected(f"{where}, field {name}[{j}]: {v!r} is not a non-negative number")
    for name in NUMBER_FIELDS:
        v = stage.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0):
            raise ImportRejected(f"{where}, field {name}: {v!r} is not a non-negative number")
    try:
        traces_from(stage.get("warmups"))
    except ValueError as exc:
        raise ImportRejected(f"{where}, {exc}") from None
    stage.update(saved_names(stage))
    for name in ("key", "label", "reason", *KINDS):
        v = stage.get(name, "")
        if not isinstance(v, str):
            raise ImportRejected(f"{where}, field {name}: {v!r} is not text")
        stage[name] = _unescape(v, f"{where}, field {name}")
    stage["warnings"] = [_unescape(w, f"{where}, field warnings") if isinstance(w, str) else
                         _bad(f"{where}, field warnings", w) for w in stage.get("warnings") or []]
    status, stopped = _stage_status(stage.get("status"), f"{where}, field status")
    if stopped:
        stage.update(status=status.value, reason=stopped)
    for kind in KINDS:
        name = str(stage.get(kind, ""))
        if name not in LEVERS or LEVERS[name].kind != kind:
            raise ImportRejected(f"{where}, field {kind}: unknown lever {name!r}")


def _bad(where: str, value: Any) -> str:
    raise ImportRejected(f"{where}: {value!r} is not text")


def parse_json(data: bytes, max_bytes: int = 5 * 2**20) -> list[RunResult]:
    text = _text(data, max_bytes)
    try:
        doc = json.loads(text, parse_constant=_mark_constant)
    except json.JSONDecodeError as exc:
        raise ImportRejected(f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(doc, dict) or doc.get("schema") not in (SCHEMA, *OLD_SCHEMAS):
        raise ImportRejected(f"not a bench_core run: expected \"schema\": \"{SCHEMA}\"")
    for key, kind in (("run_id", str), ("device", str), ("config", dict), ("stages", list), ("created_at", str)):
        if not isinstance(doc.get(key), kind):
            raise ImportRejected(f"field {key!r} missing or not a {kind.__name__}")
    if doc["device"] not in ("cuda", "cpu"):
        raise ImportRejected(f"field device: {doc['device']!r} is not cuda or cpu")
    for name in INT_FIELDS:
        value = doc["config"].get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ImportRejected(f"config field {name}: {value!r} is not an integer")
    for i, stage in enumerate(doc["stages"]):
        if isinstance(stage, dict):
            for name, value in stage.items():
                _finite(value, f"stage {i}, field {name}")
        _check_json_stage(i, stage)
    _finite({k: v for k, v in doc.items() if k != "stages"}, "run")
    try:
        run = RunResult.from_dict(doc)
    except (TypeError, KeyError, ValueError) as exc:
        raise ImportRejected(f"malformed run: {type(exc).__name__}: {exc}") from None
    _check_config(run.config, "config")
    from bench_core.machine.probe import Probe
    return [replace(run, imported=True, status=_run_status(run.status, run.stages),
                    machine=Probe.from_dict({**run.machine.to_dict(), "imported": True}))]


def parse_upload(name: str, data: bytes, max_bytes: int = 5 * 2**20) -> list[RunResult]:
    lower = name.lower()
    if lower.endswith(".json"):
        return parse_json(data, max_bytes)
    if lower.endswith(".csv"):
        return parse_csv(data, max_bytes)
    raise ImportRejected(f"{name!r}: expected a .csv or .json file written by bench_core")
