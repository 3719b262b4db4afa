"""Does the tool disturb what it measures? A bare training loop against the engine, alternating, on one GPU.

    python benchmarks/quiet_host.py --pairs 3 --out DIR          # both cases, bare then engine, three times each
    python benchmarks/quiet_host.py --pairs 3 --pinned --out DIR # each pair also a bare loop pinned as the engine pins
    python benchmarks/quiet_host.py --pairs 3 --siblings 7 --out DIR  # ...and one beside 7 stopped stand-in workers
    python benchmarks/quiet_host.py --pairs 3 --bare-processes 3 --out DIR  # each bare loop as 3 processes, pooled
    python benchmarks/quiet_host.py bare --stage KEY [--pinned] [shape args]  # one bare loop, its JSON on stdout
    python benchmarks/quiet_host.py judge FILE...   # kept quiet_host.json files judged again, all pairs of a case

The bare loop is one process and nothing else: the engine's own model and step (run.step.build_stage), 20 warm-up
steps and 2 s, then the engine's timed loop (run.step.measure: CUDA events, the same stopping rule), with no worker
pool, no parent reading events, no other process. The engine is `python -m bench_core run` on the same shape, three
processes a stage (the CUDA default), so its look-ahead workers are started while the first is timed: for the Apex
case the seed's four stages (each engine run is also a run of the seed ladder, its wall time a time to result), for
the native case the stage alone.

Each pair is (bare, engine) run back to back; the figure is engine median / bare median, each the median of all
timed steps of its run. A bare loop alone moves by up to a quarter from one process to the next on an H100 host
(BENCHMARKS), so with --bare-processes N each bare loop is N processes pooled as the engine pools its three, and the
loops' kinds (plain, pinned, beside siblings) alternate process by process. With --pinned each pair also runs a bare
loop pinned as the engine pins its timed process (every thread on all cores but the first, torch's threads capped to
them: run.quiet), the two bare loops in turn (unpinned first in odd pairs, pinned first in even ones), and a second
engine run with its timed processes unpinned (BENCH_PIN_TIMED=0; the two engine runs in the other order): whether
the pinning alone moves the step. Each bare
loop records what the engine's quiet windows do: the host's steal time and its own busy threads. The target:
at most 1.03 on the launch-bound stages (the host sets their pace, so a process of ours working beside them would
show here first). Which runs were launch-bound is the engine's own verdict from each run's profiled steps
(measure.breakdown), recorded per pair and counted at the end.

With --siblings K each pair also runs the bare loop beside K stand-ins for look-ahead workers: each imports torch,
makes its CUDA context and builds the stage, then is stopped (SIGSTOP) through the timed steps, as the engine stops
its workers. Before the plain bare loop in even pairs, after it in odd ones (turn by turn with --bare-processes). It
asks one thing: whether processes of ours that exist but do no work slow a launch-bound step (benchmarks/
alone_vs_paused.py had the engine's processes timed with none left beside them faster in 7 of 9 launch-bound runs,
p 0.18; beside seven, the bare loop was the slower in 3 of 6 process pairs: BENCHMARKS).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from bench_core.measure import stats
from bench_core.measure.breakdown import Bound
from bench_core.run.quiet import PIN_TIMED_ENV

# (name, stage key, the stages the engine runs, CLI shape arguments): the seed's Apex BF16 stage on gpt2-small, timed
# by the engine inside the seed's own four stages (so each engine run is also a run of the seed ladder, with its
# look-ahead workers started for the other stages), and native BF16 on a 12 x 1536 GPT at batch 16 x 256 tokens;
# both launch-bound on an H100/H200 host
SEED4 = ("adam+layernorm+fp32,apex-fusedadam+layernorm+fp32,apex-fusedadam+apex-fusedln+fp32,"
         "apex-fusedadam+apex-fusedln+bf16")
CASES = (
    ("apex_bf16_gpt2_small", "apex-fusedadam+apex-fusedln+bf16", SEED4, ["--model", "gpt2-small"]),
    # the same at batch 2: on an H100 the batch-8 stage is mostly GPU-bound (95.8-96.4% busy, no host wait in all ten
    # runs of calls 53 and 55), so it cannot show a disturbance of the host there; a quarter of the GPU work can
    ("apex_bf16_gpt2_small_b2", "apex-fusedadam+apex-fusedln+bf16", SEED4, ["--model", "gpt2-small",
                                                                          "--batch-size", "2"]),
    ("native_bf16_d1536", "adam-fused+layernorm+bf16", "adam-fused+layernorm+bf16",
     ["--model", "gpt2-small", "--depth", "12", "--width", "1536", "--heads", "24", "--seq-len", "256",
      "--batch-size", "16", "--vocab-size", "32000"]),
)
DEFAULT_CASES = ("apex_bf16_gpt2_small", "native_bf16_d1536")   # the two; the others by --cases
WARMUP_STEPS, WARMUP_MIN_S = 20, 2.0


def build(stage_key: str, shape: list[str]):
    """The engine's own model and step for `stage_key` at `shape`, as a worker builds it; (torch, built)."""
    import torch

    from bench_core.cli import build_config, parser
    from bench_core.levers.stage import Stage
    from bench_core.run.processes import StageJob
    from bench_core.run.step import build_stage

    args = parser().parse_args(["run", "--stages", stage_key, *shape])
    cuda = torch.cuda.is_available()
    cfg = build_config(args, SimpleNamespace(cuda_available=cuda))  # the probe is read for this alone
    job = StageJob(config=cfg, stage=Stage.from_key(stage_key), device="cuda" if cuda else "cpu", profile=False)
    return torch, build_stage(job, job.stage, torch)


