"""``python -m bench_core import FILE | --example NAME``: a saved run (CSV or JSON), a components report, a sweep
or a recommendation into the history, each into its own table; a file that does not parse is rejected whole (exit 2)
and nothing is imported."""
from __future__ import annotations

import argparse
import os
import sys

from bench_core.config.settings import load_limits
from bench_core.results.formats import ImportRejected, incomplete_note, parse_upload


def cmd_import(args: argparse.Namespace) -> int:
    from bench_core.components.rows import is_components_json, parse_report
    from bench_core.recommend.answer import is_recommendation_json
    from bench_core.results.examples import example_json
    limit = load_limits().max_upload_mib * 2**20
    from bench_core.sweep.core.records import is_sweep_json
    try:
        if (args.file is None) == (args.example is None):
            raise ImportRejected("import: give a FILE or --example NAME (one of them)")
        if args.example is not None:
            args.file = f"{args.example}.json"
            data = example_json(args.example)
        else:
            data = read_import(args.file)
        if is_sweep_json(data):
            return _import_sweep(args, data)
        if is_recommendation_json(data):
            from bench_core.recommend.history import RecommendationStore
            rid, renamed = RecommendationStore(args.db).import_json(data)
            print(f"imported recommendation {rid}" + (" (its id was already here: a new id)" if renamed else ""))
            return 0
        components = is_components_json(data)
        report = parse_report(args.file, data, limit) if components else None
        runs = [] if components else parse_upload(args.file, data, max_bytes=limit)
    except ImportRejected as exc:
        print(f"import rejected, nothing was imported: {exc}", file=sys.stderr)
        return 2
    from bench_core.results.store import Store
    store = Store(args.db)
    if report is not None:
        print(f"imported components report {store.save_components(report.to_dict())} into {store.path}")
    for run in runs:
        new_id, renamed = store.import_run(run)
        incomplete = incomplete_note(run)
        print(f"imported run {new_id}" + (f" (run {run.run_id} already exists: imported under a new id)"
                                          if renamed else "") + f" into {store.path}"
              + (f": {incomplete}" if incomplete else ""))
    return 0


def _import_sweep(args: argparse.Namespace, data: bytes) -> int:
    """A sweep's JSON (`sweep --json`) into the history's sweeps; ImportRejected when it does not parse."""
    from bench_core.sweep.core.history import SweepStore
    from bench_core.sweep.core.records import from_json
    try:
        result = from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ImportRejected(f"{args.file} is a sweep file but cannot be read: {type(exc).__name__}: {exc}") from None
    store = SweepStore(args.db)
    new_id, renamed = store.import_sweep(result)
    print(f"imported sweep {new_id}" + (f" (sweep {result.sweep_id} already exists: imported under a new id)"
                                        if renamed else "") + f" into {store.path}")
    return 0


def read_import(path: str) -> bytes:
    """The file's bytes, or ImportRejected saying why it cannot be read (missing, a folder, a pipe, no access)."""
    import stat

    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):  # a folder, or a FIFO whose open() would wait for a writer for ever
            raise ImportRejected(f"{path} is not a regular file")
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise ImportRejected(f"cannot read {path}: {exc.strerror or exc}") from None
