"""One stage in one fresh process: ``python -m bench_core.run.worker``.

It imports torch (and creates its CUDA context) at once, reads its job (one JSON line on stdin, or the file
BENCH_JOB_FILE under torchrun), builds model and optimizer, then waits for `go` before any measured work.
Events (bench_core.run.events) go to stdout, one per line; everything else the process prints goes to stderr.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from bench_core.levers.surgery import SurgeryUnavailable
from bench_core.measure.proof import Facts, judge_trace, sdpa_backend
from bench_core.run import events as ev
from bench_core.run.faults import apply_test_fault
from bench_core.run.processes import StageJob, die_with_parent
from bench_core.run.step import PROFILE_STEPS, build_stage, measure, profile, warm_up
from bench_core.run.warmup_record import WarmupRecorder

SPAWNED_AT = time.perf_counter()


class Emitter:
    def __init__(self) -> None:
        self.enabled = int(os.environ.get("RANK", "0")) == 0  # under torchrun only rank 0 reports
        # Keep the real stdout for events; route fd 1 to stderr so stray prints can't corrupt the stream.
        self._out = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr

    def __call__(self, event: ev.Event) -> None:
        if self.enabled:
            t = round(time.perf_counter() - SPAWNED_AT, 3)  # seconds since the process started: overhead breakdown
            at = round(time.time(), 3)  # the run's wall clock: every process's timeline on one clock
            self._out.write(type(event)(**{**event.__dict__, "t": t, "at": at}).encode() + "\n")


def is_oom(exc: BaseException) -> bool:
    text = str(exc)
    return (isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"
            or "out of memory" in text.lower() or "can't allocate memory" in text)


def read_job() -> StageJob:
    job_file = os.environ.get("BENCH_JOB_FILE")  # torchrun ranks get their job from a file, not stdin
    if job_file:
        with open(job_file) as fh:
            return StageJob.from_json(fh.read())
    return StageJob.from_json(sys.stdin.readline())


def wait_for_go() -> None:
    if not os.environ.get("BENCH_JOB_FILE"):
        sys.stdin.readline()  # "go", or EOF if the parent closed the pipe: either way, start


def wait_for_line() -> None:
    """The runner's next word on stdin (`build`, `go`), or EOF if it closed the pipe: either way, go on."""
    sys.stdin.readline()


class Release:
    """Set when the runner sends `release` (or closes stdin): a gated worker's warm-up may end. Read on a thread,
    so the warm-up loop asks without blocking."""

    def __init__(self, gated: bool):
        self.event = threading.Event()
        if not gated:
            self.event.set()
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        sys.stdin.readline()
        self.event.set()

    def __call__(self) -> bool:
        return self.event.is_set()


def import_packages(stage: Any) -> None:
    """The stage's kernel packages (Liger, torchao, Apex...), imported before the worker may build: seconds of
    host work that would otherwise hold the stage before it in its warm-up. One that fails to import is left
    to the build, which says why the stage cannot run."""
    import importlib
    for package in stage.packages:
        try:
            importlib.import_module(package.module)
        except Exception:  # noqa: S112 (the build reports it)
            continue


def profiled_build(job: StageJob, stage: Any, torch: Any) -> Any:
    """build_stage; with BENCH_BUILD_PROFILE=DIR (benchmarks only) under cProfile, its 30 costliest calls by
    cumulative time written to DIR/build_<stage>_r<round>.txt: where a build's seconds go, which the runner's
    timeline shows only as one figure."""
    folder = os.environ.get("BENCH_BUILD_PROFILE")
    if not folder:
        return build_stage(job, stage, torch)
    import cProfile
    import io
    import pstats
    prof = cProfile.Profile()
    try:
        return prof.runcall(build_stage, job, stage, torch)
    finally:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(30)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in stage.key)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"build_{safe}_r{job.round}.txt"), "w") as fh:
            fh.write(out.getvalue())