def sibling(stage_key: str, shape: list[str]) -> None:
    """A look-ahead worker's stand-in: torch imported, its CUDA context made and the stage built, then idle until
    its stdin closes. The bare loop stops it (SIGSTOP) while it times, as the engine stops its workers."""
    build(stage_key, shape)
    print("ready", flush=True)
    sys.stdin.read()


def start_siblings(n: int, stage_key: str, shape: list[str]) -> list[subprocess.Popen]:
    procs = [subprocess.Popen([sys.executable, __file__, "sibling", "--stage", stage_key, *shape],  # noqa: S603
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for _ in range(n)]
    for proc in procs:   # built in parallel, as the engine's workers are; each stopped once ready
        line = "-"
        while line and line.strip() != "ready":
            line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"sibling {proc.pid} exited before it was built")
        os.kill(proc.pid, signal.SIGSTOP)
    return procs


def state_of(pid: int) -> str:
    """The process's state letter from /proc (T: stopped)."""
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def end_siblings(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        os.kill(proc.pid, signal.SIGCONT)
        proc.stdin.close()
    for proc in procs:
        proc.wait(timeout=60)


def bare(stage_key: str, shape: list[str], pinned: bool = False, siblings: int = 0) -> dict:
    """One bare loop in this process: build, warm up, time; the steps' milliseconds. `pinned`: as the engine pins
    its timed process, all cores but the first, torch's threads capped to them. `siblings`: that many stand-ins for
    look-ahead workers (each with its CUDA context and built stage) exist beside it, stopped, while it times."""
    from bench_core.run.quiet import allowed_cores, pin, read_host, read_threads, thread_use
    from bench_core.run.step import measure

    procs = start_siblings(siblings, stage_key, shape) if siblings else []
    try:
        import torch
        cores = allowed_cores()[1:] if pinned else ()
        if cores:
            torch.set_num_threads(min(torch.get_num_threads(), len(cores)))
        torch, built = build(stage_key, shape)
        if cores:
            pin(os.getpid(), cores)
        if built.capture is not None:
            built.capture()
        start, steps = time.perf_counter(), 0
        while steps < WARMUP_STEPS or time.perf_counter() - start < WARMUP_MIN_S:
            built.step()
            steps += 1
        built.sync()
        states = [state_of(p.pid) for p in procs]
        (_, steal0), threads0 = read_host(), read_threads(os.getpid())  # what the engine's quiet window records
        timed = measure(built, lambda s: None, torch)
        (_, steal1), threads1 = read_host(), read_threads(os.getpid())
    finally:
        end_siblings(procs)
    tick = 1 / os.sysconf("SC_CLK_TCK")
    times = [s.ms for s in timed.steps]
    return {"stage": stage_key, "shape": shape, "pinned_cores": list(cores), "torch_threads": torch.get_num_threads(),
            "warmup_steps": steps, "times_ms": times, "median_ms": statistics.median(times),
            "siblings": siblings, "sibling_states": states,
            "steal_s": None if steal0 is None or steal1 is None else round((steal1 - steal0) * tick, 4),
            "timed_threads": [vars(t) for t in thread_use(threads0, threads1, tick, os.getpid())]}


def engine(stage_key: str, stages: str, shape: list[str], json_path: Path, root: Path | None = None,
           pinned: bool = True) -> dict:
    """The engine's run of `stages` (from `root`'s bench_core when given: an older tree, for a before/after;
    `pinned=False`: its timed processes left unpinned); the stage's median over every timed step, each process's
    median, and the run's wall time."""
    cmd = [sys.executable, "-m", "bench_core", "run", "--quiet", "--no-db", "--stages", stages, *shape,
           "--json", str(json_path)]
    env = {**os.environ, **({"PYTHONPATH": f"{root.resolve()}:{os.environ.get('PYTHONPATH', '')}"} if root else {}),
           **({} if pinned else {PIN_TIMED_ENV: "0"})}
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env, cwd=root)  # noqa: S603 (our own argv)
    wall = time.perf_counter() - start
    data = json.loads(json_path.read_text())
    stage = next(s for s in data["stages"] if s["key"] == stage_key)
    rounds, times = stage.get("rounds") or [len(stage["times_ms"])], stage["times_ms"]
    per_process, at = [], 0
    for n in rounds:
        per_process.append(statistics.median(times[at:at + n]))
        at += n
    return {"median_ms": statistics.median(times), "process_medians_ms": per_process, "wall_s": wall,
            "bound": bound_of(json_path, stage_key),
            "tool_busy_s": {s["key"]: [q.get("tool_busy_s") for q in s.get("quiet") or []] for s in data["stages"]},
            "windows": [{k: q.get(k) for k in ("round", "steal_s", "host_busy_s", "timed_cores", "timed_threads")}
                        for q in stage.get("quiet") or []]}


