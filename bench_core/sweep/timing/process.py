"""A stage's own training step on the point's model cut to one block and to two, its full-depth step once a
sweep (on a GPU, for its host's time), and each part of a block timed alone (the breakdown), at the point's real
shapes, through the components engine's row measurement (components.bench.measure_call: the stages' timer, kernels
counted by the profiler on CUDA); imports torch, so it runs in the sweep's own measuring process, never in the
dashboard's. The parts' builders are in sweep.timing.builders.

Only the (part, variant) pairs the two stages need are timed: their shallow steps, and their breakdown where asked
(sweep.timing.variants.stage_parts). A part that cannot run
here (an FP8 GEMM below compute capability 8.9, a vendor's kernel without its package) is left out: without its
shallow steps a stage has no prediction, and the point is measured end to end.
"""
from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from bench_core.components.bench import RowCall, RowTiming, measure_call
from bench_core.config.bench_config import BenchConfig
from bench_core.levers.stage import Stage
from bench_core.machine.timer import HOST_CALLS, HOST_ROUNDS, host_rounds_ms
from bench_core.run.phases import StepPhase
from bench_core.sweep.timing.ahead import compile_ahead, compiles, jobs_for
from bench_core.sweep.timing.builders import StepCall, calls_per_step, part_fn, tf32_restorer
from bench_core.sweep.timing.messages import ahead_line, part_line, point_line
from bench_core.sweep.timing.timings import STEP_PARTS, KernelTime, Part, PointTimings
from bench_core.sweep.timing.variants import stage_parts

LAUNCH_PROBE_KERNELS = 2000
# A whole step's host time is taken over 2 steps back to back, as a run issues them: a shallow step launches up to
# about 300 kernels, so 2 stay inside the launch queue (about a thousand) and the host never waits for the GPU (on
# the H200, gpt2-small's one-block step at batch 1 took 5.36 ms to issue alone after a sync, 4.23 ms a
# step back to back).
STEP_HOST_CALLS = 2
# Kineto leaves CUPTI attached after a profile unless told to tear it down, and every later launch in the process
# pays for it (pytorch/pytorch#144455: training 10-20% slower). On the H200 the enqueue probe read 14.3 us a kernel
# after the parts' profiles and 10.3 us before any. Each part is timed before it is
# profiled; the teardown keeps one part's profile out of the next part's timing.
PROFILER_TEARDOWN = ("TEARDOWN_CUPTI", "1")
# Timed calls per part (after as many warm-up calls as WARMUP): a GPU's kernels are steady and quick; a CPU sweep
# only exercises the path (its tiny parts take milliseconds, and the machine is often shared).
REPEATS = {"cuda": 20, "cpu": 7}
# A CPU's first steps allocate: with one warm-up call, a process's first shallow step read 1.8x its later ones.
WARMUP = {"cuda": 5, "cpu": 3}
# The full-depth step's host is taken once a sweep (a depth), so it can afford more rounds than a part's.
FULL_STEP_HOST_ROUNDS = 10


def launch_us(torch, device: str) -> float:
    """The host's time to enqueue one small kernel, measured without waiting for the GPU; 0 on CPU."""
    if device != "cuda":
        return 0.0
    x = torch.zeros(1, device="cuda")
    for _ in range(100):
        x.add_(1)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(LAUNCH_PROBE_KERNELS):
        x.add_(1)
    elapsed = time.perf_counter() - t0
    torch.cuda.synchronize()
    return elapsed / LAUNCH_PROBE_KERNELS * 1e6


def probe_config(configs: list[BenchConfig], cfg: BenchConfig) -> BenchConfig:
    """The sweep's point at `cfg`'s depth with the least work (tokens times parameters, about): where the host's
    time to issue a full-depth step is cheapest to take, and least likely to wait for the GPU."""
    def work(c: BenchConfig) -> int:
        return c.batch_size * c.seq_len * (12 * c.depth * c.width * c.width + c.vocab_size * c.width)
    return min((c for c in configs if c.depth == cfg.depth), key=work, default=cfg)


