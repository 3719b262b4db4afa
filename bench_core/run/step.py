"""The training step a worker measures, and how: build, warm up, time, profile. Runs inside the worker only.

Timing: CUDA events around each step, no host sync between steps (the CPU queues ahead as in real training);
host time to enqueue each step with perf_counter. Warm-up: at least `warmup` steps and WARMUP_MIN_S seconds, and
until the runner releases it (run.runner: the next stage's worker builds meanwhile).
Adaptive: a process stops timing once its median is known well enough (measure.stats.enough_steps), between
cfg.min_iters and cfg.iters steps, asked every STOP_CHECK_EVERY steps.
"""
from __future__ import annotations

import contextlib
import resource
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench_core.config.bench_config import STOP_CHECK_EVERY, STOP_HALF_WIDTH, WARMUP_MIN_S, BenchConfig
from bench_core.levers.changes import SurgeryReport
from bench_core.levers.registry import LEVERS
from bench_core.levers.stage import Stage
from bench_core.levers.surgery import SurgeryUnavailable, apply_levers, built_with_parts
from bench_core.machine.conditions import Conditions
from bench_core.measure.stats import enough_steps
from bench_core.models.families import ModelParts, build_model
from bench_core.run.faults import broken_build
from bench_core.run.phases import StepPhase
from bench_core.run.processes import StageJob
from bench_core.run.warmup_record import WarmupRecorder

PROFILE_STEPS = 5
GRAPH_WARMUP_STEPS = 3  # eager steps on a side stream before capture, as torch.cuda.graphs requires


@dataclass
class Built:
    cfg: BenchConfig
    step: Callable[[], Any]
    sync: Callable[[], None]
    ddp: Any
    params: int
    optimizer_class: str
    norm_class: str
    norm_modules: dict[str, int]   # the norm modules the model holds, class -> count (what the proof judges)
    surgery: SurgeryReport         # what each lever changed in the model (levers.surgery)
    own_parts: bool                # a built-in family's model, built with the stage's parts
    tf32: bool
    scaler: Any
    cuda: bool
    nccl: str | None
    last_dtype: str | None = None
    logits_returned: bool | None = None   # the last eager step's forward gave logits (a fused loss head gives none)
    capture: Callable[[], None] | None = None   # graphs: capture the step once warm-up has run eagerly
    # called at the end of each phase of an eager step (a sweep reads the peak memory per phase); a replayed CUDA
    # graph has no phases to call it at
    on_phase: Callable[[StepPhase], None] | None = None