def bound_of(json_path: Path, stage_key: str) -> dict:
    """The engine's own verdict on the stage from its profiled steps (measure.breakdown): the target is judged on
    the launch-bound ones."""
    from bench_core.results.formats import parse_upload
    from bench_core.results.summary import summarize
    run = parse_upload(json_path.name, json_path.read_bytes(), max_bytes=64 * 2**20)[0]
    b = next(s.bottleneck for s in summarize(run).stages if s.result.key == stage_key)
    return {"verdict": str(b.verdict), "busy": b.busy, "host_wait_share": b.host_wait_share}


def bare_process(key: str, shape: list[str], pinned: bool, path: Path, siblings: int = 0) -> dict:
    start = time.perf_counter()
    raw = subprocess.run([sys.executable, __file__, "bare", "--stage", key, *(["--pinned"] if pinned else []),  # noqa: S603
                          *(["--siblings", str(siblings)] if siblings else []), *shape],
                         check=True, capture_output=True, text=True).stdout
    loop = {**json.loads(raw), "wall_s": round(time.perf_counter() - start, 2)}
    path.write_text(json.dumps(loop))
    return loop


def pooled(loops: list[dict]) -> dict:
    """Several bare processes pooled as the engine pools a stage's processes: the median over every step, each
    process's own median and steal, the steal summed (None if any process could not read it); the busy threads
    are the first process's (each process's file keeps its own)."""
    times = [t for loop in loops for t in loop["times_ms"]]
    steals = [loop.get("steal_s") for loop in loops]
    return {**loops[0], "times_ms": times, "median_ms": statistics.median(times),
            "process_medians_ms": [loop["median_ms"] for loop in loops], "processes": len(loops),
            "process_steal_s": steals, "steal_s": None if None in steals else round(sum(steals), 4),
            "wall_s": sum(loop.get("wall_s") or 0.0 for loop in loops),
            "sibling_states": [st for loop in loops for st in loop.get("sibling_states", [])]}


