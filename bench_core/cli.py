"""``python -m bench_core run|probe``: the engine from a terminal."""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace

from .config import BenchConfig, ConfigError, defaults_for, model_size, resolve_device, validate
from .levers import PRESETS, across_gpus, preset
from .probe import collect, cuda_available, free_bytes, run_probe
from .results import RunResult, stage_metrics, to_csv, to_json
from .runner import WorkerSpawner, new_run, run_all
from .settings import load_limits

MODEL_ARGS = ("depth", "width", "heads", "seq_len", "batch_size", "vocab_size", "warmup", "iters", "seed")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench_core", description="Staged transformer training benchmark")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a preset of stages")
    run.add_argument("--preset", default="seed", help=f"one of {', '.join(PRESETS)}")
    run.add_argument("--model", default=None, help="a model size: tiny, gpt2-small, gpt2-medium")
    run.add_argument("--device", default="auto", help="auto, cuda or cpu")
    for name in MODEL_ARGS:
        run.add_argument("--" + name.replace("_", "-"), dest=name, type=str, default=None)
    run.add_argument("--gpus", default="1", help="GPU counts, comma separated (e.g. 1,2,4): each stage runs at "
                     "each count, through torchrun + DDP when > 1 (gloo processes on CPU)")
    run.add_argument("--out", help="write the results CSV here")
    run.add_argument("--json", dest="json_path", help="write the full results JSON here")
    run.add_argument("--html", help="write a static HTML report with the dashboard's charts")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    probe = sub.add_parser("probe", help="report what this machine can run")
    probe.add_argument("--json", action="store_true", help="print JSON")
    return p


def _int(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(name, raw, "must be an integer") from None


def build_config(args, probe: dict) -> BenchConfig:
    device = resolve_device(args.device, cuda_available(probe)) if args.device in ("auto", "cuda", "cpu") else "cpu"
    cfg = replace(defaults_for(device), device=args.device)
    if args.model:
        cfg = model_size(args.model, cfg)
    overrides = {n: _int(n, getattr(args, n)) for n in MODEL_ARGS if getattr(args, n) is not None}
    return replace(cfg, **overrides)


def print_table(run: RunResult, console) -> None:
    from rich.table import Table
    table = Table(title=f"{run.preset} on {run.gpu} · run {run.run_id}")
    for col in ("stage", "status", "median ms", "p10–p90", "speedup", "tok/s", "peak MiB", "MFU", "scaling",
                "kernels"):
        table.add_column(col, justify="left" if col in ("stage", "status", "kernels") else "right",
                         no_wrap=col == "stage")
    for stage in run.stages:
        m = stage_metrics(run, stage)
        fmt = lambda v, f: "—" if v is None else format(v, f)  # noqa: E731
        kernels = ("⚠ " if stage.warnings else "") + (stage.verdict or "")
        table.add_row(stage.key, stage.status, fmt(m["median_ms"], ".2f"),
                      "—" if m["p10_ms"] is None else f"{m['p10_ms']:.2f}–{m['p90_ms']:.2f}",
                      "—" if m["speedup"] is None else f"×{m['speedup']:.2f}", fmt(m["tokens_per_s"], ",.0f"),
                      fmt(stage.peak_mem_mib, ",.0f"), "—" if m["mfu"] is None else f"{m['mfu']:.1%}",
                      "—" if m["scaling_efficiency"] is None else f"{m['scaling_efficiency']:.0%}", kernels)
    console.print(table)
    for stage in run.stages:
        for note in ([stage.reason] if stage.reason else []) + list(stage.warnings):
            console.print(f"  {stage.key}: {note}", highlight=False, soft_wrap=True)


def cmd_run(args) -> int:
    from rich.console import Console
    console = Console(stderr=True)
    if args.device not in ("auto", "cuda", "cpu"):
        raise ConfigError("device", args.device, "must be one of auto, cuda, cpu")
    for flag, path in (("out", args.out), ("json", args.json_path), ("html", args.html)):
        folder = os.path.dirname(os.path.abspath(path)) if path else None
        if folder and not (os.path.isdir(folder) and os.access(folder, os.W_OK)):
            raise ConfigError(flag, path, f"folder {folder} does not exist or is not writable")
    stages = across_gpus(preset(args.preset), [g.strip() for g in args.gpus.split(",") if g.strip()])
    spawner = WorkerSpawner(device=args.device)
    spawner.prepare()  # the first stage's process imports torch while the probe runs
    try:
        probe = run_probe()
        return _run(args, stages, probe, spawner, console)
    finally:
        spawner.close()


def _run(args, stages, probe, spawner, console) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    cfg = build_config(args, probe)
    limits = load_limits()
    validate(cfg, limits, cuda_available(probe), free_bytes(probe))
    run = new_run(cfg, stages, probe, args.preset)
    console.print(f"[bold]{args.preset}[/] · {len(stages)} stages · {run.device} {run.gpu} · "
                  f"depth {cfg.depth} width {cfg.width} heads {cfg.heads} seq {cfg.seq_len} batch {cfg.batch_size}")
    with Progress(TextColumn("{task.description:<44}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console,
                  disable=args.quiet) as progress:
        tasks = {s.index: progress.add_task(s.key, total=s.iters_total, status="pending") for s in run.stages}

        def on_update(current: RunResult) -> None:
            for s in current.stages:
                progress.update(tasks[s.index], completed=len(s.times_ms), status=s.status)

        run = run_all(run, probe, on_update=on_update, timeout_s=limits.stage_timeout_s, spawner=spawner)
    print_table(run, Console(width=max(Console().width, 120)))
    if args.out:
        with open(args.out, "w", newline="") as fh:
            fh.write(to_csv(run))
    if args.json_path:
        with open(args.json_path, "w") as fh:
            fh.write(to_json(run))
    if args.html:
        from .report import write_html
        write_html(run, args.html)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "probe":
            data = collect()
            print(json.dumps(data, indent=1) if args.json else _probe_text(data))
            return 0
        return cmd_run(args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # e.g. an --out path that cannot be written: a message, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _probe_text(data: dict) -> str:
    cuda = data.get("cuda") or {}
    apex = data.get("apex") or {}
    lines = [f"torch {data.get('torch')}  CUDA {data.get('cuda_runtime')}  driver {data.get('driver')}",
             f"GPU: {cuda.get('name', 'none')}  capability {cuda.get('capability')}",
             f"bf16 {data.get('bf16')}  fp16 {data.get('fp16')}  fused Adam {data.get('adam_fused')}",
             f"apex: {apex.get('status')} {apex.get('distribution') or ''}"]
    for ext, info in (apex.get("extensions") or {}).items():
        lines.append(f"  {ext}: found={info.get('found')} loadable={info.get('loadable')} "
                     f"smoke={(info.get('smoke') or {}).get('ok')} {info.get('error') or ''}")
    return "\n".join(lines)