def _qualname(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def norm_modules(model: Any) -> dict[str, int]:
    """The model's norm modules by class, walked in the built model (after FP8 conversion): a module is a norm when
    its class or a base's name ends in "Norm", as torch's, Apex's, Liger's and TE's do (LayerNorm, FusedRMSNorm,
    LigerRMSNorm, which our LigerRMS subclasses...)."""
    found = Counter(_qualname(m) for m in model.modules()
                    if any(cls.__name__.endswith("Norm") for cls in type(m).__mro__))
    return dict(sorted(found.items()))


def model_parts(stage: Stage, family: str) -> ModelParts:
    """The stage's model parts for a family: the family's twin of each part (a plain part of the other type is the
    family's own, see Stage.family_conflict)."""
    return ModelParts({lever.kind: lever.build() for lever in (stage.for_family(family) or stage).part_levers})


def build_stage(job: StageJob, stage: Stage, torch: Any) -> Built:
    from bench_core.models.gpt import synthetic_batch
    from bench_core.run.distributed import Distributed, nccl_version

    cfg = job.config
    device, cuda = job.device, job.device == "cuda"
    ddp = Distributed(device)
    target = ddp.device           # cuda:<local rank> under torchrun
    plan = stage.precision_lever.build()
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = plan.tf32
        torch.backends.cudnn.allow_tf32 = plan.tf32
    if broken_build(stage.key):
        raise ImportError("test fault: the norm lever's extension could not be imported")
    parts = model_parts(stage, cfg.family)
    norm_cls = parts.get("norm")
    torch.manual_seed(cfg.seed)
    with torch.device(target):
        model = build_model(cfg, parts)
        if plan.convert is not None:  # TE FP8: swap the blocks' modules before DDP, optimizer and compile see them
            model = plan.convert(model)
        # every lever's surgery (norm swap, Liger, float8), before DDP, optimizer and compile see the modules
        surgery = apply_levers(model, stage.for_family(cfg.family) or stage, torch, parts)
    blocked = next((c for c in surgery.changes if c.unavailable), None)
    if blocked is not None:
        raise SurgeryUnavailable(f"{LEVERS[blocked.lever].title}: {blocked.unavailable}")
    own_parts = built_with_parts(model)
    norms = norm_modules(model)
    if not stage.optimizer_lever.reduces_gradients:
        model = ddp.wrap(model)
    graphs = stage.compile_lever.captures_graph
    opt = stage.optimizer_lever.build(model.parameters(), capturable=graphs)
    model = stage.compile_lever.build(model)
    # weak scaling: every rank takes the same per-GPU batch, of its own tokens
    x, y = synthetic_batch(cfg.vocab_size, cfg.batch_size, cfg.seq_len, cfg.seed + ddp.rank, target)
    dtype = getattr(torch, plan.autocast_dtype) if plan.autocast_dtype else None
    scaler = torch.amp.GradScaler(device) if plan.grad_scaler else None

    def autocast() -> Any:
        # autocast's weight-cast cache must be off inside a CUDA graph capture
        stack = contextlib.ExitStack()
        if plan.context is not None:   # te.fp8_autocast, around autocast as TE documents
            stack.enter_context(plan.context())
        if dtype:
            stack.enter_context(torch.autocast(device, dtype=dtype, cache_enabled=not graphs))
        return stack

    built = Built(cfg=cfg, step=lambda: None, sync=torch.cuda.synchronize if cuda else (lambda: None), ddp=ddp,
                  params=sum(p.numel() for p in model.parameters()), optimizer_class=_qualname(opt),
                  norm_class=_qualname(norm_cls), norm_modules=norms, surgery=surgery, own_parts=own_parts,
                  tf32=bool(torch.backends.cuda.matmul.allow_tf32) if cuda else False,
                  scaler=scaler, cuda=cuda, nccl=nccl_version() if ddp.enabled and cuda else None)

    def eager_step() -> Any:
        opt.zero_grad()  # Apex FusedAdam.zero_grad takes no arguments; both default to set_to_none
        with autocast():
            logits, loss = model(x, y)
        # a fused loss head (Liger FLCE) returns no logits: nothing to read the autocast dtype from
        built.last_dtype = None if logits is None else str(logits.dtype).replace("torch.", "")
        built.logits_returned = logits is not None
        phase = built.on_phase
        if phase:
            phase(StepPhase.FORWARD)
        (scaler.scale(loss) if scaler else loss).backward()
        if phase:
            phase(StepPhase.BACKWARD)
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        if phase:
            phase(StepPhase.OPTIMIZER)
        return loss

    built.step = eager_step
    if graphs:
        def capture() -> None:
            # torch.cuda.graphs' whole-network recipe: warm up on a side stream, then capture one step.
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(GRAPH_WARMUP_STEPS):
                    eager_step()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            opt.zero_grad()
            with torch.cuda.graph(graph):
                with autocast():
                    logits, static_loss = model(x, y)
                static_loss.backward()
                opt.step()

            def replay() -> Any:
                graph.replay()
                return static_loss
            built.step = replay
        built.capture = capture
    return built


def warm_up(built: Built, job: StageJob, progress: Callable[[int, float], None], torch: Any,
            record: WarmupRecorder | None = None, released: Callable[[], bool] = lambda: True,
            first_step: Callable[[float], None] = lambda s: None) -> tuple[int, float]:
    """At least cfg.warmup steps and WARMUP_MIN_S seconds, and until `released` (the runner's word that the next
    worker has built); (steps, s). As in the timed loop, the host waits only for the step before the one it just
    queued, so each warm-up step after the first runs queued, as a timed step does, and its time compares with
    theirs. `record` (the worker's) times each loop step and samples the SM clock, for measure.warmup."""
    start = last = time.perf_counter()
    if record is not None:
        record.start(start)
    steps = 0
    if built.capture is not None:
        built.capture()
        steps += GRAPH_WARMUP_STEPS
    before: Any = None   # the end of the step before the last one queued
    while True:
        if record is not None:
            record.begin()
        built.step()
        if record is not None:
            record.end()
        if built.cuda:
            end = torch.cuda.Event()
            end.record()
            if before is not None:
                before.synchronize()
            before = end
        steps += 1
        now = time.perf_counter()
        if steps == 1 + (GRAPH_WARMUP_STEPS if built.capture is not None else 0):
            first_step(now - start)   # its one-off costs (a compile) are behind it
        if now - last > 0.5:
            progress(steps, now - start)
            last = now
        done = steps >= built.cfg.warmup and now - start >= WARMUP_MIN_S and released()
        if built.ddp.enabled:  # every rank stops after the same step, or collectives would hang
            done = bool(built.ddp.all_agree(done))
        if done:
            built.sync()
            return steps, time.perf_counter() - start


@dataclass(frozen=True)
class TimedStep:
    """One timed step, handed on as soon as it is known (the live view counts them)."""
    i: int
    ms: float
    loss: float
    host_ms: float | None   # perf_counter around the step's Python call (CUDA only: on CPU it is `ms`)


@dataclass(frozen=True)
class TimedSteps:
    """What the timed loop measured: every step, and the peaks and energy around them."""
    steps: tuple[TimedStep, ...]
    skipped_steps: int | None                  # GradScaler steps skipped for inf/nan gradients; None: no scaler
    rank_peak_mib: tuple[float, ...]           # each rank's peak (allocated on CUDA, RSS on CPU)
    peak_rss_mib: float | None = None          # CPU
    peak_allocated_mib: float | None = None    # CUDA
    peak_reserved_mib: float | None = None     # CUDA
    energy_j: float | None = None              # NVML's counter around the timed steps, where it has one
    conditions: Conditions | None = None       # CUDA: GPU and host during the timed steps


def measure(built: Built, on_step: Callable[[TimedStep], None], torch: Any) -> TimedSteps:
    """The timed steps, until the stopping rule is met (stats.enough_steps) or `iters` is reached; each step goes
    to `on_step` as soon as it has completed."""
    built.ddp.barrier()  # every rank starts the timed steps together; rank 0's clock speaks for the job
    iters = built.cfg.iters
    steps: list[TimedStep] = []

    def done(step: TimedStep) -> None:
        steps.append(step)
        on_step(step)

    if not built.cuda:
        scale = built.scaler.get_scale() if built.scaler else None
        skipped = 0 if built.scaler else None
        for i in range(iters):
            start = time.perf_counter()
            loss = built.step().item()
            done(TimedStep(i, (time.perf_counter() - start) * 1e3, loss, None))
            if built.scaler and skipped is not None:  # a skipped step halves the scale; on CPU reading it is free
                new = built.scaler.get_scale()
                skipped += new < scale
                scale = new
            if _stop_now(built, steps):
                break
        peaks = built.ddp.gather(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        return TimedSteps(tuple(steps), skipped, tuple(peaks), peak_rss_mib=max(peaks))
    from bench_core.machine.conditions import ConditionsSampler
    from bench_core.machine.telemetry import EnergyMeter
    torch.cuda.reset_peak_memory_stats()
    scales = torch.empty(iters + 1, dtype=torch.float32, pin_memory=True) if built.scaler else None
    if scales is not None:
        scales[0].copy_(built.scaler._scale.detach().float(), non_blocking=True)
    meter = EnergyMeter(torch.cuda.current_device())
    sampler = ConditionsSampler(torch.cuda.current_device())
    meter.start()
    sampler.start()
    timed = _time_cuda(built, iters, done, steps, torch, scales)
    conditions = sampler.stop()
    energy = meter.stop()
    peaks = built.ddp.gather((torch.cuda.max_memory_allocated() / 2**20, torch.cuda.max_memory_reserved() / 2**20))
    skipped_cuda = None
    if scales is not None:  # GradScaler halves its scale after each step it skipped for inf/nan gradients
        values = scales[:timed + 1].tolist()  # slots past the steps timed were never written
        skipped_cuda = sum(1 for a, b in zip(values, values[1:], strict=False) if b < a)
    return TimedSteps(tuple(steps), skipped_cuda, tuple(p[0] for p in peaks),
                      peak_allocated_mib=max(p[0] for p in peaks), peak_reserved_mib=max(p[1] for p in peaks),
                      energy_j=energy, conditions=conditions)


def _check_due(cfg: BenchConfig, n: int) -> bool:
    """The rule is asked with n steps timed once the floor is reached, then every STOP_CHECK_EVERY steps, below
    the ceiling (the loop ends there anyway); the same steps on every rank."""
    return cfg.min_iters <= n < cfg.iters and (n - cfg.min_iters) % STOP_CHECK_EVERY == 0


def _stop_now(built: Built, steps: list[TimedStep]) -> bool:
    """Whether to stop timing now; under DDP every rank stops after the same step (one all-reduce)."""
    if not _check_due(built.cfg, len(steps)):
        return False
    times = [step.ms for step in steps]
    return bool(built.ddp.all_agree(enough_steps(times, built.cfg.min_iters, built.cfg.iters, STOP_HALF_WIDTH)))


def _time_cuda(built: Built, iters: int, done: Callable[[TimedStep], None], steps: list[TimedStep], torch: Any,
               scales: Any) -> int:
    """CUDA events around each step; each step is handed on (to `done`, which adds it to `steps`) as soon as its end
    event has completed. Returns the number of steps timed.

    The stopping rule needs the times of the steps so far. At a check (every STOP_CHECK_EVERY steps) the host
    waits for the end of the step *before* the one it just queued, so the GPU still has a whole step to run
    while the rule is read: its queue never drains, and no step's time includes a bubble. Between checks the
    host runs ahead as in training. Every 5 steps: at most 5 steps are timed past the one where the rule was
    first met (half the floor of 10), and the host runs free 4 steps in 5."""
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    losses = torch.empty(iters, dtype=torch.float32, pin_memory=True)
    host = [0.0] * iters
    flushed = 0

    def flush(recorded: int, block: bool) -> None:
        nonlocal flushed
        while flushed < recorded and (block or ends[flushed].query()):
            ends[flushed].synchronize()
            done(TimedStep(flushed, starts[flushed].elapsed_time(ends[flushed]), float(losses[flushed]),
                           host[flushed]))
            flushed += 1

    recorded = iters
    for i in range(iters):
        t0 = time.perf_counter()
        starts[i].record()
        loss = built.step()
        losses[i].copy_(loss.detach().float(), non_blocking=True)
        if scales is not None:
            scales[i + 1].copy_(built.scaler._scale.detach().float(), non_blocking=True)
        ends[i].record()
        host[i] = (time.perf_counter() - t0) * 1e3
        if _check_due(built.cfg, i):
            flush(i, block=True)  # steps 0..i-1; step i keeps the GPU busy meanwhile
            if _stop_now(built, steps):
                recorded = i + 1
                break
        flush(i + 1, block=False)
    flush(recorded, block=True)
    return recorded


@dataclass(frozen=True)
class Profiled:
    """What the profiled steps showed: where the time went, and the trace it was read from (names, GEMMs)."""
    profile: Any                  # breakdown.StageProfile
    trace: Any                    # trace.Trace


def profile(built: Built, torch: Any, trace_name: str = "stage") -> Profiled | None:
    """PROFILE_STEPS untimed steps under torch.profiler, shapes recorded.
    Benchmarks and tests only: with BENCH_SAVE_TRACE=DIR, the steps' Kineto trace is also saved there, gzipped
    (DIR/trace_<trace_name>.json.gz), for tests/data and HTA."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from bench_core.measure.breakdown import from_trace
    from bench_core.measure.trace import from_profiler
    if not built.ddp.leader:  # the other ranks take the same steps, or rank 0's all-reduces would wait for ever
        for _ in range(PROFILE_STEPS):
            built.step()
        return None
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if built.cuda else [])
    built.sync()
    with torch_profile(activities=activities, record_shapes=True) as prof:
        for _ in range(PROFILE_STEPS):
            built.step()
        built.sync()
    trace = from_profiler(prof)
    _save_trace(prof, trace_name)
    return Profiled(from_trace(trace, PROFILE_STEPS, built.cuda), trace)


def _save_trace(prof: Any, name: str) -> None:
    import gzip
    import os
    import shutil
    import tempfile
    folder = os.environ.get("BENCH_SAVE_TRACE")
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(raw)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        with open(raw, "rb") as src, gzip.open(os.path.join(folder, f"trace_{safe}.json.gz"), "wb") as dst:
            shutil.copyfileobj(src, dst)
