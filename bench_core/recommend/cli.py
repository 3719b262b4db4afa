"""`python -m bench_core recommend`: what to switch on for this model on this machine. Every flag is checked before
anything starts (a bad one exits 2 naming it and its limit, as `run` does); progress and its ETA go to stderr, the
answer to stdout (--json: the answer's JSON to a file); Ctrl-C keeps what was measured."""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace

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
from bench_core.levers.presets import family_errors
from bench_core.levers.registry import KERNEL_PACKAGES
from bench_core.levers.stage import Stage
from bench_core.machine import stage_costs
from bench_core.machine.probe import cached_probe
from bench_core.machine.stage_costs import StageCosts
from bench_core.models.families import FAMILIES, parts_family, validate
from bench_core.models.sources import config_from_args, model_source_args
from bench_core.recommend.answer import text
from bench_core.recommend.check import parse_check_set
from bench_core.recommend.from_sweep import parse_budget
from bench_core.recommend.memory import MemoryBudget, default_budget
from bench_core.recommend.planner import Progress
from bench_core.recommend.predict import (
    PREDICT_SHARE,
    EstimatePredictor,
    Predictor,
    TimedPredictor,
    at_batch,
    in_process_timer,
)
from bench_core.recommend.prune import process_seconds
from bench_core.recommend.search import Ask, recommend
from bench_core.recommend.space import lever_names, search_space

DEFAULT_BUDGET = "10m"
PREDICTORS = ("auto", "timed", "estimate")
MAX_BATCH_SIZES = 8      # a range's doublings at most: each is a whole copy of the search space


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m bench_core recommend", description="What to switch on: the fastest verified "
                      "combination of this machine's levers and batch sizes that fits, measured end to end")
    p.add_argument("--model", default=None, help=f"a model size: {', '.join(WORKLOADS)}")
    p.add_argument("--family", default=None, help=f"{', '.join(FAMILIES)} (default: the model size's)")
    p.add_argument("--device", default="auto", help="auto, cuda or cpu")
    model_source_args(p)
    for name in INT_FIELDS:
        if name != "batch_size":
            p.add_argument("--" + name.replace("_", "-"), dest=name, default=None,
                           help=FIELD_HELP[name].replace("%", "%%"))
    p.add_argument("--batch-size", default=None, help="N, or A:B for every doubling from A up to B")
    p.add_argument("--hold-tokens", action="store_true", help="tokens per step held at the model's: one batch "
                   "size only (the engine has no gradient accumulation to hold them across a range)")
    p.add_argument("--memory", default=None, help="GiB the training may use (default: free memory less a margin)")
    p.add_argument("--from", dest="from_key", default=None, help="your current setup as a stage key (default: "
                   "adam+<the family's norm>+fp32, the device's baseline)")
    p.add_argument("--budget", default=DEFAULT_BUDGET, help="wall time for measuring: 10m, 90s, 1h30m")
    p.add_argument("--tokens", default=None, help="your training run's tokens, for what the answer saves")
    p.add_argument("--gpu-price", dest="gpu_price", default=None, help="price per GPU-hour, for the cost saved")
    p.add_argument("--exclude", default="", help="levers to leave out, comma separated (e.g. compile)")
    p.add_argument("--predictor", default="auto", choices=PREDICTORS, help="how candidates are predicted before "
                   "any is measured: timed (each stage's one- and two-block steps, the sweep's predictor), estimate "
                   "(model FLOPs over the precision's rate: orders, bounds nothing); auto: timed on CUDA, estimate on "
                   "a CPU (docs/METHOD.md)")
    p.add_argument("--check-set", dest="check_set", default=None, help="stage keys, comma separated, measured end "
                   "to end after the search with the recommendation and the predictor's next best (their figures "
                   "go into --json; benchmarks/recommend_check.py compares them)")
    p.add_argument("--json", dest="json_path", default=None, help="write the answer's JSON here")
    p.add_argument("--db", default=None, help="history database (default: the dashboard's)")
    p.add_argument("--no-db", action="store_true", help="do not keep this recommendation in the history")
    return p


