"""Recommendations in the run history's SQLite file (results.store's database), in a table of their own, as sweeps
are kept: the answer's columns for the History list and its whole JSON. The stages it measured at the leader's
batch size are saved beside it as a run (results.store), so History opens them as any run."""
from __future__ import annotations

import sqlite3
import uuid
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, datetime

from bench_core.recommend.answer import Recommendation, is_recommendation_json
from bench_core.results.formats import ImportRejected
from bench_core.results.store import connect, default_db_path, import_id

SCHEMA = """
CREATE TABLE IF NOT EXISTS recommendations (
    recommendation_id TEXT PRIMARY KEY, created_at TEXT NOT NULL, model TEXT, device TEXT, gpu TEXT,
    recommended TEXT, either INTEGER, speedup REAL, from_key TEXT, run_id TEXT, result_json TEXT NOT NULL);
"""


class RecommendationStore:
    def __init__(self, path: str | None = None, timeout_s: float = 2.0):
        self.path = path or default_db_path()
        self.timeout_s = timeout_s
        with self._connect() as db:
            db.executescript(SCHEMA)

    def _connect(self) -> AbstractContextManager[sqlite3.Connection]:
        return connect(self.path, self.timeout_s)

    def save(self, rec: Recommendation) -> str:
        rid = rec.recommendation_id or uuid.uuid4().hex[:12]
        with self._connect() as db:
            db.execute("INSERT OR REPLACE INTO recommendations (recommendation_id, created_at, model, device, gpu, "
                       "recommended, either, speedup, from_key, run_id, result_json) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                       (rid, datetime.now(UTC).isoformat(timespec="seconds"), rec.model, rec.device, rec.gpu,
                        rec.recommended.stage if rec.recommended else None, int(rec.either), rec.speedup,
                        rec.from_key, rec.history_run, rec.to_json()))
        return rid

    def list_recommendations(self) -> list[dict]:
        with self._connect() as db:
            db.row_factory = sqlite3.Row
            return [dict(row) for row in db.execute(
                "SELECT recommendation_id, created_at, model, device, gpu, recommended, either, speedup, from_key, "
                "run_id FROM recommendations ORDER BY created_at DESC")]

    def load(self, recommendation_id: str) -> Recommendation | None:
        with self._connect() as db:
            row = db.execute("SELECT result_json FROM recommendations WHERE recommendation_id=?",
                             (recommendation_id,)).fetchone()
        return Recommendation.from_json(row[0]) if row else None

    def import_json(self, data: bytes | str) -> tuple[str, bool]:
        """A recommendation's JSON (`recommend --json`, or the page's download) kept under its own id, or under a
        new one where that id is taken (nothing is overwritten): (id, renamed). ImportRejected: not one, or unread."""
        if not is_recommendation_json(data):
            raise ImportRejected("this is not a recommendation's JSON (from `python -m bench_core recommend --json` "
                                 "or the Recommend page's Download JSON)")
        try:
            rec = Recommendation.from_json(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise ImportRejected(f"a recommendation file that cannot be read: {type(exc).__name__}: {exc}") from None
        with self._connect() as db:
            rid, renamed = import_id(db, "recommendations", "recommendation_id",
                                     rec.recommendation_id or uuid.uuid4().hex[:12])
        return self.save(replace(rec, recommendation_id=rid)), renamed
