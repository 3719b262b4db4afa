"""``python -m bench_core components``: the optimizer step and the norm alone, from a terminal.

``python -m bench_core components --model gpt2-small --device auto|cpu|cuda [--json PATH|-] [--out FILE.csv]``
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from typing import Any

from bench_core.components.rows import (
    DEFAULT_REPEATS,
    DEFAULT_WARMUP,
    ComponentsReport,
    format_table,
    write_csv,
)
from bench_core.config.bench_config import (
    WORKLOADS,
    BenchConfig,
    ConfigError,
    OneLineParser,
    defaults_for,
    exit_code_of,
    int_field,
)


def run(cfg: BenchConfig, device: str, repeats: int = DEFAULT_REPEATS, *, warmup: int = DEFAULT_WARMUP,
        model: str = "custom", ceilings: Any = None, refresh_ceilings: bool = False,
        probe: Any = None) -> ComponentsReport:
    """Measure every row on ``device`` ("cpu" | "cuda"). See components.bench.run for the details."""
    from bench_core.components.bench import run as _run
    return _run(cfg, device, repeats, warmup=warmup, model=model, ceilings=ceilings,
                refresh_ceilings=refresh_ceilings, probe=probe)


# ---------------------------------------------------------------- command line
def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench_core components",
                description="The registry's optimizer and norm levers alone (one Adam step, one norm fwd+bwd), at "
                            "the model's real shapes: LayerNorm rows for gpt sizes, RMSNorm rows for llama sizes")
    p.add_argument("--model", default=None, help=f"one of {', '.join(WORKLOADS)} (default: tiny on CPU, "
                   "gpt2-small on CUDA)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--repeats", default=str(DEFAULT_REPEATS), help="timed calls per row (median, p10, p90)")
    p.add_argument("--warmup", default=str(DEFAULT_WARMUP), help="untimed calls per row first")
    p.add_argument("--measure-again", action="store_true", help="measure the GPU ceilings again, not from cache")
    p.add_argument("--json", dest="json_path", nargs="?", const="-", default=None, metavar="PATH",
                   help="write the report as JSON to PATH ('-' or no PATH: print it), as `run --json` does; "
                   "`python -m bench_core import PATH` brings it into the Components page's history")
    p.add_argument("--out", default=None, help="also write the rows as CSV to this file")
    p.add_argument("--db", default=None, help="history database (default: the dashboard's, $BENCH_DB)")
    p.add_argument("--no-db", action="store_true", help="do not save the report to the history")
    return p


def _count(name: str, raw: str, low: int, high: int) -> int:
    value = int_field(name, raw)
    if not low <= value <= high:
        raise ConfigError(name, value, f"must be between {low} and {high}")
    return value


def _cuda_available() -> bool:
    import torch
    return torch.cuda.is_available()


def resolve(args) -> tuple[str, BenchConfig, str, int, int]:
    """(model name, config, device, repeats, warmup) from parsed arguments; ConfigError on bad input."""
    if args.device not in ("auto", "cpu", "cuda"):
        raise ConfigError("device", args.device, "must be one of auto, cpu, cuda")
    if args.model is not None and args.model not in WORKLOADS:
        raise ConfigError("model", args.model, f"choose one of {', '.join(WORKLOADS)}")
    repeats = _count("repeats", args.repeats, 1, 100_000)
    warmup = _count("warmup", args.warmup, 0, 10_000)
    for field, path in (("out", args.out), ("json", None if args.json_path == "-" else args.json_path)):
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        if folder and not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
            raise ConfigError(field, path, f"folder {folder} does not exist or is not writable")
    cuda = args.device != "cpu" and _cuda_available()
    if args.device == "cuda" and not cuda:
        raise ConfigError("device", "cuda", "no CUDA device is available on this machine")
    device = "cuda" if cuda else "cpu"
    name = args.model or ("gpt2-small" if device == "cuda" else "tiny")
    cfg = replace(defaults_for(device), **WORKLOADS[name], device=device)
    return name, cfg, device, repeats, warmup


def main(argv: list[str] | None = None) -> int:
    return exit_code_of(lambda: command(parser().parse_args(argv)))


def command(args: argparse.Namespace) -> int:
    name, cfg, device, repeats, warmup = resolve(args)
    report = run(cfg, device, repeats, warmup=warmup, model=name, refresh_ceilings=args.measure_again)
    if args.out:
        write_csv(report, args.out)
    text = json.dumps(report.to_dict(), indent=1)
    if args.json_path and args.json_path != "-":
        with open(args.json_path, "w") as fh:
            fh.write(text)
    if not args.no_db:
        from bench_core.results.store import Store
        store = Store(args.db)
        print(f"saved to the history: {store.path} (report {store.save_components(report.to_dict())})",
              file=sys.stderr)
    print(text if args.json_path == "-" else format_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
