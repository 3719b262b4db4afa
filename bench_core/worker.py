"""One stage in one fresh process: ``python -m bench_core.worker`` reads its job (JSON) from stdin
and streams JSON events, one per line, on stdout. Everything else the process prints goes to stderr.
"""
from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import sys
import time

from .config import BenchConfig
from .kernels import classify, sdpa_backend, verdict
from .levers import LEVERS, Stage

PROFILE_STEPS = 3
SPAWNED_AT = time.perf_counter()


class Emitter:
    def __init__(self):
        self.enabled = int(os.environ.get("RANK", "0")) == 0  # under torchrun only rank 0 reports
        # Keep the real stdout for events; route fd 1 to stderr so stray prints can't corrupt the stream.
        self._out = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr

    def __call__(self, event: str, **data) -> None:
        if not self.enabled:
            return
        t = round(time.perf_counter() - SPAWNED_AT, 3)  # seconds since the process started: overhead breakdown
        self._out.write(json.dumps({"event": event, "t": t, **data}) + "\n")


def _targets(spec: str, stage_key: str) -> str | None:
    """'value@stage_key' applies to that stage only; a bare 'value' to every stage."""
    value, _, target = spec.partition("@")
    return value if not target or target == stage_key else None


def apply_test_fault(stage_key: str) -> None:
    """Test-only hooks, read from the environment:
    BENCH_TEST_FAULT=abort|segfault|hang|exit3|oom[@stage_key] and BENCH_TEST_RLIMIT_AS_MIB=N[@stage_key]."""
    cap = _targets(os.environ.get("BENCH_TEST_RLIMIT_AS_MIB", ""), stage_key)
    if cap:
        limit = int(cap) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    kind = _targets(os.environ.get("BENCH_TEST_FAULT", ""), stage_key)
    if kind == "abort":
        os.abort()
    if kind == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "hang":
        time.sleep(3600)
    if kind == "exit3":
        sys.exit(3)
    if kind == "oom":
        # A real allocator failure: cap the address space just above what is mapped now, then ask for 4 GiB.
        with open("/proc/self/statm") as fh:
            mapped = int(fh.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (mapped + 256 * 2**20, resource.RLIM_INFINITY))
        import torch
        torch.empty(2**30, dtype=torch.float32)


