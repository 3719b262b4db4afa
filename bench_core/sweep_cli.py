"""``python -m bench_core sweep``: one lever comparison across model shapes, from a terminal.

``python -m bench_core sweep --compare LEVER|KEY_A,KEY_B --family gpt|llama --axis width=256,512,1024
[--axis batch_size=4,8] [--budget 10m] [--breakdown] [--device auto] [--json F] [--csv F] [--html F]
[--db PATH | --no-db]``
Every input is checked before anything starts; bad input exits 2 with the flag named.

``python -m bench_core sweep side-by-side A.json B.json [...]``: sweeps of one comparison and axes, from other
GPUs or other days, side by side as the Sweep page sets them (sweep.views.compare): each line's crossing in each,
then each point's speedup in each, the points whose intervals lie apart first. ``... sweep show A.json``: one
sweep (or each of several) as its run printed it, in today's words.
"""
from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_core.config.bench_config import (
    FIELD_HELP,
    INT_FIELDS,
    WORKLOADS,
    BenchConfig,
    ConfigError,
    OneLineParser,
    check_outputs,
    exit_code_of,
    resolve_device,
)
from bench_core.config.settings import load_limits
from bench_core.models.families import FAMILIES, parts_family
from bench_core.models.sources import config_from_args, model_source_args
from bench_core.results.records import Status
from bench_core.sweep.core.records import Phase, SweepResult, from_json, is_sweep_json, to_json
from bench_core.sweep.core.spec import (
    AXES,
    SweepSpec,
    check,
    check_runnable,
    grid,
    parse_axes,
    parse_budget,
    parse_comparison,
)
from bench_core.sweep.views.compare import apart_count, crossovers_side_by_side, same_map, speedups_side_by_side
from bench_core.sweep.views.rows import to_csv
from bench_core.sweep.views.words import summary_lines


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench_core sweep",
                description="Where does a lever start to pay? Its speedup across model shapes on this machine: "
                            "each point predicted from its stages' own steps on the model cut to one and two "
                            "blocks, the points in doubt measured end to end. A sweep already taken: python -m "
                            "bench_core sweep show A.json; several side by side: python -m bench_core sweep "
                            "side-by-side A.json B.json")
    p.add_argument("--compare", required=True, help="a lever (against the lever it replaces, in native BF16 "
                   "eager; e.g. fp8-torchao, liger-flce) or two stage keys KEY_A,KEY_B (B's speedup over A)")
    p.add_argument("--axis", action="append", default=[], help=f"NAME=VALUES, once or twice; NAME one of "
                   f"{', '.join(AXES)}; VALUES 256,512,1024 or a range 256:4096:x2 / 4:32:+4. Heads follow the "
                   "width at the base head size; the MLP width is the family's own")
    p.add_argument("--family", default=None, help=f"{', '.join(FAMILIES)} (default: the model size's, else gpt)")
    p.add_argument("--model", default=None, help=f"the base shape: {', '.join(WORKLOADS)}")
    model_source_args(p, factory=False)   # --hf: an HF architecture as the base, its head rules along the axes
    for name in INT_FIELDS:   # the base shape and run settings; an axis overrides its own field at each point
        p.add_argument("--" + name.replace("_", "-"), dest=name, default=None, help=FIELD_HELP[name].replace("%", "%%"))
    p.add_argument("--budget", default=None, help="time for the whole sweep, e.g. 10m, 90s, 1h (default: no limit, "
                   "every point measured end to end)")
    p.add_argument("--breakdown", action="store_true", help="also time each part of a block alone (GEMMs, "
                   "attention, norm, activation, loss head, optimizer) at every point: where a block's time goes. "
                   "Not used by the prediction; a compiled stage compiles each part as well, so its points take "
                   "longer to predict")
    p.add_argument("--device", default="auto", help="auto, cuda or cpu")
    p.add_argument("--json", dest="json_path", default=None, help="write the sweep as JSON here")
    p.add_argument("--csv", dest="csv_path", default=None, help="write one row per point as CSV here")
    p.add_argument("--html", default=None, help="write a static HTML report with the map")
    p.add_argument("--db", default=None, help="history database (default: the dashboard's, $BENCH_DB)")
    p.add_argument("--no-db", action="store_true", help="do not save the sweep to the history")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def base_config(args: argparse.Namespace, device_kind: str) -> BenchConfig:
    return config_from_args(args, device_kind, args.device)