def time_part(torch, cfg: BenchConfig, device: str, part: Part, name: str, stage: Stage, gen, warmup: int,
              repeats: int, host_rounds: int = HOST_ROUNDS) -> KernelTime | str:
    """One part timed at this config's shapes: its calls, kernels, host rounds and (a whole step's) peak memory;
    or why it could not be."""
    cuda = device == "cuda"
    whole = part in STEP_PARTS
    graphs = torch._dynamo.utils.counters["stats"]
    compiled = compiles(stage, part, name)
    if compiled:   # a fresh start per part: a function compiled at many shapes would reach dynamo's recompile
        torch._dynamo.reset()   # limit and run eagerly; the compiled kernels stay cached on disk
    traced_before = graphs["unique_graphs"]
    cache_before = cache_counts(torch)
    restore_tf32 = tf32_restorer(torch)
    fn: Callable[[], Any] | None = None
    baseline = torch.cuda.memory_allocated() if cuda else 0
    try:
        fn = part_fn(torch, cfg, device, part, name, gen, stage)
        for _ in range(warmup):   # once: the host's timing and the timed calls both follow it
            fn()
        if cuda:   # the peak after the warm-up, as a worker reads its stage's (run.step)
            torch.cuda.reset_peak_memory_stats()
        # the host's time before the part's profile (see PROFILER_TEARDOWN)
        rounds = host_rounds_ms(torch, fn, STEP_HOST_CALLS if whole else HOST_CALLS, host_rounds) if cuda else [0.0]
        row, _ = measure_call(torch, RowCall(part.value, name, name, name, fn, 0, lambda seen: (None, None)),
                              RowTiming(cuda, 0, repeats, None))
        # a whole step's peak: its model, gradients, optimizer state and activations, less what was there before
        peak_mib = (torch.cuda.max_memory_allocated() - baseline) / 2**20 if cuda and whole else 0.0
        phases = phase_peaks_mib(torch, fn, baseline) if cuda and isinstance(fn, StepCall) else ()
    except Exception as exc:
        return f"{part.value} {name}: {type(exc).__name__}: {exc}"[:300]
    finally:   # a stage's build sets TF32 for its process: the next part runs as its own variant says
        restore_tf32()
        fn = None   # its model, optimizer and tensors go before the next part's are made
        if cuda:
            gc.collect()   # a built stage's closures hold cycles: freed before the next part's baseline
            torch.cuda.empty_cache()
    if cuda and whole:   # what outlived the part is not its step's (see net_of_kept)
        peak_mib, phases = net_of_kept(peak_mib, phases, (torch.cuda.memory_allocated() - baseline) / 2**20)
    if row.status != "ok" or row.median_ms is None:
        return f"{part.value} {name}: {row.reason}"
    if compiled and graphs["unique_graphs"] == traced_before:
        return f"{part.value} {name}: torch.compile traced no graph (the part ran eagerly)"
    hits, misses = (now - before for now, before in zip(cache_counts(torch), cache_before, strict=True))
    return KernelTime(part, name, row.median_ms, row.p10_ms or row.median_ms, row.p90_ms or row.median_ms,
                      row.kernels_per_call or 0, calls_per_step(part, cfg), row.kernel_ms if cuda else None,
                      statistics.median(rounds), min(rounds), max(rounds), peak_mib, phase_peaks_mib=phases,
                      cache_hits=hits, cache_misses=misses)


def cache_counts(torch) -> tuple[int, int]:
    """The FX graphs torch.compile has read from its on-disk cache so far in this process, and those it compiled
    (a step's forward and backward are one each)."""
    seen = torch._dynamo.utils.counters["inductor"]
    return seen["fxgraph_cache_hit"], seen["fxgraph_cache_miss"]