def _positive(name: str, raw: str | None, kind: type = float) -> float | None:
    if raw is None:
        return None
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigError(name, raw, f"must be a {'number' if kind is float else 'whole number'}") from None
    if value <= 0:
        raise ConfigError(name, raw, "must be greater than zero")
    return value


def _tokens(raw: str | None) -> int | None:
    """A training run's tokens: a whole number, written out or as 1e9."""
    value = _positive("tokens", raw)
    if value is not None and value != int(value):
        raise ConfigError("tokens", raw, "must be a whole number of tokens")
    return None if value is None else int(value)


def batch_sizes(raw: str | None, default: int, limit: int) -> tuple[int, ...]:
    """N, or A:B: A, 2A, 4A ... up to B (and B itself), each within the batch-size limit."""
    if raw is None:
        return (default,)
    parts = raw.split(":")
    if len(parts) > 2 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ConfigError("batch_size", raw, "write a positive whole number N or a range A:B")
    low, high = int(parts[0]), int(parts[-1])
    if low > high:
        raise ConfigError("batch_size", raw, "a range A:B needs A <= B")
    if high > limit:
        raise ConfigError("batch_size", raw, f"exceeds the limit of {limit}")
    sizes = []
    while low < high:
        sizes.append(low)
        low *= 2
    sizes.append(high)
    if len(sizes) > MAX_BATCH_SIZES:
        raise ConfigError("batch_size", raw, f"{len(sizes)} batch sizes exceed the limit of {MAX_BATCH_SIZES}")
    return tuple(sizes)


def checked_flags(args: argparse.Namespace) -> dict:
    """Every flag that needs no probe, checked; nothing has started."""
    if args.device not in ("auto", "cuda", "cpu"):
        raise ConfigError("device", args.device, "must be one of auto, cuda, cpu")
    check_outputs({"json": args.json_path, "db": args.db})
    left_out = [n.strip() for n in args.exclude.split(",") if n.strip()]
    unknown = [n for n in left_out if n not in lever_names()]
    if unknown:
        raise ConfigError("exclude", args.exclude, f"{', '.join(unknown)} is no lever; choose from "
                          f"{', '.join(sorted(lever_names()))}")
    if args.model is not None and args.model not in WORKLOADS:
        raise ConfigError("model", args.model, f"unknown model size; choose one of {', '.join(WORKLOADS)}")
    return {"budget_s": parse_budget(args.budget), "memory": _positive("memory", args.memory),
            "tokens": _tokens(args.tokens), "gpu_price": _positive("gpu_price", args.gpu_price),
            "from_stage": Stage.from_key(args.from_key) if args.from_key else None, "exclude": left_out}


def ask_of(args: argparse.Namespace, probe) -> Ask:
    flags = checked_flags(args)
    device = resolve_device(args.device, probe.cuda_available)
    cfg = config_from_args(args, device, device, skip=("batch_size",))   # a batch size may be a range: ask_for
    return ask_for(cfg, args, probe, flags)


