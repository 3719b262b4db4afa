"""A sweep's loop: every point's kernels timed in one measuring process (timing.process) and its speedup predicted;
then points run end to end, two stages each through the stages' own loop (run.runner.run_all), in the order the
planner picks (sweep.core.plan) while the budget lasts. Cancelling keeps every finished point.

Workers are not reused across points: each builds the point's own model, so its process is the point's. Compile
caches are: torch.compile's inductor and FX-graph caches live in one per-user folder every worker shares, so a
shape compiled once is loaded from there (compile time is not measured: it falls in the warm-up).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from bench_core.config.bench_config import BenchConfig, resolve_device
from bench_core.config.environment import child_env
from bench_core.machine.ceilings import Ceilings
from bench_core.machine.probe import Probe
from bench_core.measure.breakdown import Bound
from bench_core.results.records import Status
from bench_core.results.summary import summarize
from bench_core.run.runner import RunHooks, new_run, run_all
from bench_core.sweep.core import plan
from bench_core.sweep.core.predict import MissingTiming, predict
from bench_core.sweep.core.records import Phase, PointMeasurement, PointPrediction, PointResult, Progress, SweepResult
from bench_core.sweep.core.spec import Comparison, SweepPoint, SweepSpec
from bench_core.sweep.timing.messages import AHEAD, AHEAD_BEGINS, CUT, PART_TIMED, POINT_BEGINS, cut_point
from bench_core.sweep.timing.timings import PointTimings

Timed = tuple[int, PointTimings | None, tuple[str, ...]]   # (point index, its timings, parts not timed)
PredictPoints = Callable[[list[SweepPoint], Comparison, str, threading.Event], Iterator[Timed]]
MeasurePoint = Callable[[BenchConfig, Comparison, Probe, "SweepHooks"], PointMeasurement]


class _NoCeilings:
    """A sweep's speedups are ratios: its points never measure the GPU's ceilings."""

    def start(self) -> None:
        pass

    def measure(self) -> Ceilings | None:
        return None

    def close(self) -> None:
        pass


def predict_in_process(points: list[SweepPoint], comparison: Comparison, device: str,
                       cancel: threading.Event, env: dict | None = None, breakdown: bool = False) -> Iterator[Timed]:
    """Every point's timings from one timing process (`python -m bench_core.sweep.timing.process`; with
    `breakdown`, each part of a block alone as well); killed on cancel."""
    keys = [comparison.a.key, comparison.b.key]
    for position, timings, missing in time_in_process([(p.config, keys) for p in points], device, cancel, env,
                                                      breakdown):
        yield points[position].index, timings, missing


def time_in_process(requests: list[tuple[BenchConfig, list[str]]], device: str, cancel: threading.Event,
                    env: dict | None = None, breakdown: bool = False) -> Iterator[Timed]:
    """Each (config, stage keys) timed by one timing process, yielded by its position in `requests` as it is
    done; killed on cancel."""
    request = {"device": device, "configs": [cfg.to_dict() for cfg, _ in requests],
               "stages": [list(keys) for _, keys in requests], "breakdown": breakdown}
    proc = subprocess.Popen([sys.executable, "-m", "bench_core.sweep.timing.process"],  # noqa: S603 (our own argv)
                            env=child_env(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # Ctrl-C is the parent's
    stdin, stdout = proc.stdin, proc.stdout
    if stdin is None or stdout is None:
        raise OSError("the timing process has no pipes")
    stdin.write(json.dumps(request))
    stdin.close()

    def stop_on_cancel() -> None:   # ends with the process, so a server's sweeps leave no thread behind
        while proc.poll() is None:
            if cancel.wait(0.5):
                _kill_group(proc)
                return
    err: list[str] = []

    def drain() -> None:   # read as it is written: a full stderr pipe would block the timing process
        for line in proc.stderr or ():
            err.append(line.rstrip("\n"))
    threading.Thread(target=stop_on_cancel, daemon=True).start()
    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    seen: set[int] = set()
    try:
        for line in stdout:
            if not line.startswith("{"):
                continue
            data = json.loads(line)
            seen.add(data["index"])
            yield data["index"], PointTimings.from_dict(data["timings"]), tuple(data["missing"])
    finally:
        _kill_group(proc)   # its compiling-ahead children too (sweep.timing.ahead), were it stopped while they ran
        proc.wait()
        reader.join(timeout=5)
    if cancel.is_set():   # stopped mid-point: where that point's time went (its other points say why)
        cut = cut_point(err, seen)
        if cut is not None:
            yield cut[0], None, (cut[1],)
        return
    said = [line for line in err if line.strip() and not line.startswith((PART_TIMED, POINT_BEGINS, AHEAD,
                                                                          AHEAD_BEGINS))]
    for position in range(len(requests)):
        if position not in seen:
            yield position, None, (f"the timing process ended early: {said[-1] if said else 'no message'}",)


def _kill_group(proc: subprocess.Popen) -> None:
    """The timing process and its children: it leads its own session (start_new_session), so its group is its pid."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)   # before it is reaped: the group cannot be another's yet
        elif proc.poll() is None:
            proc.kill()
    except (ProcessLookupError, PermissionError):   # it and its children had ended
        pass