def net_of_kept(peak_mib: float, phases: tuple[float, ...], kept_mib: float) -> tuple[float, tuple[float, ...]]:
    """A step's peaks less what the process still held once the step's model was freed: a library's buffers made
    on first use and kept (as cuBLAS's workspaces are), counted only by the first step a process runs. On an H100
    the native BF16 stage's one-block step, the predictor's first, read 67.5 MiB above the line its two- and
    twelve-block steps draw while its Apex twin's, run later, read 1.8
    (docs/BENCHMARKS.md): the depth extrapolation then put its full-depth peak
    25% low (eleven times that 67.5 MiB taken off each block)."""
    kept = max(kept_mib, 0.0)
    return peak_mib - kept, tuple(p - kept for p in phases)


def phase_peaks_mib(torch, call: StepCall, baseline: int) -> tuple[float, ...]:
    """One more step, untimed, its peak memory read at the end of each phase (less `baseline`) and reset for the
    next: each phase's peak counts what it began with. () where the step did not run by phases (a replayed CUDA
    graph). The allocator's figures follow the host's order of allocation, so no phase waits for the GPU."""
    peaks: dict[StepPhase, float] = {}

    def read(phase: StepPhase) -> None:
        peaks[phase] = (torch.cuda.max_memory_allocated() - baseline) / 2**20
        torch.cuda.reset_peak_memory_stats()
    call.built.on_phase = read
    torch.cuda.reset_peak_memory_stats()
    try:
        call()
    finally:
        call.built.on_phase = None
    return tuple(peaks[p] for p in StepPhase) if len(peaks) == len(StepPhase) else ()


def _timed(found: KernelTime | str, took_s: float) -> KernelTime | str:
    """A part's timing with the seconds timing it took, its build and compile included."""
    return found if isinstance(found, str) else replace(found, wall_s=took_s)


def _keep(found: KernelTime | str, times: list[KernelTime], missing: list[str]) -> None:
    if isinstance(found, str):
        missing.append(found)
    else:
        times.append(found)


def time_point(cfg: BenchConfig, stages: tuple[Stage, ...], device: str, warmup: int | None = None,
               repeats: int | None = None, breakdown: bool = False) -> tuple[PointTimings, tuple[str, ...]]:
    """The parts the stages need, timed at this config's shapes (with `breakdown`, each part of a block alone as
    well); and why any part could not be timed."""
    os.environ.setdefault(*PROFILER_TEARDOWN)
    import torch
    enqueue_us = launch_us(torch, device)   # before any profile
    warmup = WARMUP[device] if warmup is None else warmup
    repeats = REPEATS[device] if repeats is None else repeats
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    times: list[KernelTime] = []
    missing: list[str] = []
    timed: set[tuple[Part, str]] = set()
    breakdown_s = 0.0   # what the breakdown costs a point, its compiles included: the page says it is not free
    for stage in stages:
        for part, name in stage_parts(stage, breakdown):
            if (part, name) not in timed:   # a part both stages share is timed once
                timed.add((part, name))
                t0 = time.perf_counter()
                found = time_part(torch, cfg, device, part, name, stage, gen, warmup, repeats)
                took = time.perf_counter() - t0
                said_timed(part, name, found, took)
                _keep(_timed(found, took), times, missing)
                breakdown_s += 0.0 if part in STEP_PARTS else took
    return PointTimings(tuple(times), enqueue_us, cfg.depth, breakdown_s=breakdown_s), tuple(missing)


def said_timed(part: Part, name: str, found: KernelTime | str, took_s: float) -> None:
    """On stderr as each part finishes (sweep.timing.messages), with the graphs it read from the compile cache."""
    cache = (found.cache_hits, found.cache_misses) if isinstance(found, KernelTime) else (0, 0)
    print(part_line(part.value, name, took_s, *cache), file=sys.stderr, flush=True)


