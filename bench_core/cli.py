"""``python -m bench_core run|probe|import|components|sweep``: the engine from a terminal."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any

from bench_core.apex_build import commands as apex_commands
from bench_core.cluster.address import check_address
from bench_core.cluster.executor import Executor
from bench_core.cluster.nodes import Retry
from bench_core.config.bench_config import (
    FIELD_HELP,
    INT_FIELDS,
    WORKLOADS,
    BenchConfig,
    ConfigError,
    check_outputs,
    exit_code_of,
    resolve_device,
)
from bench_core.config.settings import load_limits
from bench_core.levers.presets import DEFAULT_PRESET, PRESETS, across_gpus, default_preset, family_errors, preset
from bench_core.levers.registry import KERNEL_PACKAGES
from bench_core.levers.stage import Stage
from bench_core.machine import stage_costs
from bench_core.machine.packages import KernelPackage
from bench_core.machine.probe import Probe, cached_probe, has_cached_probe
from bench_core.machine.telemetry import has_nvidia_gpu
from bench_core.models.families import FAMILIES, parts_family, validate
from bench_core.models.sources import config_from_args, model_source_args
from bench_core.results.eta import run_estimate
from bench_core.results.examples import EXAMPLES
from bench_core.results.phase import Phase, cold_compile_s, compile_text, phase
from bench_core.results.records import STAGE_FINISHED, RunResult, StageResult, Status
from bench_core.results.summary import summarize
from bench_core.results.table import print_probe, print_table
from bench_core.run.processes import SpareWorkers
from bench_core.run.runner import RunHooks, new_run, run_all

SPARE_WORKERS_GPU = 4   # started with the probe on a GPU host; the pool starts the rest after it (runner)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench_core", description="Staged transformer training benchmark")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a preset of stages")
    run.add_argument("--preset", default=None, help=f"one of {', '.join(PRESETS)} (default: "
                     + ", ".join(f"{p} on {d}" for d, p in DEFAULT_PRESET.items()) + ")")
    run.add_argument("--stages", default=None, help="a custom ladder instead of a preset: stage keys, comma "
                     "separated, as the dashboard and the CSV write them (e.g. adam+layernorm+fp32,"
                     "adam-fused+layernorm+bf16+compile); a kind left out takes its baseline lever")
    run.add_argument("--model", default=None, help=f"a model size: {', '.join(WORKLOADS)}")
    run.add_argument("--device", default="auto", help="auto, cuda or cpu")
    run.add_argument("--family", default=None, help=f"{', '.join(FAMILIES)} (default: the model size's, else gpt)")
    model_source_args(run)
    for name in INT_FIELDS:
        run.add_argument("--" + name.replace("_", "-"), dest=name, type=str, default=None,
                         help=FIELD_HELP[name].replace("%", "%%"))   # argparse formats help with %
    run.add_argument("--gpus", default=None, help="GPU counts, comma separated (e.g. 1,2,4): each stage runs at "
                     "each count, through torchrun + DDP when > 1 (gloo processes on CPU); default 1")
    run.add_argument("--out", help="write the results CSV here")
    run.add_argument("--json", dest="json_path", help="write the full results JSON here")
    run.add_argument("--html", help="write a static HTML report with the dashboard's charts")
    _db_args(run)
    run.add_argument("--reprobe", action="store_true", help="measure the machine again instead of the cached probe")
    run.add_argument("--cluster", default=None, metavar="ADDRESS", help="run on a node of this Ray cluster "
                     "(HOST:PORT or ray://HOST:PORT, as BENCH_RAY_ADDRESS; docs/CLUSTER.md)")
    run.add_argument("--machine", default=None, help="with --cluster: the node to run on (its machine-NAME "
                     "resource); may be left out when the cluster has one node")
    run.add_argument("--retry", default=None, choices=[r.value for r in Retry if r is not Retry.NEVER],
                     help="with --cluster: if the node is lost mid-run, run the stages not yet measured on another "
                     "node of the same GPU type (same-gpu) or on any other node (any)")
    run.add_argument("--quiet", action="store_true", help="no progress bars: one plain line per stage round as it ends")
    run.add_argument("--isolate-host", action="store_true", help="also hold the progress display while a stage is "
                     "timed (its quiet window): it is brought up to date as each window closes")
    probe = sub.add_parser("probe", help="report what this machine can run")
    probe.add_argument("--json", action="store_true", help="print JSON")
    imp = sub.add_parser("import", help="import a CSV or JSON result into the history (exit 2 if rejected)")
    imp.add_argument("file", nargs="?", help="a CSV or JSON written by run --out/--json, sweep --json, components")
    imp.add_argument("--example", help=f"instead of a file, an example GPU run shipped with the package: "
                     f"{', '.join(EXAMPLES)} (bench_core/examples/README.md)")
    _db_args(imp, allow_none=False)
    apex_commands.add_parser(sub)
    sub.add_parser("sweep", add_help=False,
                   help="a lever's speedup across model shapes, predicted and measured: where it starts to pay "
                        "(python -m bench_core sweep --help)")
    sub.add_parser("recommend", add_help=False, help="what to switch on here: levers and batch size, measured "
                   "(python -m bench_core recommend --help)")
    sub.add_parser("components", add_help=False,
                   help="the optimizer step and LayerNorm alone, against this GPU's measured ceilings "
                        "(python -m bench_core components --help)")
    return p


def _db_args(p: argparse.ArgumentParser, allow_none: bool = True) -> None:
    p.add_argument("--db", help="history database (default: the dashboard's, $BENCH_DB or ~/.local/share)")
    if allow_none:
        p.add_argument("--no-db", action="store_true", help="do not save this run to the history")


def build_config(args: argparse.Namespace, probe: Probe) -> BenchConfig:
    return config_from_args(args, resolve_device(args.device, probe.cuda_available), args.device)


def chosen_stages(args: argparse.Namespace, family: str, device: str) -> tuple[str, list[Stage]]:
    """(preset name, stages): a preset at each --gpus count (none named: the device's default), or --stages'
    keys as given ("custom")."""
    if args.stages is None:
        counts = [g.strip() for g in (args.gpus or "1").split(",") if g.strip()]
        name = args.preset or default_preset(device)
        return name, across_gpus(preset(name, family), counts)
    if args.preset is not None:
        raise ConfigError("stages", args.stages, "give either --stages or --preset, not both")
    if args.gpus is not None:
        raise ConfigError("gpus", args.gpus, "with --stages each key names its own GPU count (e.g. "
                          "adam+layernorm+fp32+gpus2)")
    keys = [k.strip() for k in args.stages.split(",") if k.strip()]
    if not keys:
        raise ConfigError("stages", args.stages, "name at least one stage key (e.g. adam+layernorm+fp32)")
    limit = load_limits().max_stages_per_job
    if len(keys) > limit:
        raise ConfigError("stages", args.stages, f"{len(keys)} stages exceed the limit of {limit} stages per job")
    return "custom", [Stage.from_key(k) for k in keys]


def ladder_packages(args: argparse.Namespace) -> tuple[KernelPackage, ...]:
    """The kernel packages the chosen ladder can use, on either device and in any family: a run's probe imports
    only these, since importing every kernel package is the slowest part of a cold probe. A bad key or preset
    raises here, before anything starts; a family-bound preset's refusal is left to the run's own check."""
    if args.stages is not None:
        return tuple(dict.fromkeys(p for stage in chosen_stages(args, "gpt", "cpu")[1] for p in stage.packages))
    found: dict[KernelPackage, None] = {}
    for device in ("cuda", "cpu"):
        for family in FAMILIES:
            try:
                stages = chosen_stages(args, family, device)[1]
            except ConfigError as exc:
                if exc.field != "preset" or (args.preset or default_preset(device)) not in PRESETS:
                    raise
                continue
            found.update((p, None) for stage in stages for p in stage.packages)
    return tuple(found)


def start_spares(args: argparse.Namespace) -> SpareWorkers:
    """Worker processes started before the rest of the run is set up, so their torch import overlaps it (after a
    probe that had to be measured, never beside it: cmd_run). They open no CUDA context ahead: a
    worker touches the GPU only when the runner lets it build (run.runner), never beside a timed stage."""
    gpu = args.device != "cpu" and has_nvidia_gpu()
    return SpareWorkers(SPARE_WORKERS_GPU if gpu else 1, env=None, warm_cuda=False)


def open_store(path: str | None) -> Any:
    from bench_core.results.store import Store
    return Store(path)


@dataclass(frozen=True)
class ClusterTarget:
    executor: Executor
    machine: str
    retry: Retry


def cluster_target(args: argparse.Namespace) -> ClusterTarget | None:
    """--cluster's executor (the dashboard's, connected) and the node it runs on; None without --cluster."""
    if args.cluster is None:
        for flag in ("machine", "retry"):
            if getattr(args, flag) is not None:
                raise ConfigError(flag, getattr(args, flag), "needs --cluster ADDRESS")
        return None
    from bench_core.cluster.ray_executor import RayExecutor
    executor = RayExecutor(check_address(args.cluster, "cluster"))
    try:
        machine = args.machine or executor.only_node()
        executor.node(machine)
    except ValueError as exc:
        raise ConfigError("machine", args.machine, str(exc).removeprefix("machine: ")) from None
    return ClusterTarget(executor, machine, Retry(args.retry or Retry.NEVER.value))


def cmd_run(args: argparse.Namespace) -> int:
    from rich.console import Console
    console = Console(stderr=True)
    if args.device not in ("auto", "cuda", "cpu"):
        raise ConfigError("device", args.device, "must be one of auto, cuda, cpu")
    check_outputs({"out": args.out, "json": args.json_path, "html": args.html, "db": args.db})
    packages = ladder_packages(args)
    target = cluster_target(args)
    if target is not None:  # the node runs the stages, on its own probe: nothing starts here
        return _run(args, console, SpareWorkers(0, env=None, warm_cuda=False), packages, target)
    # A probe to measure goes first: a worker importing torch beside its matmuls slowed them about seven-fold on 2
    # cores, and every estimate divides by that rate. A cached probe measures nothing, so the worker starts ahead.
    probed = None if has_cached_probe(packages) and not args.reprobe else \
        cached_probe(refresh=args.reprobe, packages=packages)
    spares = start_spares(args)
    try:
        return _run(args, console, spares, packages, probed=probed)
    finally:
        spares.close()


def _run(args: argparse.Namespace, console: Any, spares: SpareWorkers, packages: tuple[KernelPackage, ...],
         target: ClusterTarget | None = None, probed: tuple[Probe, bool] | None = None) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    node_probe = target.executor.node_probe(target.machine) if target is not None else None
    probe, cached = (node_probe, True) if node_probe is not None else \
        probed or cached_probe(refresh=args.reprobe, packages=packages)
    cfg = build_config(args, probe)
    name, stages = chosen_stages(args, parts_family(cfg), resolve_device(cfg.device, probe.cuda_available))
    limits = load_limits()
    validate(cfg, limits, probe.cuda_available, probe.free_bytes)
    for error in family_errors(stages, parts_family(cfg)):
        raise error
    store = None if args.no_db else open_store(args.db)
    run = replace(new_run(cfg, stages, probe, name), node=target.machine if target is not None else None)
    console.print(f"[bold]{name}[/] · {len(stages)} stages × {cfg.repeats} round(s) · {run.device} {run.gpu}"
                  + (f" · node {run.node}" if run.node else "")
                  + f" · {args.model or 'custom shape'} · probe {'cached' if cached else 'measured'}", highlight=False)
    if store is not None:
        store.save_run(run)
    costs = stage_costs.load(run.device)
    console.print(run_estimate(run, costs).text(), highlight=False)
    files = RunFiles(args.out, args.json_path)
    with Progress(TextColumn("{task.description:<40}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console,
                  disable=args.quiet) as progress:
        tasks = {s.index: progress.add_task(s.key, total=s.iters_total * cfg.repeats, status="pending")
                 for s in run.stages}

        def on_update(current: RunResult) -> None:
            for s in current.stages:
                status = (compile_text(s, costs, time.time(), cold_s=cold_compile_s(current))
                          if phase(s) is Phase.COMPILING else s.status.value)
                progress.update(tasks[s.index], completed=len(s.times_ms), status=status)

        # after each stage's round: the history, then the files, then the line (once it shows, the files hold it)
        done = [hook for hook in (store.save_stage if store is not None else None, files.write_round,
                                  RoundLog(cfg.repeats) if args.quiet else None) if hook is not None]

        def on_stage_done(current: RunResult, stage: StageResult) -> None:
            for hook in done:
                hook(current, stage)

        hooks = RunHooks(on_update=on_update, timeout_s=limits.stage_timeout_s, spares=spares,
                         on_stage_done=on_stage_done, isolate_host=args.isolate_host)
        run = target.executor.run_all(run, probe, hooks, target.retry) if target is not None else \
            run_all(run, probe, hooks)
    if store is not None:
        store.save_run(run)
    print_table(summarize(run))
    files.write(run)
    if args.html:
        from bench_core.results.report import write_html
        write_html(run, args.html)
    if store is not None:
        print(f"saved to the history: {store.path} (run {run.run_id})", file=sys.stderr)
    return 0


@dataclass(frozen=True)
class RunFiles:
    """--out and --json, rewritten whole after every stage round and at the end: a killed run leaves the rounds
    that finished, and never a half-written file."""
    csv_path: str | None
    json_path: str | None

    def write(self, run: RunResult) -> None:
        from bench_core.results.formats import to_csv, to_json
        for path, render in ((self.csv_path, to_csv), (self.json_path, to_json)):
            if path:
                write_atomic(path, render(run))

    def write_round(self, run: RunResult, stage: StageResult) -> None:
        self.write(run)


def write_atomic(path: str, text: str) -> None:
    """PATH.tmp in the same folder, then renamed over PATH: a reader sees the old file or the new, whole."""
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as fh:
        fh.write(text)
    os.replace(tmp, path)


@dataclass
class RoundLog:
    """--quiet's progress: one plain stdout line per stage round as it ends, so a killed run's log says how far it
    got. Its figures are the summary's, as the table's."""
    repeats: int
    started: float = field(default_factory=time.monotonic)
    rounds: dict[int, int] = field(default_factory=dict)   # stage index -> rounds ended so far

    def __call__(self, run: RunResult, stage: StageResult) -> None:
        print(self.line(run, stage), flush=True)

    def line(self, run: RunResult, stage: StageResult) -> str:
        head = f"[{time.monotonic() - self.started:6.1f} s] {stage.key}"
        if stage.started_at is None:  # never ran: unavailable here, or never reached
            return f"{head}: {stage.status.value}: {stage.reason}"
        self.rounds[stage.index] = number = self.rounds.get(stage.index, 0) + 1
        head += f" round {number}/{self.repeats}"
        if stage.status in STAGE_FINISHED and stage.status != Status.OK:
            return f"{head}: {stage.status.value}: {stage.reason}"
        medians = summarize(run).stage(stage.index).round_medians
        warmup = stage.warmups[-1].seconds if stage.warmups else stage.warmup_s
        return (f"{head}: ok, {stage.rounds[-1] if stage.rounds else 0} steps"
                + (f", median {medians[-1]:,.2f} ms" if medians else "")
                + (f", warm-up {warmup:.1f} s" if warmup is not None else ""))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["components"]:  # its own parser and entry point
        from bench_core.components.cli import main as components_main
        return components_main(argv[1:])
    if argv[:1] == ["recommend"]:
        from bench_core.recommend.cli import main as recommend_main
        return recommend_main(argv[1:])
    if argv[:1] == ["sweep"]:
        from bench_core.sweep_cli import main as sweep_main
        return sweep_main(argv[1:])
    args = parser().parse_args(argv)
    from bench_core.import_cli import cmd_import
    commands = {"probe": cmd_probe, "import": cmd_import, "apex": apex_commands.run}
    return exit_code_of(lambda: commands.get(args.command, cmd_run)(args))


def cmd_probe(args: argparse.Namespace) -> int:
    probe, _ = cached_probe(refresh=True, packages=KERNEL_PACKAGES)
    print(json.dumps(probe.to_dict(), indent=1, default=str) if args.json else print_probe(probe))
    return 0
