"""``python -m bench_core sweep side-by-side A.json B.json [...]``: sweeps of one comparison and axes, from other
GPUs or other days, side by side in a terminal, as the Sweep page sets them (sweep.compare): each line's crossing
in each, then each point's speedup in each, the points whose intervals lie apart first. ``... sweep show A.json``:
one sweep (or each of several) as its run printed it, in today's words."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench_core.config.bench_config import ConfigError, OneLineParser, exit_code_of
from bench_core.sweep.compare import apart_count, crossovers_side_by_side, same_map, speedups_side_by_side
from bench_core.sweep.records import SweepResult, from_json, is_sweep_json
from bench_core.sweep.terminal import summary_lines

FILES_FROM = "(python -m bench_core sweep --json, or the Sweep page's download)"


def _files_parser(command: str, description: str, files: str) -> argparse.ArgumentParser:
    p = OneLineParser(prog=f"python -m bench_core sweep {command}", description=description)
    p.add_argument("files", nargs="+", metavar="SWEEP.json", help=files)
    return p


def parser() -> argparse.ArgumentParser:
    return _files_parser("side-by-side", "sweeps of one comparison and axes (other GPUs, other days) side by side: "
                         "where each crosses ×1.00, and each point's speedup in each",
                         f"two or more sweep JSON files {FILES_FROM}; the first is the reference")


def load(path: str) -> SweepResult:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("file", path, f"cannot be read ({exc})") from None
    if not is_sweep_json(text):
        raise ConfigError("file", path, "is not a sweep's JSON (python -m bench_core sweep --json writes one)")
    try:
        return from_json(text)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError("file", path, f"is a sweep file but cannot be read: {type(exc).__name__}: {exc}") from None


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in [header, *rows]]


def lines(results: list[SweepResult], paths: list[str]) -> list[str]:
    """The sweeps named and numbered, each line's crossing in each, then the points as a table headed by number."""
    crossings, points = crossovers_side_by_side(results), speedups_side_by_side(results)
    out = [f"sweeps side by side: {results[0].title}"]
    out += [f"  {n}. {name}  {path}" for n, (name, path) in enumerate(zip(crossings.columns, paths, strict=True), 1)]
    out.append("where each crosses ×1.00:")
    for line, texts in crossings.rows:
        out.append(f"  {line}")
        out += [f"    {n}. {text}" for n, text in enumerate(texts, 1)]
    apart, shared = apart_count(points)
    out.append(f"each point's speedup of B over A (≈: predicted); intervals apart at {apart} of {shared} points "
               "with a figure in more than one sweep" + (", listed first" if apart else ""))
    header = [points.first, points.columns[0], *(str(n) for n in range(1, len(results) + 1))]
    out += ["  " + row for row in _table(header, [[label, *texts] for label, texts in points.rows])]
    return out


def command(args: argparse.Namespace) -> int:
    if len(args.files) < 2:
        raise ConfigError("files", args.files, "give two or more sweep JSON files to set side by side (one: "
                          "python -m bench_core sweep show FILE.json)")
    results = [load(path) for path in args.files]
    for path, result in zip(args.files[1:], results[1:], strict=True):
        if not same_map(results[0], result):
            raise ConfigError("file", path, f"sweeps {result.title} along "
                              f"{', '.join(a.name for a in result.spec.axes)}; {args.files[0]} sweeps "
                              f"{results[0].title} along {', '.join(a.name for a in results[0].spec.axes)}: only "
                              "one comparison along the same axes can be set side by side")
    print("\n".join(lines(results, args.files)))
    return 0


def main(argv: list[str] | None = None) -> int:
    return exit_code_of(lambda: command(parser().parse_args(argv)))


def show_parser() -> argparse.ArgumentParser:
    return _files_parser("show", "a sweep already taken, as its run printed it: each point, each line's answer, the "
                         "prediction's errors and the notes", f"sweep JSON files {FILES_FROM}")


def show(args: argparse.Namespace) -> int:
    results = [load(path) for path in args.files]   # every file read before any is printed
    print("\n\n".join("\n".join(summary_lines(r)) for r in results))
    return 0


def show_main(argv: list[str] | None = None) -> int:
    """A side-by-side of one file was refused ("give two or more"), and nothing printed one saved sweep."""
    return exit_code_of(lambda: show(show_parser().parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