def measure_end_to_end(cfg: BenchConfig, comparison: Comparison, probe: Probe, hooks: SweepHooks) -> PointMeasurement:
    """Stage A then stage B as one two-stage run; B's speedup, interval, bottleneck and peak memory against A."""
    started = time.monotonic()
    run = run_all(new_run(cfg, [comparison.a, comparison.b], probe, "sweep"), probe,
                  RunHooks(cancel=hooks.cancel, worker_env=hooks.worker_env, timeout_s=hooks.timeout_s,
                           ceilings=_NoCeilings()))
    wall = time.monotonic() - started
    summary = summarize(run)
    sa, sb = summary.stage(0), summary.stage(1)
    if not (sa.ok and sb.ok and sb.speedup is not None):
        bad = sa if not sa.ok else sb
        return PointMeasurement(bad.status, f"{bad.key}: {bad.reason or bad.status.value}", wall_s=wall)
    ci = sb.interval
    return PointMeasurement(Status.OK, None, sb.speedup, ci.low if ci else None, ci.high if ci else None,
                            ci.text if ci else None, sa.timing.median_ms, sb.timing.median_ms,
                            sb.bottleneck.verdict.value, sa.peak_mem_mib, sb.peak_mem_mib, wall,
                            sa.profile.gpu_kernel_ms if sa.profile else None,
                            sb.profile.gpu_kernel_ms if sb.profile else None, sa.host_ms, sb.host_ms)


@dataclass
class SweepHooks:
    on_update: Callable[[SweepResult], None] | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    worker_env: dict | None = None
    timeout_s: float = 900.0
    clock: Callable[[], float] = time.monotonic
    predict_points: PredictPoints | None = None     # None: predict_in_process
    measure_point: MeasurePoint = measure_end_to_end


def new_sweep(spec: SweepSpec, points: list[SweepPoint], probe: Probe) -> SweepResult:
    device = resolve_device(spec.base.device, probe.cuda_available)
    return SweepResult(spec, device, probe.gpu_name if device == "cuda" else "CPU",
                       tuple(PointResult(p.index, p.values) for p in points))


def _prediction(timings: PointTimings | None, missing: tuple[str, ...], comparison: Comparison,
                device: str) -> tuple[PointPrediction | None, str | None]:
    if timings is None:
        return None, "; ".join(missing) or "not timed"
    try:   # a part of the breakdown that could not be timed leaves the prediction, made of whole steps, standing
        p = predict(timings, comparison.a, comparison.b)
    except MissingTiming as exc:
        return None, "; ".join((str(exc), *missing))
    # on a CPU ops run as they are called: no launch queue, so no bound to predict (as a measured CPU stage says)
    bound = p.b.bound if device == "cuda" else Bound.UNKNOWN
    return PointPrediction(p.speedup, p.low, p.high, p.a.step_ms, p.b.step_ms, bound.value, timings, p.a.gpu_ms,
                           p.b.gpu_ms, p.a.host_ms if device == "cuda" else None,
                           p.b.host_ms if device == "cuda" else None, p.a.peak_mib, p.b.peak_mib), None


def repredicted(result: SweepResult) -> SweepResult:
    """The result with each point's prediction made again from the timings it kept, by this checkout's predictor: a
    hindcast, to judge a change to the predictor on timings already taken (never a new measurement). A point
    without timings keeps what it had."""
    points = []
    for p in result.points:
        if p.prediction is not None:
            prediction, note = _prediction(p.prediction.timings, (), result.spec.comparison, result.device)
            p = replace(p, prediction=prediction, prediction_note=note)
        points.append(p)
    return replace(result, points=tuple(points))


def _stop_when(stop: threading.Event, cancel: threading.Event, left: Callable[[], float | None]
               ) -> Callable[[], bool]:
    """Sets `stop` once the user cancels or the budget is spent (checked twice a second until `stop` is set), and
    returns the budget's check, for between points."""
    def out_of_time() -> bool:
        remaining = left()
        return remaining is not None and remaining <= 0

    def watch() -> None:
        while not stop.is_set():
            if cancel.wait(0.5) or out_of_time():
                stop.set()
    threading.Thread(target=watch, name="bench-sweep-budget", daemon=True).start()
    return out_of_time


def _points(k: int) -> str:
    return f"{k} point" if k == 1 else f"{k} points"