def time_full_step(cfg: BenchConfig, stage: Stage, device: str) -> KernelTime | str:
    """The stage's whole step at `cfg`'s full depth (STEP_FULL), for the host's time to issue it: taken at the
    sweep's least-work shape (`probe_config`), where a step is cheapest and least likely to wait for the GPU. Where
    even that shape keeps the GPU busier than the host, the host's rounds may wait for room in the launch queue:
    they then read no more than the GPU's time there, and the larger points stay GPU-bound, as they are."""
    import torch
    gen = torch.Generator(device=device).manual_seed(cfg.seed)
    t0 = time.perf_counter()
    found = time_part(torch, cfg, device, Part.STEP_FULL, stage.key, stage, gen, WARMUP[device], REPEATS[device],
                      FULL_STEP_HOST_ROUNDS)
    took = time.perf_counter() - t0
    said_timed(Part.STEP_FULL, stage.key, found, took)
    return _timed(found, took)


def with_full_steps(timings: PointTimings, missing: tuple[str, ...], stages: tuple[Stage, ...], point: BenchConfig,
                    probe: BenchConfig, taken: dict[tuple[str, BenchConfig], KernelTime | str],
                    ) -> tuple[PointTimings, tuple[str, ...]]:
    """The point's timings with each stage's full-depth step at `probe`'s shapes, timed where `taken` (the sweep's
    full steps so far) does not have it yet; at the probe point itself they are marked as timed here."""
    times, more = list(timings.times), list(missing)
    for stage in stages:
        if (stage.key, probe) not in taken:
            taken[(stage.key, probe)] = time_full_step(probe, stage, "cuda")
        _keep(taken[(stage.key, probe)], times, more)
    return replace(timings, times=tuple(times), full_here=probe == point), tuple(more)


def main() -> int:
    """`python -m bench_core.sweep.timing.process`: one process times every point of a sweep (torch imported once).
    stdin: {"device", "a", "b", "configs": [BenchConfig dicts], "breakdown": bool}, or "stages" (a list of stage keys
    per config) for "a" and "b"; stdout: one JSON line per
    point, in order. On a GPU each stage's full-depth step is timed once a depth, at the least-work point, and
    kept in every point at that depth (so each point's prediction can be made again from its own timings)."""
    import json
    request = json.loads(sys.stdin.read())
    device = request["device"]
    configs = [BenchConfig.from_dict(data) for data in request["configs"]]
    # a sweep's two stages at every point; a recommendation's own stages per point ("stages": one key list a config)
    key_sets = request.get("stages") or [[request["a"], request["b"]]] * len(configs)
    breakdown = bool(request.get("breakdown"))
    # A key leaves out the family's own parts (llama's SwiGLU is plain): each stage in the config's family form, as
    # the worker builds it (run.step) and the comparison was parsed (sweep.core.spec).
    points = [(cfg, tuple(dict.fromkeys(stage.for_family(cfg.family) or stage
                                        for stage in map(Stage.from_key, keys))))
              for cfg, keys in zip(configs, key_sets, strict=True)]
    # a CPU runs ops as they are called: there is no host time to take, so no full-depth step
    probes = list(dict.fromkeys((probe_config(configs, cfg), stage) for cfg, stages in points for stage in stages)) \
        if device == "cuda" else []
    ahead = compile_ahead(jobs_for(points, breakdown, probes), device)
    if ahead is not None:
        print(ahead_line(ahead.steps, ahead.processes, ahead.seconds, len(ahead.failed)), file=sys.stderr, flush=True)
    full: dict[tuple[str, BenchConfig], KernelTime | str] = {}
    for i, (cfg, stages) in enumerate(points):
        print(point_line(i), file=sys.stderr, flush=True)
        timings, missing = time_point(cfg, stages, device, breakdown=breakdown)
        if i == 0:
            timings = replace(timings, ahead=ahead)
        if device == "cuda":
            timings, missing = with_full_steps(timings, missing, stages, cfg, probe_config(configs, cfg), full)
        print(json.dumps({"index": i, "timings": timings.to_dict(), "missing": list(missing)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
