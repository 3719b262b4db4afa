"""``python -m bench_core apex doctor|build``: the argparse wiring and the build's steps, in order."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable

from bench_core.apex_build.build import (
    BENCH_EXTENSIONS,
    ApexBuildError,
    check_source,
    default_build_dir,
    plan_build,
    resolve_source,
    run_build,
    stage_source,
)
from bench_core.apex_build.doctor import (
    BuildEnvironment,
    Check,
    Verdict,
    blocking,
    diagnose,
    host_facts,
    render,
    target_arch,
)
from bench_core.apex_build.facts import probe_in_fresh_process
from bench_core.config.bench_config import ConfigError
from bench_core.machine.probe import APEX_EXTENSIONS


def say_now(line: str) -> None:
    print(line, flush=True)  # progress must show while pip runs, also when stdout is a log file


def add_parser(sub: argparse._SubParsersAction) -> None:
    apex = sub.add_parser("apex", help="NVIDIA Apex: build it from source (apex build), check its build (apex doctor)")
    verbs = apex.add_subparsers(dest="apex_command", required=True)
    doctor = verbs.add_parser("doctor", help="check torch, nvcc, the host compiler, the GPU and Apex's extensions")
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")
    build = verbs.add_parser("build", help="build Apex's extensions for this GPU into this environment, then probe")
    build.add_argument("--src", help="an NVIDIA/apex checkout (default: $APEX_SRC, else a clone of the pinned commit)")
    build.add_argument("--full", action="store_true", help="build every extension (upstream's full build), not only "
                       f"{', '.join(BENCH_EXTENSIONS)}")
    build.add_argument("--target", help="install into this folder (pip --target) instead of the environment")
    for p in (doctor, build):
        p.add_argument("--build-dir", help="staging and log folder (default: $APEX_BUILD_DIR, else "
                       "~/.cache/bench_core/apex-build)")
    doctor.add_argument("--target", help="also look for Apex in this folder (a build made with --target)")


def _build_dir(args: argparse.Namespace) -> str:
    return os.path.abspath(args.build_dir or default_build_dir(os.environ))


def _target(args: argparse.Namespace) -> str | None:
    if not args.target:
        return None
    target = os.path.abspath(args.target)
    if os.path.exists(target) and not os.path.isdir(target):
        raise ConfigError("target", args.target, "must be a folder (or not exist yet)")
    return target


def examine(build_dir: str, target: str | None = None, after_build: bool = False) -> tuple[BuildEnvironment,
                                                                                              list[Check]]:
    env = BuildEnvironment.of(probe_in_fresh_process(extra_path=target), host_facts(build_dir))
    return env, diagnose(env, after_build)


def cmd_doctor(args: argparse.Namespace, say: Callable[[str], None] = say_now) -> int:
    _, checks = examine(_build_dir(args), _target(args))
    say(json.dumps([c.to_dict() for c in checks], indent=1) if args.json else render(checks))
    return 1 if any(c.verdict is Verdict.FAIL for c in checks) else 0


def cmd_build(args: argparse.Namespace, say: Callable[[str], None] = say_now) -> int:
    start = time.monotonic()
    build_dir, target = _build_dir(args), _target(args)
    if args.src:
        check_source(args.src, "src")  # bad input fails before the doctor's seconds
    say("apex build: checking the environment first (python -m bench_core apex doctor)")
    env, checks = examine(build_dir, target)
    say(render(checks))
    refused = blocking(checks)
    if refused:
        say("\nrefusing to build; fix these first:")
        for check in refused:
            say(f"  {check.name}: {check.fix}")
        return 1
    source = resolve_source(args.src, os.environ, build_dir)
    arch = target_arch(env) or ""  # check_gpu refused when there is neither a GPU nor TORCH_CUDA_ARCH_LIST
    plan = plan_build(source, build_dir, arch, full=args.full, target=target)
    if plan.fallback_reason:
        say(f"\nnarrowing NOT applied: {plan.fallback_reason}; running upstream's full build (every extension, "
            "slower)")
    elif plan.extensions:
        say(f"\nbuilding only {', '.join(plan.extensions)} (--full builds every extension)")
    else:
        say("\nbuilding every extension (--full)")
    say(f"source {source}, staged at {plan.stage_dir} (the checkout itself is not modified)")
    say(f"command: {plan.command_line()}")
    stage_source(plan)
    outcome = run_build(plan, os.path.join(build_dir, "apex_build.log"), say=say)
    if outcome.returncode != 0:
        say("\n".join(outcome.tail[-12:]))
        say(f"apex build FAILED (pip exit {outcome.returncode}) after {outcome.elapsed_s:.0f} s; full log: "
            f"{outcome.log_path}")
        return 1
    say(f"compiled and installed in {outcome.elapsed_s:.0f} s; probing the result in a fresh process")
    after_env, after = examine(build_dir, target, after_build=True)
    result = [c for c in after if c.name == "apex distribution" or c.name in APEX_EXTENSIONS]
    say(render(result))
    ready = not any(c.verdict is Verdict.FAIL for c in result)
    smoked = sum(c.verdict is Verdict.OK for c in result if c.name in APEX_EXTENSIONS)
    say(f"Apex {'ready' if ready else 'NOT ready'}: {after_env.probe.apex.label}, {smoked}/{len(APEX_EXTENSIONS)} "
        f"extensions smoke-tested on the GPU; total {time.monotonic() - start:.0f} s")
    return 0 if ready else 1


def run(args: argparse.Namespace) -> int:
    try:
        return cmd_doctor(args) if args.apex_command == "doctor" else cmd_build(args)
    except ApexBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
