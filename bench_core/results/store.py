"""Run history in an embedded SQLite database (WAL): runs, environments, stages and per-iteration series."""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from bench_core.config.bench_config import BenchConfig
from bench_core.machine.probe import Probe
from bench_core.results.records import RUN_ACTIVE, RunResult, StageResult, Status
from bench_core.results.summary import summarize

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, preset TEXT, device TEXT, gpu TEXT,
    status TEXT NOT NULL, config_json TEXT NOT NULL, imported INTEGER NOT NULL DEFAULT 0, headline TEXT, node TEXT,
    answer TEXT);
CREATE TABLE IF NOT EXISTS environments (run_id TEXT PRIMARY KEY REFERENCES runs(run_id), env_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS stages (
    run_id TEXT NOT NULL REFERENCES runs(run_id), idx INTEGER NOT NULL, key TEXT NOT NULL, status TEXT NOT NULL,
    reason TEXT, verdict TEXT, median_ms REAL, p10_ms REAL, p90_ms REAL, tokens_per_s REAL, speedup REAL,
    peak_mem_mib REAL, mfu REAL, result_json TEXT NOT NULL, PRIMARY KEY (run_id, idx));
CREATE TABLE IF NOT EXISTS components (
    report_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, model TEXT, device TEXT, gpu TEXT, report_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS iterations (
    run_id TEXT NOT NULL, idx INTEGER NOT NULL, i INTEGER NOT NULL, ms REAL NOT NULL, loss REAL,
    PRIMARY KEY (run_id, idx, i));
"""


@contextmanager
def connect(path: str, timeout_s: float) -> Iterator[sqlite3.Connection]:
    """One transaction on the history file (committed, or rolled back on an error), then closed."""
    db = sqlite3.connect(path, timeout=timeout_s)
    try:
        with db:
            yield db
    finally:
        db.close()


def import_id(db: sqlite3.Connection, table: str, column: str, wanted: str) -> tuple[str, bool]:
    """(id, renamed): an imported record never overwrites one already in `table`; a taken id gets a new one."""
    if db.execute(f"SELECT 1 FROM {table} WHERE {column}=?", (wanted,)).fetchone() is None:  # noqa: S608 (ours)
        return wanted, False
    return f"{wanted[:12]}-imp-{uuid.uuid4().hex[:6]}", True


def default_db_path() -> str:
    """BENCH_DB overrides; otherwise a per-user data directory."""
    if os.environ.get("BENCH_DB"):
        return os.environ["BENCH_DB"]
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "bench_core", "runs.sqlite3")


class Store:
    def __init__(self, path: str | None = None, timeout_s: float = 2.0):
        self.path = path or default_db_path()
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)
            columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
            if "headline" not in columns:  # a history written before the verdict one-liner existed
                db.execute("ALTER TABLE runs ADD COLUMN headline TEXT")
            if "node" not in columns:  # a history written before runs went to cluster nodes
                db.execute("ALTER TABLE runs ADD COLUMN node TEXT")
            if "answer" not in columns:  # a history written before the answer card: its runs list none
                db.execute("ALTER TABLE runs ADD COLUMN answer TEXT")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        with self._lock, connect(self.path, self.timeout_s) as db:
            yield db

    # ---------------------------------------------------------------- writes
    def save_run(self, run: RunResult) -> None:
        """A run of this server or CLI (its own id): written, then rewritten as it progresses."""
        with self._connect() as db:
            self._write_run(db, run)

    def import_run(self, run: RunResult) -> tuple[str, bool]:
        """An imported run never overwrites one already here: it gets a new id. Returns (id, renamed)."""
        with self._connect() as db:
            run_id, renamed = import_id(db, "runs", "run_id", run.run_id)
            self._write_run(db, replace(run, run_id=run_id, imported=True))
        return run_id, renamed

    def _write_run(self, db: sqlite3.Connection, run: RunResult) -> None:
        from bench_core.results.answer import answer
        from bench_core.results.headline import headline
        summary = summarize(run)
        db.execute("INSERT OR REPLACE INTO runs (run_id, created_at, preset, device, gpu, status, config_json, "
                   "imported, headline, node, answer) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                   (run.run_id, run.created_at, run.preset, run.device, run.gpu, run.status.value,
                    json.dumps(run.config.to_dict()), int(run.imported), headline(summary).one_liner,
                    run.node, answer(summary).short))
        db.execute("INSERT OR REPLACE INTO environments VALUES (?,?)",
                   (run.run_id, json.dumps(run.machine.to_dict(), default=str)))
        for stage in run.stages:
            self._write_stage(db, run, stage)

    def save_stage(self, run: RunResult, stage: StageResult) -> None:
        with self._connect() as db:
            self._write_stage(db, run, stage)
            db.execute("UPDATE runs SET status=? WHERE run_id=?", (run.status.value, run.run_id))

    @staticmethod
    def _write_stage(db: sqlite3.Connection, run: RunResult, stage: StageResult) -> None:
        s = summarize(run.with_stage(stage)).stage(stage.index) if run.stages[stage.index] is not stage \
            else summarize(run).stage(stage.index)
        db.execute("INSERT OR REPLACE INTO stages VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   (run.run_id, stage.index, stage.key, stage.status.value, stage.reason, s.verdict,
                    s.timing.median_ms, s.timing.p10_ms, s.timing.p90_ms, s.rates.tokens_per_s, s.speedup,
                    stage.peak_mem_mib, s.rates.mfu, json.dumps(stage.to_dict())))
        db.execute("DELETE FROM iterations WHERE run_id=? AND idx=?", (run.run_id, stage.index))
        db.executemany("INSERT INTO iterations VALUES (?,?,?,?,?)",
                       [(run.run_id, stage.index, i, ms, loss)
                        for i, (ms, loss) in enumerate(zip(stage.times_ms, stage.losses, strict=False))])

    def set_run_status(self, run_id: str, status: Status) -> None:
        with self._connect() as db:
            db.execute("UPDATE runs SET status=? WHERE run_id=?", (Status(status).value, run_id))

    def mark_interrupted(self) -> list[str]:
        """After a crash or restart: unfinished runs and their unfinished stages become 'interrupted'."""
        active = tuple(s.value for s in RUN_ACTIVE)
        unfinished = (Status.PENDING.value, Status.RUNNING.value)
        with self._connect() as db:
            rows = db.execute("SELECT run_id, node FROM runs WHERE status IN (?,?)", active).fetchall()
            for run_id, run_node in rows:
                db.execute("UPDATE runs SET status=? WHERE run_id=?", (Status.INTERRUPTED.value, run_id))
                for idx, blob in db.execute("SELECT idx, result_json FROM stages WHERE run_id=? AND status IN "
                                            "(?,?)", (run_id, *unfinished)).fetchall():
                    data = json.loads(blob)
                    node = data.get("node") or run_node   # a cluster run's task ended with the server's driver
                    data = {**data, "status": Status.INTERRUPTED.value,
                            "reason": "the server stopped before this stage finished"
                                      + (f" (on node {node}, whose task Ray ended with the server)" if node else "")}
                    db.execute("UPDATE stages SET status=?, reason=?, result_json=? WHERE run_id=? AND idx=?",
                               (Status.INTERRUPTED.value, data["reason"], json.dumps(data), run_id, idx))
            return [run_id for run_id, _ in rows]

    # ---------------------------------------------------------------- reads
    def list_runs(self) -> list[dict]:
        with self._connect() as db:
            db.row_factory = sqlite3.Row
            rows = db.execute(
                "SELECT r.run_id, r.created_at, r.preset, r.device, r.gpu, r.status, r.imported, r.config_json, "
                "r.headline, r.answer, r.node, "
                "COUNT(s.idx) AS stages, SUM(s.status=?) AS ok, "
                # a best speedup counts measured, ok, proven stages of this machine only
                "MAX(CASE WHEN s.status=? AND r.imported=0 AND COALESCE(s.verdict, '') != 'fallback' "
                "THEN s.speedup END) AS best_speedup, "
                "SUM(s.status IN (?,?,?)) AS failed "
                "FROM runs r LEFT JOIN stages s ON s.run_id = r.run_id GROUP BY r.run_id "
                "ORDER BY r.created_at DESC", (Status.OK.value, Status.OK.value, Status.FAILED.value,
                                               Status.OOM.value, Status.TIMEOUT.value)).fetchall()
        return [dict(r) for r in rows]

    def load_run(self, run_id: str) -> RunResult | None:
        with self._connect() as db:
            row = db.execute("SELECT created_at, preset, device, status, config_json, imported, node FROM runs "
                             "WHERE run_id=?", (run_id,)).fetchone()
            if row is None:
                return None
            env = db.execute("SELECT env_json FROM environments WHERE run_id=?", (run_id,)).fetchone()
            stages = [StageResult.from_dict(json.loads(blob)) for (blob,) in
                      db.execute("SELECT result_json FROM stages WHERE run_id=? ORDER BY idx", (run_id,))]
        return RunResult(config=BenchConfig.from_dict(json.loads(row[4])),
                         machine=Probe.from_dict(json.loads(env[0]) if env else {}), device=row[2], preset=row[1],
                         stages=tuple(stages), run_id=run_id, created_at=row[0], status=Status(row[3]),
                         imported=bool(row[5]), node=row[6])

    # ---------------------------------------------------------------- the components view
    def save_components(self, report: dict) -> str:
        """A components report (ComponentsReport.to_dict()) with the environment it was measured in."""
        report_id = uuid.uuid4().hex[:12]
        with self._connect() as db:
            db.execute("INSERT INTO components VALUES (?,?,?,?,?,?)",
                       (report_id, report.get("created_at", ""), report.get("model"), report.get("device"),
                        (report.get("env") or {}).get("device_name"), json.dumps(report, default=str)))
        return report_id

    def list_components(self) -> list[dict]:
        with self._connect() as db:
            db.row_factory = sqlite3.Row
            return [dict(r) for r in db.execute("SELECT report_id, created_at, model, device, gpu FROM components "
                                                "ORDER BY created_at DESC")]

    def load_components(self, report_id: str) -> dict | None:
        with self._connect() as db:
            row = db.execute("SELECT report_json FROM components WHERE report_id=?", (report_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def count_stage_rows(self, run_id: str) -> int:
        with self._connect() as db:
            return db.execute("SELECT COUNT(*) FROM stages WHERE run_id=?", (run_id,)).fetchone()[0]