def die_with_parent() -> None:
    """If the server is killed (even kill -9), its stage worker must not live on holding the GPU."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def is_oom(exc: BaseException) -> bool:
    text = str(exc)
    return (isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"
            or "out of memory" in text.lower() or "can't allocate memory" in text)


def run(job: dict, emit: Emitter) -> None:
    import torch

    from .model import GPT, GPTConfig, synthetic_batch

    if os.environ.get("BENCH_WORKER_THREADS"):
        torch.set_num_threads(int(os.environ["BENCH_WORKER_THREADS"]))
    from .distributed import Distributed, nccl_version

    cfg = BenchConfig.from_dict(job["config"])
    stage = Stage(**job["stage"])
    device = job["device"]        # the autocast device type
    cuda = device == "cuda"
    ddp = Distributed(device)
    target = ddp.device           # cuda:<local rank> under torchrun
    opt_lever, norm_lever, prec_lever, compile_lever = (LEVERS[getattr(stage, k)] for k in
                                                       ("optimizer", "norm", "precision", "compile"))
    plan = prec_lever.build()
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = plan.tf32
        torch.backends.cudnn.allow_tf32 = plan.tf32
    try:
        norm_cls = norm_lever.build()
    except Exception as exc:
        return emit("unavailable", reason=f"{norm_lever.title} could not be built: {type(exc).__name__}: {exc}")

    torch.manual_seed(cfg.seed)
    with torch.device(target):
        model = GPT(GPTConfig(cfg.depth, cfg.width, cfg.heads, cfg.seq_len, cfg.vocab_size), norm_cls)
    model = ddp.wrap(model, own_sync=stage.optimizer == "apex-distadam")
    try:
        opt = opt_lever.build(model.parameters())
    except Exception as exc:
        return emit("unavailable", reason=f"{opt_lever.title} could not be built: {type(exc).__name__}: {exc}")
    model = compile_lever.build(model)
    # weak scaling: every rank takes the same per-GPU batch, of its own tokens
    x, y = synthetic_batch(cfg.vocab_size, cfg.batch_size, cfg.seq_len, cfg.seed + ddp.rank, target)
    dtype = getattr(torch, plan.autocast_dtype) if plan.autocast_dtype else None
    scaler = torch.amp.GradScaler(device) if plan.grad_scaler else None
    emit("started", pid=os.getpid(), stage=stage.key, device=device, params=sum(p.numel() for p in model.parameters()),
         optimizer_class=f"{type(opt).__module__}.{type(opt).__qualname__}",
         norm_class=f"{norm_cls.__module__}.{norm_cls.__qualname__}",
         tf32_matmul=torch.backends.cuda.matmul.allow_tf32, grad_scaler=scaler is not None,
         cpu_threads=torch.get_num_threads(), world_size=ddp.world,
         nccl=nccl_version() if ddp.enabled and cuda else None)

    last_dtype = [None]

    def step():
        opt.zero_grad()  # Apex FusedAdam.zero_grad takes no arguments; both default to set_to_none
        with (torch.autocast(device, dtype=dtype) if dtype else contextlib.nullcontext()):  # device type
            logits, loss = model(x, y)
        last_dtype[0] = logits.dtype
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    t0 = time.perf_counter()
    for _ in range(cfg.warmup):
        step()
    sync()
    emit("warmup", seconds=time.perf_counter() - t0, iters=cfg.warmup)

    ddp.barrier()  # every rank starts the timed steps together; rank 0's clock speaks for the job
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        measure_cuda(step, cfg.iters, emit, torch)
        peaks = ddp.gather((torch.cuda.max_memory_allocated() / 2**20, torch.cuda.max_memory_reserved() / 2**20))
        emit("memory", peak_allocated_mib=max(p[0] for p in peaks), peak_reserved_mib=max(p[1] for p in peaks),
             rank_peak_mib=[p[0] for p in peaks])
    else:
        for i in range(cfg.iters):
            start = time.perf_counter()
            loss = step().item()
            emit("iter", i=i, ms=(time.perf_counter() - start) * 1e3, loss=loss)
        peaks = ddp.gather(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        emit("memory", peak_rss_mib=max(peaks), rank_peak_mib=peaks)

    if ddp.leader:
        names = profile_names(step, cuda, torch)
    else:  # the other ranks take the same steps, or rank 0's all-reduces would wait for ever
        for _ in range(PROFILE_STEPS):
            step()
        names = []
    seen = classify(names)
    state, warnings = verdict(stage, device, seen)
    emit("kernels", seen=seen, sdpa_backend=sdpa_backend(names), verdict=state, warnings=warnings,
         autocast_dtype=str(last_dtype[0]).replace("torch.", ""))
    ddp.close()


def measure_cuda(step, iters: int, emit, torch) -> None:
    """CUDA events around each step; results are emitted as soon as each iteration's end event
    completes, without a host sync, so the CPU may queue the next step as in a real training loop."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    losses = torch.empty(iters, dtype=torch.float32, pin_memory=True)
    done = 0

    def flush(recorded: int, block: bool) -> None:
        nonlocal done
        while done < recorded and (block or ends[done].query()):
            ends[done].synchronize()
            emit("iter", i=done, ms=starts[done].elapsed_time(ends[done]), loss=float(losses[done]))
            done += 1

    for i in range(iters):
        starts[i].record()
        loss = step()
        losses[i].copy_(loss.detach().float(), non_blocking=True)
        ends[i].record()
        flush(i + 1, block=False)
    flush(iters, block=True)


def profile_names(step, cuda: bool, torch) -> list[str]:
    """Event names of a few extra, untimed steps under torch.profiler: the proof of which kernels ran."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for _ in range(PROFILE_STEPS):
            step()
        if cuda:
            torch.cuda.synchronize()
    names = set()
    for evt in prof.events():
        names.add(evt.name)
        names.update(k.name for k in getattr(evt, "kernels", None) or ())
    return sorted(names)


def main() -> int:
    parent = os.getppid()
    die_with_parent()
    if os.getppid() != parent:  # the parent died before prctl took effect
        return 1
    emit = Emitter()
    # Import torch (and, asked to, create the CUDA context) before reading the job: a worker spawned
    # ahead of its stage pays this while the previous stage is still profiling and tearing down.
    import torch

    from . import model  # noqa: F401
    if sys.argv[1:2] == ["--warm-cuda"] and torch.cuda.is_available():
        # Context and cuBLAS handle now, not on the clock of the stage; nothing timed runs yet.
        a = torch.ones(64, 64, device="cuda")
        (a @ a).sum().item()
    emit("ready")
    job_file = os.environ.get("BENCH_JOB_FILE")  # torchrun ranks get their job from a file, not stdin
    job = json.loads(open(job_file).read() if job_file else sys.stdin.read())
    stage_key = Stage(**job["stage"]).key
    t0 = time.perf_counter()
    try:
        apply_test_fault(stage_key)
        run(job, emit)
    except Exception as exc:  # the parent turns these into stage statuses
        kind = "oom" if is_oom(exc) else "error"
        emit("error", kind=kind, message=f"{type(exc).__name__}: {str(exc).strip()[:600]}")
        return 1
    emit("finished", wall_s=time.perf_counter() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
