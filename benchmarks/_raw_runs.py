"""Every run the raw files of a folder hold (docs/data), read by the engine's own loader: for the scripts that quote
them, so none reads the files its own way."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from bench_core.results.formats import ImportRejected, parse_upload
from bench_core.results.records import RunResult


def raw_runs(data: Path) -> Iterator[tuple[str, RunResult]]:
    """(file name, run) for each run of each JSON file, in name order; probe and components files hold none."""
    for path in sorted(data.glob("*.json")):
        for run in runs_in(path):
            yield path.name, run


def runs_in(path: Path) -> list[RunResult]:
    """One file's runs; none for a file that holds no finished run (a probe, a run cut while it ran)."""
    try:
        return parse_upload(path.name, path.read_bytes(), max_bytes=64 * 2**20)
    except ImportRejected:
        return []