def _candidate(p: PointResult) -> plan.Candidate:
    pred = p.prediction
    return plan.Candidate(p.index, pred.speedup, pred.low, pred.high) if pred else plan.Candidate(p.index, None)


def run_sweep(spec: SweepSpec, points: list[SweepPoint], probe: Probe, hooks: SweepHooks | None = None,
              result: SweepResult | None = None) -> SweepResult:
    hooks = hooks or SweepHooks()
    state = {"result": result or new_sweep(spec, points, probe)}
    start = hooks.clock()

    def publish(new: SweepResult) -> None:
        state["result"] = new
        if hooks.on_update:
            hooks.on_update(new)

    def left() -> float | None:
        return None if spec.budget_s is None else spec.budget_s - (hooks.clock() - start)

    comparison, n = spec.comparison, len(points)
    publish(replace(state["result"], progress=Progress(Phase.PREDICTING, 0, n, None)))
    predictor = hooks.predict_points or (lambda pts, c, d, cancel: predict_in_process(
        pts, c, d, cancel, hooks.worker_env, spec.breakdown))
    done, predicting = 0, hooks.clock()
    # the budget holds for the whole sweep, predicting too: the timing process is stopped when it is spent (a cold
    # compile cache could make the prediction alone outlast it), between points or inside one
    stop = threading.Event()
    out_of_time = _stop_when(stop, hooks.cancel, left)
    for index, timings, missing in predictor(points, comparison, state["result"].device, stop):
        prediction, note = _prediction(timings, missing, comparison, state["result"].device)
        point = replace(state["result"].points[index], prediction=prediction, prediction_note=note)
        done += 1
        publish(replace(state["result"].with_point(point), progress=Progress(Phase.PREDICTING, done, n, None)))
        if out_of_time():
            break
    stop.set()   # ends the watcher (and a timing process left running after a break)
    predict_s = hooks.clock() - predicting
    # only the budget leaves points untimed and unsaid (a process that ends early names them; a cancel keeps them)
    unpredicted = [p for p in state["result"].points if p.prediction is None and
                   (p.prediction_note is None or p.prediction_note.startswith(CUT))]
    if unpredicted and spec.budget_s and not hooks.cancel.is_set():
        said = f"the {spec.budget_s:.0f} s budget ran out while predicting"   # the reason: views say "not predicted"
        for p in unpredicted:   # the point it cut keeps where its time went
            note = f"{said}; {p.prediction_note}" if p.prediction_note else said
            state["result"] = state["result"].with_point(replace(p, prediction_note=note))
        publish(state["result"])
    walls: list[float] = []
    tried: set[int] = set()
    while not hooks.cancel.is_set():
        current = state["result"]
        candidates = [_candidate(p) for p in current.points if p.index not in tried]
        chosen = plan.next_point(candidates, current.calibration, left(), walls)
        if chosen is None:
            break
        index = chosen
        tried.add(index)
        publish(replace(current, progress=Progress(Phase.MEASURING, len(tried) - 1, n,
                                                   plan.eta_s(n - len(tried) + 1, left(), walls))))
        measurement = hooks.measure_point(points[index].config, comparison, probe, hooks)
        if measurement.wall_s is not None:
            walls.append(measurement.wall_s)
        if measurement.status == Status.CANCELLED:
            break
        publish(state["result"].with_point(replace(state["result"].points[index], measurement=measurement)))
    cancelled = hooks.cancel.is_set()
    final = replace(state["result"], status=Status.CANCELLED if cancelled else Status.DONE)
    breakdown_s = sum(p.prediction.timings.breakdown_s for p in final.points if p.prediction)
    full_s = sum(p.prediction.timings.full_step_s for p in final.points if p.prediction)
    ahead = next((p.prediction.timings.ahead for p in final.points if p.prediction and p.prediction.timings.ahead),
                 None)
    spent = ([ahead.words] if ahead else []) + (
        [f"{full_s:.0f} s of it timing the full-depth steps (once a sweep)"] if full_s else []) + (
        [f"{breakdown_s:.0f} s of it timing the breakdown's parts"] if spec.breakdown else [])
    notes = [final.tally, ", ".join([f"predicting took {predict_s:.0f} s", *spent])]
    untried = [p for p in final.points if p.index not in tried]
    kept = sum(p.prediction is not None for p in untried)
    if untried and not cancelled and not spec.budget_s:
        notes.append(f"{_points(len(untried))} not run")
    elif untried and not cancelled:
        on = "on the points nearest ×1.00" if tried else "predicting, before any point could run"
        if kept:   # those with no figure are counted in the tally
            notes.append(f"{_points(kept)} kept their prediction: the {spec.budget_s:.0f} s budget was spent {on}")
    final = replace(final, notes=tuple(notes), progress=Progress(Phase.DONE, len(tried), n, 0.0), predict_s=predict_s)
    publish(final)
    return final