def resolve(args: argparse.Namespace) -> SweepSpec:
    """The sweep the flags ask for, checked without the machine (its own rules are checked after the probe)."""
    if args.device not in ("auto", "cuda", "cpu"):
        raise ConfigError("device", args.device, "must be one of auto, cuda, cpu")
    if getattr(args, "model_factory", None):
        raise ConfigError("model_factory", args.model_factory, "a sweep cuts the model to one and two blocks and "
                          "reshapes it along its axes: give a built-in family or --hf (a factory runs with `run`)")
    axes = parse_axes(args.axis)
    budget = parse_budget(args.budget)
    check_outputs({"json": args.json_path, "csv": args.csv_path, "html": args.html, "db": args.db})
    from bench_core.machine.telemetry import has_nvidia_gpu
    device_kind = "cpu" if args.device == "cpu" else ("cuda" if has_nvidia_gpu() else "cpu")
    base = base_config(args, device_kind)
    comparison = parse_comparison(args.compare, parts_family(base))   # an HF model's by the norm it has
    spec = SweepSpec(comparison, base, axes, budget, args.breakdown)
    limit = load_limits().max_sweep_points
    n = len(grid(axes, base))
    if n > limit:
        raise ConfigError("axis", n, f"{n} points exceed the limit of {limit} points per sweep "
                          "(BENCH_MAX_SWEEP_POINTS)")
    return spec


def _until_done(work: Callable[[], SweepResult], cancel: threading.Event, console: Any) -> SweepResult:
    """The sweep in a thread; Ctrl-C cancels it and keeps every point that finished (then written as asked). The
    main thread waits on an event, not on Thread.join, which a KeyboardInterrupt can leave returning early."""
    out: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            out["result"] = work()
        except BaseException as exc:  # re-raised in the caller's thread
            out["error"] = exc
        finally:
            done.set()
    threading.Thread(target=target, name="bench-sweep", daemon=True).start()
    try:
        while not done.wait(0.2):
            pass
    except KeyboardInterrupt:
        cancel.set()
        console.print("cancelling: the points that finished are kept (Ctrl-C again stops at once)")
        while not done.wait(0.2):
            pass
    if "error" in out:
        raise out["error"]
    return out["result"]


def command(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from bench_core.machine.probe import cached_probe
    from bench_core.sweep.core.runner import SweepHooks, new_sweep, run_sweep
    from bench_core.sweep.views.words import same_code_warning
    spec = resolve(args)
    packages = tuple(dict.fromkeys(spec.comparison.a.packages + spec.comparison.b.packages))
    probe, _ = cached_probe(packages=packages)
    points = check(spec, load_limits(), probe.cuda_available, probe.free_bytes)
    check_runnable(spec.comparison, probe, resolve_device(spec.base.device, probe.cuda_available))
    store = None
    if not args.no_db:
        from bench_core.sweep.core.history import SweepStore
        store = SweepStore(args.db)
    console = Console(stderr=True)
    result = new_sweep(spec, points, probe)
    console.print(f"[bold]sweep[/] {result.title} · {len(points)} points · {result.device} {result.gpu or ''}"
                  f" · budget {'none' if spec.budget_s is None else f'{spec.budget_s:.0f} s'}", highlight=False)
    same = same_code_warning(spec.comparison, result.device)
    if same:   # said, not refused: a map of the noise floor is a fair thing to ask for
        console.print(f"warning: {same.replace('`', '')}", highlight=False, markup=False)
    cancel = threading.Event()
    with Progress(TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=console, disable=args.quiet) as bar:
        task = bar.add_task(Phase.PREDICTING.value, total=len(points))

        def on_update(current: SweepResult) -> None:
            if current.progress:
                bar.update(task, description=current.progress.phase.value, completed=current.progress.done,
                           total=current.progress.total)
            if store is not None:
                store.save(current)

        hooks = SweepHooks(on_update=on_update, cancel=cancel, timeout_s=load_limits().stage_timeout_s)
        result = _until_done(lambda: run_sweep(spec, points, probe, hooks, result), cancel, console)
    print("\n".join(summary_lines(result)))
    if args.json_path:
        with open(args.json_path, "w") as fh:
            fh.write(to_json(result))
    if args.csv_path:
        with open(args.csv_path, "w", newline="") as fh:
            fh.write(to_csv(result))
    if args.html:
        from bench_core.sweep.views.report import write_html
        write_html(result, args.html)
    if store is not None:
        print(f"saved to the history: {store.path} (sweep {result.sweep_id})", file=sys.stderr)
    return 130 if result.status == Status.CANCELLED else 0   # as an interrupted `run` ends, its points kept


FILES_FROM = "(python -m bench_core sweep --json, or the Sweep page's download)"


def _files_parser(command: str, description: str, files: str) -> argparse.ArgumentParser:
    p = OneLineParser(prog=f"python -m bench_core sweep {command}", description=description)
    p.add_argument("files", nargs="+", metavar="SWEEP.json", help=files)
    return p


def side_by_side_parser() -> argparse.ArgumentParser:
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


def side_by_side_lines(results: list[SweepResult], paths: list[str]) -> list[str]:
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


def side_by_side(args: argparse.Namespace) -> int:
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
    print("\n".join(side_by_side_lines(results, args.files)))
    return 0


def side_by_side_main(argv: list[str] | None = None) -> int:
    return exit_code_of(lambda: side_by_side(side_by_side_parser().parse_args(argv)))


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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["side-by-side"]:   # sweeps already taken, set side by side: its own parser
        return side_by_side_main(argv[1:])
    if argv[:1] == ["show"]:   # a sweep already taken, as its run printed it (with today's wording)
        return show_main(argv[1:])
    return exit_code_of(lambda: command(parser().parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
