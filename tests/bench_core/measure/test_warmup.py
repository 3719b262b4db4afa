"""The warm-up's record (worker → event → fold → JSON → back) and the rule for when a process had settled."""
import json
import sys
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from bench_core.levers.stage import Stage
from bench_core.measure.warmup import CLOCK_STEP_MHZ, Settled, WarmupTrace, clock_settled_s, settle
from bench_core.results.formats import ImportRejected, parse_json, to_json
from bench_core.results.records import initial_stage
from bench_core.run import events as ev
from bench_core.run import step as step_module
from bench_core.run.runner import StageFold
from bench_core.run.warmup_record import WarmupRecorder
from helpers import ROOT, sample_runs

DOCS = ROOT / "docs" / "data"
BAND = (24.9, 25.2)   # the stage's timed p10-p90 in these synthetic series


def trace(step_ms, clock_mhz=(), every_s=0.05, clock_every_s=0.1, untimed=0):
    """Steps every `every_s` from 0; clock samples every `clock_every_s` from 0."""
    n = len(step_ms)
    return WarmupTrace(steps=n + untimed, seconds=round(n * every_s, 6), step_ms=tuple(step_ms),
                       step_start_s=tuple(round(i * every_s, 6) for i in range(n)), clock_mhz=tuple(clock_mhz),
                       clock_s=tuple(round(i * clock_every_s, 6) for i in range(len(clock_mhz))))


# Steps 0-6 slow (allocator, heuristics), every step from 7 on inside the band.
SETTLING_AT_7 = (40.0, 35.0, 31.0, 28.0, 27.0, 26.5, 26.2) + (25.0,) * 13


# ------------------------------------------------------------------------------------------- the settle rule
def test_step_times_settling_at_step_7_with_the_clock_already_flat():
    # clock ramps to 1980 by the sample at 0.3 s; step 7 starts at 0.35 s, after it
    got = settle(trace(SETTLING_AT_7, (1500, 1700, 1900) + (1980,) * 7), 1980, BAND)
    assert got == Settled(steps=7, seconds=0.35, clock_checked=True)


def test_a_clock_still_ramping_holds_the_settle_point_back():
    """Times are in the band from step 7 (0.35 s), but the clock reaches its timed median only at 0.6 s: the
    first step starting then (step 12) is where the process had settled."""
    clock = (1400, 1500, 1600, 1700, 1800, 1900) + (1980,) * 4
    assert clock_settled_s(trace(SETTLING_AT_7, clock), 1980) == 0.6
    assert settle(trace(SETTLING_AT_7, clock), 1980, BAND) == Settled(steps=12, seconds=0.6, clock_checked=True)


def test_one_clock_step_off_the_median_is_at_it_and_more_is_not():
    at = (1980 - CLOCK_STEP_MHZ, 1980 + CLOCK_STEP_MHZ, 1980)
    assert clock_settled_s(trace(SETTLING_AT_7, at), 1980) == 0.0
    off = (1980 - CLOCK_STEP_MHZ - 1, 1980, 1980)
    assert clock_settled_s(trace(SETTLING_AT_7, off), 1980) == 0.1


def test_a_clock_that_falls_back_at_the_end_never_settled():
    clock = (1980,) * 8 + (1800, 1980)
    assert clock_settled_s(trace(SETTLING_AT_7, clock), 1980) == 0.9
    assert settle(trace(SETTLING_AT_7, clock[:-1]), 1980, BAND) is None   # its last sample still off


def test_an_out_of_band_step_inside_the_run_moves_the_settle_point_past_it():
    times = list(SETTLING_AT_7)
    times[9] = 26.0
    assert settle(trace(times), None, BAND) == Settled(steps=10, seconds=0.5, clock_checked=False)


def test_fewer_in_band_steps_than_the_run_at_the_end_is_not_settled():
    times = (30.0,) * 10 + (25.0,) * 4
    assert settle(trace(times), None, BAND) is None
    assert settle(trace(times + (25.0,)), None, BAND) == Settled(steps=10, seconds=0.5, clock_checked=False)


def test_without_clock_samples_step_times_alone_decide_and_say_so():
    got = settle(trace(SETTLING_AT_7), 1980, BAND)     # a target, but no sample in the warm-up (no NVML)
    assert got == Settled(steps=7, seconds=0.35, clock_checked=False)


def test_a_graphs_stages_eager_capture_steps_count_before_the_first_recorded_step():
    got = settle(trace(SETTLING_AT_7, untimed=3), None, BAND)
    assert got is not None and got.steps == 3 + 7


