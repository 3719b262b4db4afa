"""Sweeps in the run history's SQLite file (results.store's database), in a table of their own: each sweep's
summary columns for the History list and its whole JSON. Created when missing, as the store creates its tables."""
from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractContextManager
from dataclasses import replace

from bench_core.config.bench_config import model_label
from bench_core.results.records import Status
from bench_core.results.store import connect, default_db_path, import_id
from bench_core.sweep.core.line_answers import line_answers
from bench_core.sweep.core.records import SweepResult, prediction_error

SCHEMA = """
CREATE TABLE IF NOT EXISTS sweeps (
    sweep_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, compare TEXT NOT NULL, family TEXT, axes TEXT,
    device TEXT, gpu TEXT, status TEXT NOT NULL, points INTEGER, measured INTEGER, crossover TEXT,
    prediction_error REAL, imported INTEGER NOT NULL DEFAULT 0, result_json TEXT NOT NULL);
"""
# Columns added after the table's first version: (name, SQL type), added to an older history when it is opened.
LATER_COLUMNS: tuple[tuple[str, str], ...] = (("change", "TEXT"),)


class SweepStore:
    def __init__(self, path: str | None = None, timeout_s: float = 2.0):
        self.path = path or default_db_path()
        self.timeout_s = timeout_s
        with self._connect() as db:
            db.executescript(SCHEMA)
            have = {row[1] for row in db.execute("PRAGMA table_info(sweeps)")}
            for name, kind in LATER_COLUMNS:
                if name not in have:
                    db.execute(f"ALTER TABLE sweeps ADD COLUMN {name} {kind}")

    def _connect(self) -> AbstractContextManager[sqlite3.Connection]:
        return connect(self.path, self.timeout_s)

    def save(self, result: SweepResult) -> None:
        """Written, then rewritten as the sweep progresses."""
        with self._connect() as db:
            self._write(db, result)

    def import_sweep(self, result: SweepResult) -> tuple[str, bool]:
        """An imported sweep never overwrites one already here: it gets a new id. Returns (id, renamed)."""
        with self._connect() as db:
            sweep_id, renamed = import_id(db, "sweeps", "sweep_id", result.sweep_id)
            self._write(db, replace(result, sweep_id=sweep_id, imported=True))
        return sweep_id, renamed

    @staticmethod
    def _write(db: sqlite3.Connection, r: SweepResult) -> None:
        db.execute("INSERT OR REPLACE INTO sweeps (sweep_id, created_at, compare, family, axes, device, gpu, status, "
                   "points, measured, crossover, prediction_error, imported, result_json, change) "
                   "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   (r.sweep_id, r.created_at, r.title, model_label(r.spec.base),
                    " × ".join(f"{a.name} {a.values[0]}–{a.values[-1]}" for a in r.spec.axes), r.device, r.gpu,
                    r.status.value, len(r.points), sum(p.measured for p in r.points),
                    "; ".join(line_answers(r)) or None, prediction_error(r), int(r.imported),
                    json.dumps(r.to_dict()), r.spec.comparison.change))

    def mark_interrupted(self) -> list[str]:
        """After a crash or restart: a sweep still marked running keeps its finished points and says so."""
        with self._connect() as db:
            rows = db.execute("SELECT sweep_id, result_json FROM sweeps WHERE status=?",
                              (Status.RUNNING.value,)).fetchall()
            for _, blob in rows:
                result = replace(SweepResult.from_dict(json.loads(blob)), status=Status.INTERRUPTED)
                self._write(db, replace(result, notes=(*result.notes, "the server stopped before the sweep ended")))
        return [r[0] for r in rows]

    def list_sweeps(self) -> list[dict]:
        with self._connect() as db:
            db.row_factory = sqlite3.Row
            return [dict(row) for row in db.execute(
                "SELECT sweep_id, created_at, compare, change, family, axes, device, gpu, status, points, measured, "
                "crossover, prediction_error, imported FROM sweeps ORDER BY created_at DESC")]

    def load(self, sweep_id: str) -> SweepResult | None:
        with self._connect() as db:
            row = db.execute("SELECT result_json FROM sweeps WHERE sweep_id=?", (sweep_id,)).fetchone()
        return SweepResult.from_dict(json.loads(row[0])) if row else None
