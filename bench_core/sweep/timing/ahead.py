"""Compiling ahead: before the timing process (timing.process) times a sweep's compiled steps one after another, a few
processes run each of them once, side by side, so that torch.compile's on-disk caches (FX graphs, AOT autograd,
Triton kernels, all under TORCHINDUCTOR_CACHE_DIR) hold them and the timing process reads each compile from the
cache. Compiled one step at a time, on one core, a compiled FP8 prediction on the H200 took 404 s for eight points
(docs/BENCHMARKS.md).

Nothing is timed while they run, and what they leave is what the timing process would compile itself: the cache is
keyed by the graph, its inputs and the compiler's settings, and the number of compile threads is not among them.
Autotuning is left to the timing process: here the GPU is shared, so a winner picked here would be picked on a busy
GPU (autotune_local_cache off, which is not in the key either). A step that fails here (out of memory beside the
others) is compiled while it is timed, as before, and the sweep says so.
"""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.stage import Stage
from bench_core.sweep.timing.messages import ahead_begins_line
from bench_core.sweep.timing.timings import STEP_BLOCKS, STEP_PARTS, CompiledAhead, Part
from bench_core.sweep.timing.variants import split_compiled, stage_parts

# Processes side by side: each compiles on one core in Python (dynamo, AOT autograd, inductor's lowering), and
# gets a share of the host's cores for its Triton compiles; more would mostly add GPU memory (each holds a model).
MOST_PROCESSES = 8
CORES_A_PROCESS = 2
FAILED = "failed "   # a worker's stderr line for a step it could not compile


@dataclass(frozen=True)
class AheadJob:
    """One compiled step (or compiled part, `name` its variant) to run once: at `config`'s shapes, as `stage`
    builds it."""
    config: BenchConfig
    stage: Stage
    part: Part
    name: str

    @property
    def cost(self) -> int:
        """Compiling takes about as long as the graph is deep: the blocks the step is cut to (one for a part)."""
        if self.part not in STEP_PARTS:
            return 1
        return STEP_BLOCKS.get(self.part, self.config.depth)

    @property
    def label(self) -> str:
        c = self.config
        return f"{self.part.value} {self.stage.key} at width {c.width}, batch {c.batch_size}"

    def to_dict(self) -> dict:
        return {"config": self.config.to_dict(), "stage": self.stage.key, "part": self.part.value, "name": self.name}

    @classmethod
    def from_dict(cls, data: dict) -> AheadJob:
        cfg, stage = BenchConfig.from_dict(data["config"]), Stage.from_key(data["stage"])
        # a key leaves out the family's own parts: the stage in the config's family form, as the timing process takes it
        return cls(cfg, stage.for_family(cfg.family) or stage, Part(data["part"]), data["name"])


def compiles(stage: Stage, part: Part, name: str) -> bool:
    """Whether timing this part compiles: a whole step where the stage compiles its model, a part where its
    variant is a compiled one."""
    return stage.compile_lever.traces_model if part in STEP_PARTS else split_compiled(name)[1]


def jobs_for(points: list[tuple[BenchConfig, tuple[Stage, ...]]], breakdown: bool,
             full_steps: list[tuple[BenchConfig, Stage]]) -> list[AheadJob]:
    """Every compiled step the timing process will take, in its order: each point's stages' parts, once each (as
    timing.process.time_point times a part both stages share once), and the full-depth steps it takes once a depth."""
    jobs: list[AheadJob] = [AheadJob(cfg, stage, Part.STEP_FULL, stage.key) for cfg, stage in full_steps
                            if stage.compile_lever.traces_model]
    for cfg, stages in points:
        seen: set[tuple[Part, str]] = set()
        for stage in stages:
            for part, name in stage_parts(stage, breakdown):
                if (part, name) not in seen and compiles(stage, part, name):
                    seen.add((part, name))
                    jobs.append(AheadJob(cfg, stage, part, name))
    return jobs