# ------------------------------------------------------------------------------------ recorded in the worker
def test_the_warm_up_loop_records_every_step_and_its_start(monkeypatch):
    """The real warm_up on CPU with a step that sleeps 20 ms: one perf_counter time and one start per loop step."""
    monkeypatch.setattr(step_module, "WARMUP_MIN_S", 0.0)
    built = SimpleNamespace(capture=None, step=lambda: time.sleep(0.02), sync=lambda: None, cuda=False,
                            cfg=SimpleNamespace(warmup=4), ddp=SimpleNamespace(enabled=False))
    record = WarmupRecorder(cuda=False, torch=None)
    steps, seconds = step_module.warm_up(built, None, lambda *_: None, None, record)
    got = record.trace(steps, seconds)
    assert steps == 4 and got.steps == 4 and got.seconds == seconds and got.untimed_steps == 0
    assert len(got.step_ms) == len(got.step_start_s) == 4 and all(ms >= 20 for ms in got.step_ms)
    starts = got.step_start_s
    assert starts[0] >= 0 and all(b >= a + ms / 1e3 - 1e-4 for a, b, ms in zip(starts, starts[1:], got.step_ms,
                                                                                strict=False))
    assert got.clock_mhz == got.clock_s == ()   # CPU: no clock to sample


def test_the_warm_up_runs_on_until_released(monkeypatch):
    """A gated worker's warm-up ends only once the runner has released it (the next worker has built), however
    many steps and seconds it already has."""
    monkeypatch.setattr(step_module, "WARMUP_MIN_S", 0.0)
    steps = []
    built = SimpleNamespace(capture=None, step=lambda: steps.append(1), sync=lambda: None, cuda=False,
                            cfg=SimpleNamespace(warmup=2), ddp=SimpleNamespace(enabled=False))
    done, _ = step_module.warm_up(built, None, lambda *_: None, None, None, released=lambda: len(steps) >= 40)
    assert done == 40


def test_on_cuda_the_warm_up_waits_only_for_the_step_before_the_one_it_queued(monkeypatch):
    """One step always queued behind the one running, as in the timed loop: after step k is queued the host
    waits for the end of step k-1, never for step k itself, until the warm-up ends (one sync)."""
    monkeypatch.setattr(step_module, "WARMUP_MIN_S", 0.0)
    log: list = []

    class Event:
        def __init__(self, enable_timing=False):
            self.step = len([x for x in log if x[0] == "step"])

        def record(self):
            pass

        def synchronize(self):
            log.append(("wait", self.step))

    fake = SimpleNamespace(cuda=SimpleNamespace(Event=Event))
    built = SimpleNamespace(capture=None, step=lambda: log.append(("step",)), sync=lambda: log.append(("sync",)),
                            cuda=True, cfg=SimpleNamespace(warmup=4), ddp=SimpleNamespace(enabled=False))
    step_module.warm_up(built, None, lambda *_: None, fake, None)
    assert log == [("step",), ("step",), ("wait", 1), ("step",), ("wait", 2), ("step",), ("wait", 3), ("sync",)]


def test_a_graphs_capture_is_counted_but_not_timed_as_a_loop_step(monkeypatch):
    monkeypatch.setattr(step_module, "WARMUP_MIN_S", 0.0)
    built = SimpleNamespace(capture=lambda: time.sleep(0.03), step=lambda: None, sync=lambda: None, cuda=False,
                            cfg=SimpleNamespace(warmup=5), ddp=SimpleNamespace(enabled=False))
    record = WarmupRecorder(cuda=False, torch=None)
    got = record.trace(*step_module.warm_up(built, None, lambda *_: None, None, record))
    assert got.steps == 5 and len(got.step_ms) == 2 and got.untimed_steps == step_module.GRAPH_WARMUP_STEPS
    assert got.step_start_s[0] >= 0.03   # the first loop step starts after the capture


# ------------------------------------------------------------------------------ into the result, the JSON, back
ROUND_TRACES = (trace(SETTLING_AT_7, (1900, 1980, 1980)), trace((30.0, 25.0, 25.1), (1980, 1980)))


def folded_stage():
    """Two rounds of one stage through the worker's events, encoded and decoded as the pipe carries them."""
    result = initial_stage(0, Stage(), 3)
    for rnd, t in enumerate(ROUND_TRACES):
        fold = StageFold(result, lambda _: None)   # one fold a process, as run_worker does
        events = [ev.Started(), ev.Warmup(seconds=t.seconds + rnd, iters=t.steps, trace=t.to_dict()),
                  *(ev.Iter(i=i, ms=25.0) for i in range(3)), ev.Memory()]
        for event in events:
            fold.apply(ev.decode(event.encode()))
        result = fold.result
    return result