def ask_for(cfg: BenchConfig, args: argparse.Namespace, probe, flags: dict | None = None) -> Ask:
    """The ask for a model already built (the CLI's flags, or the dashboard's form): its batch sizes, --from,
    memory and the search space, each checked against its limit."""
    flags = flags if flags is not None else checked_flags(args)
    limits = load_limits()
    device = resolve_device(cfg.device, probe.cuda_available)
    cfg = replace(cfg, device=device)
    batches = batch_sizes(args.batch_size, cfg.batch_size, limits.max_batch_size)
    if args.hold_tokens and len(batches) > 1:
        raise ConfigError("hold_tokens", args.batch_size, "tokens per step are held only at one batch size: give "
                          "--batch-size N (the engine has no gradient accumulation)")
    cfg = replace(cfg, batch_size=batches[0])
    validate(replace(cfg, batch_size=min(batches)), limits, probe.cuda_available, {})
    family = parts_family(cfg)   # an HF Llama's stages name its RMSNorm, as its ladders do
    asked = flags["from_stage"] or Stage()
    from_stage = asked.for_family(family)
    if from_stage is None:
        raise ConfigError("from", asked.key, f"has no form for the {family} family of this model")
    for error in family_errors([from_stage], family):
        raise error
    why_not = from_stage.unavailable_reason(probe, device)
    if why_not:
        raise ConfigError("from", from_stage.key, f"cannot run here: {why_not}")
    budget = MemoryBudget(flags["memory"], "given by --memory") if flags["memory"] else \
        default_budget(probe.free_bytes.get(device), device)
    held = f"held at {cfg.tokens_per_step:,} (batch {cfg.batch_size} x sequence {cfg.seq_len})" \
        if len(batches) == 1 else (f"not held: batch {batches[0]} to {batches[-1]} x sequence {cfg.seq_len}; "
                                   "candidates compared per token (a larger batch also changes the optimisation)")
    return Ask(cfg, device, probe.gpu_name, search_space(probe, device, family, batches, flags["exclude"]),
               from_stage, flags["budget_s"], budget, flags["tokens"], flags["gpu_price"], held)


def predictor_of(name: str, ask: Ask, probe, costs: StageCosts, say: Callable[[str], None] | None = None
                 ) -> Predictor:
    """timed on CUDA by default; on a CPU the estimate (docs/METHOD.md: the timing costs about what measuring does
    there, and a shared CPU's shallow steps are too noisy to drop a candidate on). Timing stops where it costs more
    than measuring end to end (TimedPredictor)."""
    estimate = EstimatePredictor(ask.cfg, probe, ask.device)
    if name == "estimate" or (name == "auto" and ask.device != "cuda"):
        return estimate
    share = None if ask.budget_s is None else ask.budget_s * PREDICT_SHARE
    return TimedPredictor(in_process_timer(ask.cfg, ask.device), estimate, share,
                          process_cost=lambda c, p: process_seconds(at_batch(ask.cfg, c.batch_size), c, p, costs),
                          on_timed=say)


def cmd_recommend(args: argparse.Namespace) -> int:
    from bench_core.recommend.measure import engine_measure
    checked_flags(args)   # before the probe: a bad flag starts nothing
    # every lever is a candidate, so every kernel package is probed: without one a lever reads "not probed" and
    # is left out of the search
    probe, _ = cached_probe(packages=KERNEL_PACKAGES)
    ask = ask_of(args, probe)
    started = time.monotonic()
    print(f"recommend: {len(ask.space.candidates)} candidates "
          f"({len(ask.space.stages)} stages x {len(ask.space.batch_sizes)} batch sizes), budget "
          f"{args.budget}", file=sys.stderr, flush=True)

    def say(p: Progress) -> None:
        eta = f", about {p.eta_s:.0f} s left" if p.eta_s is not None else ""
        print(f"[{time.monotonic() - started:6.1f} s] {p.text} ({p.measured_processes} processes so far{eta})",
              file=sys.stderr, flush=True)
    check = parse_check_set(args.check_set, ask.family, probe, ask.device) if args.check_set else ()
    costs = stage_costs.load(ask.device)
    predictor = predictor_of(args.predictor, ask, probe, costs,
                             lambda line: print(f"[{time.monotonic() - started:6.1f} s] {line}", file=sys.stderr,
                                                flush=True))
    rec, run = recommend(ask, predictor, engine_measure(ask.cfg, probe, load_limits().stage_timeout_s), say,
                         costs=costs, check_stages=check)
    if not args.no_db:
        from bench_core.recommend.history import RecommendationStore
        from bench_core.results.store import Store
        if run is not None:
            Store(args.db).save_run(run)
        rid = RecommendationStore(args.db).save(rec)
        rec = replace(rec, recommendation_id=rid)
        print(f"saved to the history: recommendation {rid}", file=sys.stderr)
    print(text(rec))
    if args.json_path:
        tmp = args.json_path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(rec.to_json())
        os.replace(tmp, args.json_path)
    return 0


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return exit_code_of(lambda: cmd_recommend(args))