def compare(pairs: int, out: Path, cases: list[str] | None, root: Path | None, pinned: bool = False,
            siblings: int = 0, processes: int = 1) -> int:
    out.mkdir(parents=True, exist_ok=True)
    out = out.resolve()
    rows = []
    chosen = [c for c in CASES if c[0] in (cases or DEFAULT_CASES)]
    # each bare loop's kinds: plain, pinned as the engine pins, beside stopped stand-ins for look-ahead workers
    kinds = [("bare", False, 0)] + ([("bare_pinned", True, 0)] if pinned else []) + \
        ([("bare_siblings", False, siblings)] if siblings else [])
    for i in range(1, pairs + 1):  # pair by pair across the cases: a call cut short keeps as many pairs of each
        for name, key, stages, shape in chosen:
            order = (False, True) if i % 2 else (True, False)
            loops: dict[str, list[dict]] = {kind: [] for kind, _, _ in kinds}
            for k in range(1, processes + 1):   # the kinds alternate process by process, so a drift hits each alike
                for kind, pin, beside in (kinds if (i + k) % 2 == 0 else kinds[::-1]):
                    suffix = "" if processes == 1 else f"_{k}"
                    loops[kind].append(bare_process(key, shape, pin, out / f"{kind}_{name}_{i}{suffix}.json", beside))
            b = pooled(loops["bare"])
            s = pooled(loops["bare_siblings"]) if siblings else None
            runs = {p: engine(key, stages, shape, out / f"engine_{'' if p else 'unpinned_'}{name}_{i}.json", root, p)
                    for p in ((not order[0], order[0]) if pinned else (True,))}  # the engine's in the other order
            e = runs[True]
            rows.append({"case": name, "pair": i, "bare_ms": b["median_ms"], "bare_process_medians_ms":
                         b["process_medians_ms"], "bare_wall_s": b["wall_s"], "engine_ms": e["median_ms"],
                         "ratio": e["median_ms"] / b["median_ms"], "engine_process_medians_ms":
                         e["process_medians_ms"], "engine_wall_s": e["wall_s"], "tool_busy_s": e["tool_busy_s"],
                         "bare_steal_s": b.get("steal_s"), "bare_threads": b.get("timed_threads"),
                         "engine_windows": e["windows"], "engine_bound": e["bound"]})
            if siblings:
                rows[-1].update(bare_siblings_ms=s["median_ms"],
                                bare_siblings_process_medians_ms=s["process_medians_ms"], siblings=siblings,
                                sibling_states=s["sibling_states"],
                                ratio_siblings=s["median_ms"] / b["median_ms"])
            if pinned:
                u = runs[False]
                bp = pooled(loops["bare_pinned"])
                rows[-1].update(bare_pinned_ms=bp["median_ms"], bare_order=["pinned" if p else "unpinned"
                                for p in order], ratio_to_pinned=e["median_ms"] / bp["median_ms"],
                                engine_unpinned_ms=u["median_ms"], ratio_unpinned=u["median_ms"] / b["median_ms"],
                                engine_unpinned_process_medians_ms=u["process_medians_ms"],
                                engine_unpinned_windows=u["windows"], bare_pinned_threads=bp.get(
                                    "timed_threads"))
            (out / "quiet_host.json").write_text(json.dumps(rows, indent=1))  # kept as it goes: a cut call keeps it
            r = rows[-1]
            busy = [v for vs in r["tool_busy_s"].values() for v in vs if v is not None]
            print(f"{name} pair {i}: bare {r['bare_ms']:.2f} ms"
                  + (f" (processes {', '.join(f'{m:.2f}' for m in r['bare_process_medians_ms'])})"
                     if processes > 1 else "") + f", engine {r['engine_ms']:.2f} ms "
                  f"(processes {', '.join(f'{m:.2f}' for m in r['engine_process_medians_ms'])}), "
                  f"engine/bare {r['ratio']:.3f}, engine {r['engine_bound']['verdict']}, "
                  f"engine wall {r['engine_wall_s']:.1f} s, "
                  + (f"pinned bare {r['bare_pinned_ms']:.2f} ms (engine/pinned {r['ratio_to_pinned']:.3f}), "
                     f"unpinned engine {r['engine_unpinned_ms']:.2f} ms (processes "
                     f"{', '.join(f'{m:.2f}' for m in r['engine_unpinned_process_medians_ms'])}; /bare "
                     f"{r['ratio_unpinned']:.3f}), " if pinned else "") +
                  (f"bare beside {siblings} stopped siblings {r['bare_siblings_ms']:.2f} ms (/bare "
                   f"{r['ratio_siblings']:.3f}), " if siblings else "") +
                  f"most tool_busy_s {max(busy, default=None)}",
                  flush=True)
    worst = max(r["ratio"] for r in rows)
    print(f"worst engine/bare over {len(rows)} pairs: {worst:.3f} (one pair's; the target is judged on every "
          "process, below)")
    launch = [r["ratio"] for r in rows if r["engine_bound"]["verdict"] == str(Bound.LAUNCH)]
    print(f"launch-bound engine runs: {len(launch)} of {len(rows)}"
          + (f", worst engine/bare among them {max(launch):.3f}" if launch else ""))
    if siblings:
        ratios = [r["ratio_siblings"] for r in rows]
        print(f"bare beside {siblings} stopped siblings / bare: {', '.join(f'{x:.3f}' for x in ratios)} "
              f"(above 1 in {sum(x > 1 for x in ratios)} of {len(ratios)})")
    for line in judged(rows):
        print(line)
    return 0


TARGET = 1.03   # the issue's: engine median / bare-loop median at most this on the launch-bound stages