def test_every_process_warm_up_is_kept_in_round_order_and_the_first_still_names_the_warm_up():
    stage = folded_stage()
    assert stage.warmups == ROUND_TRACES and stage.rounds == (3, 3)
    assert stage.warmup_s == ROUND_TRACES[0].seconds and stage.warmup_steps == ROUND_TRACES[0].steps


def run_with_warmups():
    run = sample_runs().gpu_run()
    return replace(run, stages=(replace(run.stages[0], warmups=ROUND_TRACES), *run.stages[1:]))


def test_warm_ups_travel_into_the_json_and_back():
    run = run_with_warmups()
    doc = json.loads(to_json(run))
    assert [w["step_ms"] for w in doc["stages"][0]["warmups"]] == [list(t.step_ms) for t in ROUND_TRACES]
    assert "warmups" not in doc["summary"][0]   # raw JSON only: no summary (CSV) column
    [back] = parse_json(to_json(run).encode())
    assert back.stages[0].warmups == ROUND_TRACES and back.stages[1].warmups == ()


def test_a_file_written_before_warm_ups_were_recorded_still_imports():
    doc = json.loads(to_json(run_with_warmups()))
    for stage in doc["stages"]:
        del stage["warmups"]
    [back] = parse_json(json.dumps(doc).encode())
    assert all(s.warmups == () for s in back.stages)
    [h200] = parse_json((DOCS / "h200_2026-12-03_call12_seed_small_after_apex.json").read_bytes())
    assert h200.stages and all(s.warmups == () for s in h200.stages)


@pytest.mark.parametrize("edit,message", [
    (lambda w: w.update(step_ms=[25.0, -1.0] + w["step_ms"][2:]),
     "stage 0, warmups[1], field step_ms[1]: -1.0 is not a non-negative number"),
    (lambda w: w.update(clock_s=w["clock_s"][:1]), "stage 0, warmups[1], fields clock_mhz and clock_s: 2 and 1"),
    (lambda w: w.update(steps=2), "stage 0, warmups[1], field step_ms: 3 steps, over the 2 run"),
])
def test_a_malformed_warm_up_record_is_rejected_naming_its_field(edit, message):
    doc = json.loads(to_json(run_with_warmups()))
    edit(doc["stages"][0]["warmups"][1])
    with pytest.raises(ImportRejected, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_json(json.dumps(doc).encode())


class _FakeEvent:
    """torch.cuda.Event's part the recorder and the warm-up loop use: the time between two records, here
    perf_counter's; `synchronize` is a no-op (the fake step has finished when it returns)."""

    def __init__(self, enable_timing=False):
        pass

    def synchronize(self):
        pass

    def record(self):
        self.at = time.perf_counter()

    def elapsed_time(self, end):
        return (end.at - self.at) * 1e3


def test_on_cuda_the_steps_are_timed_by_events_and_the_clock_sampled_with_its_times(monkeypatch):
    """The CUDA path without a GPU: events stand in for CUDA's, a scripted NVML for the GPU's clock (ramping,
    then flat). Every clock sample comes back with its time from the warm-up's start, in order."""
    clocks = iter([1500, 1700, 1900] + [1980] * 10_000)
    nvml = SimpleNamespace(nvmlInit=lambda: None, nvmlShutdown=lambda: None, NVML_CLOCK_SM=0,
                           nvmlDeviceGetHandleByIndex=lambda i: "gpu0",
                           nvmlDeviceGetClockInfo=lambda h, kind: next(clocks))
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(step_module, "WARMUP_MIN_S", 0.25)
    fake_torch = SimpleNamespace(cuda=SimpleNamespace(current_device=lambda: 0, Event=_FakeEvent))
    record = WarmupRecorder(cuda=True, torch=fake_torch)
    record._sampler.every_s = 0.02
    built = SimpleNamespace(capture=None, step=lambda: time.sleep(0.01), sync=lambda: None, cuda=True,
                            cfg=SimpleNamespace(warmup=1), ddp=SimpleNamespace(enabled=False))
    got = record.trace(*step_module.warm_up(built, None, lambda *_: None, fake_torch, record))
    assert got.steps == len(got.step_ms) >= 10 and all(ms >= 10 for ms in got.step_ms)
    assert got.clock_mhz[:4] == (1500, 1700, 1900, 1980) and len(got.clock_mhz) == len(got.clock_s) >= 5
    assert list(got.clock_s) == sorted(got.clock_s) and 0 <= got.clock_s[0] and got.clock_s[-1] <= got.seconds + 0.05
    assert 0 < clock_settled_s(got, 1980) < got.seconds   # the ramp's end, from the samples' own times