def run(job: StageJob, emit: Emitter, torch: Any) -> None:
    stage = job.stage
    threads = job.threads
    if job.timed_cores:  # pinned to these cores while timed: more threads than cores would take turns on them
        threads = min(threads or torch.get_num_threads(), job.timed_cores)
    if threads:
        torch.set_num_threads(threads)
    if job.gated:
        import_packages(stage)  # host work, ahead: the wait for `build` then ends in device work only
        wait_for_line()  # `build`: no device work before it (another process may be timed)
    elif not job.build_ahead:
        wait_for_go()
    try:
        built = profiled_build(job, stage, torch)
    except SurgeryUnavailable as exc:  # a lever that cannot act on this model: refused before any measured work
        return emit(ev.Unavailable(reason=str(exc)))
    except (ImportError, RuntimeError, TypeError) as exc:  # a lever whose extension cannot be built here
        if is_oom(exc):
            raise
        return emit(ev.Unavailable(reason=f"{stage.label} could not be built: {type(exc).__name__}: {exc}"))
    emit(ev.Built(pid=os.getpid(), params=built.params, optimizer_class=built.optimizer_class,
                  norm_class=built.norm_class, norm_modules=built.norm_modules,
                  surgery=built.surgery.to_dict(), tf32_matmul=built.tf32, grad_scaler=built.scaler is not None,
                  cpu_threads=torch.get_num_threads(), world_size=built.ddp.world, nccl=built.nccl))
    if job.build_ahead:
        wait_for_go()
    released = Release(job.gated)
    emit(ev.Started())
    record = WarmupRecorder(built.cuda, torch)
    warm = warm_up(built, job, lambda steps, s: emit(ev.WarmupProgress(steps=steps, seconds=s)), torch, record,
                   released, first_step=lambda s: emit(ev.FirstStep(seconds=s)))
    emit(ev.Warmup(seconds=warm[1], iters=warm[0], trace=record.trace(*warm).to_dict()))
    timed = measure(built, lambda s: emit(ev.Iter(i=s.i, ms=s.ms, loss=s.loss, host_ms=s.host_ms)), torch)
    emit(ev.Memory(peak_allocated_mib=timed.peak_allocated_mib, peak_reserved_mib=timed.peak_reserved_mib,
                   peak_rss_mib=timed.peak_rss_mib, rank_peak_mib=list(timed.rank_peak_mib),
                   energy_j=timed.energy_j, skipped_steps=timed.skipped_steps,
                   conditions=timed.conditions.to_dict() if timed.conditions else None))
    if not job.profile:
        built.ddp.close()
        return
    profiled = profile(built, torch, stage.key)
    emit(ev.Profiled())
    if profiled is None:  # a non-leader rank under torchrun
        built.ddp.close()
        return
    cfg = job.config
    facts = Facts(optimizer_class=built.optimizer_class, tf32_matmul=built.tf32, grad_scaler=built.scaler is not None,
                  norm_modules=built.norm_modules, surgery=built.surgery, own_parts=built.own_parts,
                  logits_returned=built.logits_returned)
    judged = judge_trace(stage, job.device, profiled.trace, facts, built.tf32,
                   cfg.batch_size * cfg.seq_len, cfg.vocab_size, PROFILE_STEPS)
    emit(ev.Kernels(seen=judged.seen, sdpa_backend=sdpa_backend(profiled.trace.names), verdict=judged.verdict,
                    warnings=judged.warnings, autocast_dtype=built.last_dtype, profile=profiled.profile.to_dict(),
                    gemm_share=judged.gemm_share.to_dict() if judged.gemm_share else None))
    built.ddp.close()


def main() -> int:
    parent = os.getppid()
    die_with_parent()
    if os.getppid() != parent:  # the parent died before prctl took effect
        return 1
    emit = Emitter()
    # Import torch (and, asked to, create the CUDA context) before the job: a worker started ahead of its
    # stage pays this while earlier stages run their untimed work.
    t0 = time.perf_counter()
    import torch
    t1 = time.perf_counter()
    import torch._dynamo  # noqa: F401  (building any torch.optim optimizer imports it: seconds, ahead of the job)
    t2 = time.perf_counter()

    import bench_core.models.gpt  # noqa: F401  (the model module, loaded ahead of the job too)
    imports = {"torch": t1 - t0, "torch._dynamo": t2 - t1, "bench_core.models.gpt": time.perf_counter() - t2}
    if sys.argv[1:2] == ["--warm-cuda"] and torch.cuda.is_available():  # an ungated worker's CUDA context, early
        a = torch.ones(64, 64, device="cuda")  # context and cuBLAS handle now, not on the stage's clock
        (a @ a).sum().item()
    emit(ev.Ready())
    job = read_job()
    folder = os.environ.get("BENCH_BUILD_PROFILE")
    if folder:  # with the build's profile: the worker's own imports, timed
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"imports_r{job.round}_{os.getpid()}.txt"), "w") as fh:
            fh.write("".join(f"{name}: {s:.3f} s\n" for name, s in imports.items()))
    t0 = time.perf_counter()
    try:
        apply_test_fault(job.stage.key)
        run(job, emit, torch)
    except Exception as exc:  # the parent turns these into stage statuses
        emit(ev.Error(kind="oom" if is_oom(exc) else "error",
                      message=f"{type(exc).__name__}: {str(exc).strip()[:600]}"))
        return 1
    emit(ev.Finished(wall_s=time.perf_counter() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