def processes_for(jobs: int, cores: int) -> int:
    """How many processes compile side by side: 0 where it would not pay (one job, or a host of under 4 cores, where
    a second process only takes the first one's cores)."""
    n = min(jobs, cores // CORES_A_PROCESS, MOST_PROCESSES)
    return n if n >= 2 else 0


def shares(jobs: list[AheadJob], processes: int) -> list[list[AheadJob]]:
    """The jobs dealt out so the processes finish together: the costliest first, each to the least loaded."""
    loads = [0] * processes
    dealt: list[list[AheadJob]] = [[] for _ in range(processes)]
    for job in sorted(jobs, key=lambda j: -j.cost):
        i = loads.index(min(loads))
        loads[i] += job.cost
        dealt[i].append(job)
    return [d for d in dealt if d]


def compile_ahead(jobs: list[AheadJob], device: str, processes: int | None = None,
                  env: dict | None = None) -> CompiledAhead | None:
    """Run every job once in `processes` side by side (by default as the host's cores allow); None where that
    would not pay. Each process is this one's child, so killing the timing process's group ends them too."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    processes = processes_for(len(jobs), cores) if processes is None else min(processes, len(jobs))
    if not processes:
        return None
    child_env = {**(env if env is not None else os.environ),
                 "TORCHINDUCTOR_COMPILE_THREADS": str(max(1, cores // processes))}
    started = time.perf_counter()
    running = []
    dealt = shares(jobs, processes)
    print(ahead_begins_line(len(jobs), len(dealt)), file=sys.stderr, flush=True)
    for share in dealt:
        err = tempfile.TemporaryFile(mode="w+")   # read once it ends: a pipe could fill and stall it
        proc = subprocess.Popen([sys.executable, "-m", "bench_core.sweep.timing.ahead", device],  # noqa: S603 (our argv)
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, text=True,
                                env=child_env)
        if proc.stdin is None:
            raise OSError("a compiling process has no stdin")
        proc.stdin.write(json.dumps([j.to_dict() for j in share]))
        proc.stdin.close()
        running.append((proc, err))
    failed: list[str] = []
    for proc, err in running:
        code = proc.wait()
        err.seek(0)
        said = err.read().splitlines()
        err.close()
        failed += [line[len(FAILED):] for line in said if line.startswith(FAILED)]
        if code != 0:   # it died (a crash, a kill): its steps past the ones it named are unsaid
            failed.append(f"a compiling process ended with exit code {code}: {said[-1] if said else 'no message'}"
                          [:300])
    return CompiledAhead(len(jobs), len(running), time.perf_counter() - started, tuple(failed))


def run_job(torch, job: AheadJob, device: str) -> None:
    """Build the job's step as the timing process will and run it twice (a second call compiles anything the
    first left, as a guard that fails on the optimizer's first step would)."""
    from bench_core.sweep.timing.builders import part_fn, tf32_restorer
    torch._dynamo.reset()   # as the timing process does before each compiled part
    restore_tf32 = tf32_restorer(torch)   # and as it leaves the process's settings after each
    fn = part_fn(torch, job.config, device, job.part, job.name,
                 torch.Generator(device=device).manual_seed(job.config.seed), job.stage)
    try:
        fn()
        fn()
    finally:
        restore_tf32()
        del fn
        gc.collect()
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()


def main() -> int:
    """`python -m bench_core.sweep.timing.ahead DEVICE`: stdin, a JSON list of jobs; each failure on stderr."""
    device = sys.argv[1]
    jobs = [AheadJob.from_dict(d) for d in json.loads(sys.stdin.read())]
    import torch
    torch._inductor.config.autotune_local_cache = False   # see the module's docstring
    for job in jobs:
        try:
            run_job(torch, job, device)
        except Exception as exc:   # noqa: BLE001 (any failure here only means a cold compile later)
            print(f"{FAILED}{job.label}: {type(exc).__name__}: {exc}"[:300].replace("\n", " "), file=sys.stderr,
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