def judged(rows: list[dict]) -> list[str]:
    """The target judged on every process of a case, over all its pairs: one pair's ratio moves with the spread
    between processes (a quarter on an H100 host), so the pairs' worst says little. engine / bare is the ratio of
    the two groups' geometric-mean process medians, with Welch's 95% interval (stats.unpaired_ratio_interval: no
    round pairs a bare process with an engine one). Met when the interval lies at or below TARGET, missed when it
    lies above; otherwise it can't tell yet, and says how many processes a side would bring the interval within
    3% of its point at the spread seen (stats.processes_needed on the difference of two means: sd * sqrt 2), and
    the device time that takes at this file's seconds a process (a bare process, and an engine run's wall over its
    processes)."""
    lines = []
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == case]
        bare_m = [m for r in mine for m in r.get("bare_process_medians_ms") or [r["bare_ms"]]]
        eng_m = [m for r in mine for m in r["engine_process_medians_ms"]]
        verdicts = [r["engine_bound"]["verdict"] for r in mine if "engine_bound" in r]
        bound = (f"engine launch-bound in {verdicts.count(str(Bound.LAUNCH))} of {len(verdicts)}" if verdicts
                 else "bound not recorded")
        head = (f"{case}, all {len(mine)} pairs ({len(bare_m)} bare processes, {len(eng_m)} engine processes; "
                f"{bound}): ")
        ci = stats.unpaired_ratio_interval(eng_m, bare_m)
        if ci is None:
            lines.append(head + "too few processes a side for an interval (2 each at least)")
            continue
        said = f"engine/bare ×{ci.estimate:.3f} (95% CI {ci.low:.3f}–{ci.high:.3f})"
        if ci.high <= TARGET:
            lines.append(head + f"{said}: target (≤ {TARGET}) met")
            continue
        if ci.low > TARGET:
            lines.append(head + f"{said}: target (≤ {TARGET}) missed")
            continue
        sd = stats.unpaired_log_sd(bare_m, eng_m)
        need = stats.processes_needed(sd * math.sqrt(2)) if sd else None
        walls = [r.get("bare_wall_s") for r in mine]
        each = (sum(walls) / len(bare_m) + sum(r["engine_wall_s"] for r in mine) / len(eng_m)
                if None not in walls and sd else None)
        more = max(0, (need or 0) - min(len(bare_m), len(eng_m)))
        took = f", ≈ {each * more / 60:.0f} min of device time more" if each and need else ""
        lines.append(head + f"{said}: can't tell yet against ≤ {TARGET}; processes differ by "
                     f"{sd:.1%} (sd of log medians), so " +
                     (f"about {need} processes a side would tell it within 3%{took}" if need else
                      "more processes than can be run would be needed"))
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bare"]:
        p = argparse.ArgumentParser()
        p.add_argument("--stage", required=True)
        p.add_argument("--pinned", action="store_true")
        p.add_argument("--siblings", type=int, default=0)
        known, shape = p.parse_known_args(argv[1:])
        print(json.dumps(bare(known.stage, shape, known.pinned, known.siblings)))
        return 0
    if argv[:1] == ["judge"]:   # judge kept quiet_host.json files again, each on its own (one call's pairs)
        for path in argv[1:]:
            print(path)
            for line in judged(json.loads(Path(path).read_text())):
                print("  " + line)
        return 0
    if argv[:1] == ["sibling"]:
        p = argparse.ArgumentParser()
        p.add_argument("--stage", required=True)
        known, shape = p.parse_known_args(argv[1:])
        sibling(known.stage, shape)
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--out", type=Path, default=Path("quiet_host_out"))
    p.add_argument("--cases", help=f"comma-separated case names (default: {', '.join(DEFAULT_CASES)}); all: "
                   + ", ".join(c[0] for c in CASES))
    p.add_argument("--engine-root", type=Path, help="run the engine from this tree's bench_core (a before/after)")
    p.add_argument("--pinned", action="store_true", help="each pair also a bare loop pinned as the engine pins")
    p.add_argument("--siblings", type=int, default=0, metavar="K",
                   help="each pair also a bare loop beside K stopped stand-ins for look-ahead workers (each with its "
                        "CUDA context and built stage), as the engine's workers are stopped while one is timed")
    p.add_argument("--bare-processes", type=int, default=1, metavar="N",
                   help="each bare loop as N processes, pooled as the engine pools a stage's (its --repeats: 3); "
                        "the kinds alternate process by process")
    args = p.parse_args(argv)
    return compare(args.pairs, args.out, args.cases.split(",") if args.cases else None, args.engine_root,
                   args.pinned, args.siblings, args.bare_processes)


if __name__ == "__main__":
    sys.exit(main())
