"""Gating: a worker built ahead does no build work until told (`build`), and its warm-up does not end until told
(`release`), checked on a real CPU worker by what it does and when; and the runner's side, which lets the next
stage's worker build only while this stage warms up and releases this one only once the next has built."""
from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench_core.config.bench_config import WARMUP_MIN_S, BenchConfig
from bench_core.levers.stage import Stage
from bench_core.models.families import param_count
from bench_core.results.records import initial_stage
from bench_core.run import events as ev
from bench_core.run.processes import StageJob, WorkerHandle
from bench_core.run.runner import RunHooks, run_worker


class FakeHandle:
    """A worker's handle: its events come from the test; what the runner tells it is logged."""

    def __init__(self, name: str, log: list, job: StageJob):
        self.name, self.log, self.job = name, log, job
        self.lines: queue.Queue = queue.Queue()
        self.settled = threading.Event()
        self.reader = threading.Thread(target=lambda: None)
        self.reader.start()
        self.proc = SimpleNamespace(wait=lambda timeout=None: 0)
        self.alive = False

    def build(self):
        self.log.append((self.name, "build"))

    def go(self):
        self.log.append((self.name, "go"))

    def release(self):
        self.log.append((self.name, "release"))

    def emit(self, event: ev.Event):
        self.lines.put(event.encode() + "\n")

    def kill(self):
        pass

    def close(self):
        pass

    def stderr_text(self):
        return ""


def _job(build_ahead=True):
    return StageJob(BenchConfig(device="cpu"), Stage(), "cpu", profile=False, build_ahead=build_ahead)


# --- the worker's side, a real worker on CPU: what a gated worker does while it waits ------------------------------
# A model whose weights (about 60 MB) stand well above what the interpreter frees and reuses while it imports, so
# that they show in the worker's resident memory when, and only when, it builds.
GATED = BenchConfig(depth=4, width=512, heads=8, seq_len=16, batch_size=1, vocab_size=4096, warmup=1, iters=4,
                    device="cpu")
HOLD_S = 3.0   # how long `build` is held back: longer than the build it holds (the test checks that)


def _rss_bytes(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:"))) * 1024


@dataclass
class Timeline:
    """A gated worker driven through its protocol by hand, each gate held HOLD_S: what came back, and when."""
    received: list[tuple[float, ev.Event]] = field(default_factory=list)   # (parent's perf_counter, event)
    before_build: list[ev.Event] = field(default_factory=list)            # every event before `build` was sent
    rss_at_build: int = 0
    rss_built: int = 0
    build_sent: float = 0.0
    before_release: list[ev.Event] = field(default_factory=list)          # every event after Started, before release
    release_sent: float = 0.0

    def first(self, kind: type[ev.Event]) -> tuple[float, ev.Event]:
        return next((at, e) for at, e in self.received if isinstance(e, kind))


def _past_its_minimum(progress: ev.WarmupProgress) -> bool:
    return progress.steps > GATED.warmup and progress.seconds > WARMUP_MIN_S


def _drain(handle, timeline: Timeline, until: type[ev.Event] | tuple[type[ev.Event], ...] | None,
           stop=lambda e: True, timeout: float = 60) -> list[ev.Event]:
    """Events as they come, up to the first `until` for which `stop` holds (None: whatever has arrived by now);
    nothing when one came already (a worker that did not wait)."""
    got: list[ev.Event] = []
    if until is not None and any(isinstance(e, until) and stop(e) for _, e in timeline.received):
        return got
    while True:
        try:
            line = handle.lines.get(timeout=timeout if until else 0.05)
        except queue.Empty:
            if until is None:
                return got
            raise AssertionError(f"no {until.name} event: {handle.stderr_text()[-2000:]}") from None
        assert line is not None, f"the worker ended early: {handle.stderr_text()[-2000:]}"
        event = ev.decode(line)
        if event is None:
            continue
        timeline.received.append((time.perf_counter(), event))
        got.append(event)
        if until is not None and isinstance(event, until) and stop(event):
            return got


@pytest.fixture(scope="module")
def gated_worker() -> Timeline:
    job = StageJob(GATED, Stage(), "cpu", profile=False)
    assert job.gated
    handle = WorkerHandle(job, dict(os.environ))
    timeline = Timeline()
    try:
        _drain(handle, timeline, ev.Ready)
        time.sleep(HOLD_S)            # it has its job (sent with the process): the gate alone holds it now
        timeline.before_build = [e for _, e in timeline.received] + _drain(handle, timeline, None)
        timeline.rss_at_build = _rss_bytes(handle.proc.pid)
        timeline.build_sent = time.perf_counter()
        handle.build()
        _drain(handle, timeline, ev.Built)
        timeline.rss_built = _rss_bytes(handle.proc.pid)
        handle.go()
        _drain(handle, timeline, ev.Started)
        # warming up: held past the point where its warm-up would end by itself (more than its minimum steps,
        # WARMUP_MIN_S gone), as its progress reports show; or until it ends it regardless
        timeline.before_release = _drain(handle, timeline, (ev.WarmupProgress, ev.Warmup, ev.Iter),
                                         lambda e: not isinstance(e, ev.WarmupProgress) or _past_its_minimum(e))
        timeline.release_sent = time.perf_counter()
        handle.release()
        _drain(handle, timeline, ev.Iter)   # its first timed step: enough, the rest is not gating's
    finally:
        handle.kill()
        handle.close()
    return timeline


@pytest.mark.slow
def test_a_gated_worker_does_no_build_before_build(gated_worker):
    """Another process may be timed while this one waits: it must not build (allocate, initialise) until told."""
    t = gated_worker
    assert [type(e) for e in t.before_build] == [ev.Ready]
    (_, ready), (built_at, built) = t.first(ev.Ready), t.first(ev.Built)
    # the premise: building takes less than the hold, so a worker that built at once would have shown it
    assert built_at - t.build_sent < HOLD_S, f"the build took {built_at - t.build_sent:.1f} s: hold it longer"
    # built after the hold, by the worker's own clock (its events' t, rounded to 1 ms)
    assert built.t - ready.t >= HOLD_S - 1e-3
    # its weights came into memory after `build`, not before: fp32, 4 bytes a parameter
    assert t.rss_built - t.rss_at_build >= 4 * param_count(GATED)


def test_a_gated_worker_warms_up_until_release(gated_worker):
    """Its timed steps must not start while the next worker builds: the warm-up goes on until `release`."""
    t = gated_worker
    # it went on past its minimum steps and seconds, where an ungated warm-up ends, and did not end it
    assert _past_its_minimum(t.before_release[-1])
    assert not [e for e in t.before_release if isinstance(e, (ev.Warmup, ev.Iter))]
    # it ended after `release`, having stepped on meanwhile; its timed steps came after
    warm_at, warm = t.first(ev.Warmup)
    assert warm_at > t.release_sent and warm.iters >= t.before_release[-1].steps
    assert t.first(ev.Iter)[0] > warm_at


# --- the runner's side: the order of what it tells its workers ----------------------------------------------------
def test_the_next_worker_builds_during_this_ones_warm_up_and_the_timed_steps_wait_for_it():
    log: list = []
    this, following = FakeHandle("this", log, _job()), FakeHandle("next", log, _job())

    def script():
        this.emit(ev.Started())
        while ("next", "build") not in log:
            pass
        assert ("this", "release") not in log      # the next one has not built yet: still warming up
        following.settled.set()                    # it has built
        while ("this", "release") not in log:
            pass
        this.emit(ev.Warmup(seconds=0.1, iters=3))
        this.emit(ev.Memory())
        this.emit(ev.Finished(wall_s=0.2))
    threading.Thread(target=script, daemon=True).start()
    run_worker(this, initial_stage(0, Stage(), 10), RunHooks(timeout_s=10), lambda r: None, lambda: None,
               following=following)
    assert log == [("this", "go"), ("next", "build"), ("this", "release")]


def test_the_timed_steps_wait_for_the_last_stages_worker_to_exit():
    """Its CUDA teardown runs after its result is in: device work that must not overlap this stage's timing."""
    log: list = []
    before, this = FakeHandle("before", log, _job()), FakeHandle("this", log, _job())
    before.alive = True

    def script():
        this.emit(ev.Started())
        while ("this", "go") not in log:
            pass
        assert ("this", "release") not in log
        log.append(("before", "exited"))
        before.alive = False
        while ("this", "release") not in log:
            pass
        this.emit(ev.Finished(wall_s=0.2))
    threading.Thread(target=script, daemon=True).start()
    run_worker(this, initial_stage(0, Stage(), 10), RunHooks(timeout_s=10), lambda r: None, lambda: None,
               previous=before)
    assert log == [("this", "go"), ("before", "exited"), ("this", "release")]


def test_where_two_steps_do_not_fit_the_warm_up_waits_for_the_last_worker_to_exit():
    """On an H100 a finished worker still holding its 47 GiB overlapped the next one's warm-up, which ran out of
    memory: with `after_exit` the next worker is not told to go until the last has exited."""
    log: list = []
    before, this = FakeHandle("before", log, _job()), FakeHandle("this", log, _job())
    before.alive = True

    def script():
        time.sleep(0.2)
        assert ("this", "go") not in log   # still waiting: the last worker holds the device's memory
        log.append(("before", "exited"))
        before.alive = False
        this.emit(ev.Started())
        this.emit(ev.Finished(wall_s=0.2))
    threading.Thread(target=script, daemon=True).start()
    run_worker(this, initial_stage(0, Stage(), 10), RunHooks(timeout_s=10), lambda r: None, lambda: None,
               previous=before, after_exit=True)
    assert log[:2] == [("before", "exited"), ("this", "go")]


def test_the_last_worker_or_an_ungated_one_is_never_held():
    log: list = []
    last = FakeHandle("last", log, _job())
    last.emit(ev.Started())
    last.emit(ev.Finished(wall_s=0.1))
    run_worker(last, initial_stage(0, Stage(), 10), RunHooks(timeout_s=10), lambda r: None, lambda: None)
    assert log == [("last", "go"), ("last", "release")]
    log.clear()
    ungated = FakeHandle("late", log, _job(build_ahead=False))   # builds after `go`: nothing to wait for
    ungated.emit(ev.Finished(wall_s=0.1))
    run_worker(ungated, initial_stage(0, Stage(), 10), RunHooks(timeout_s=10), lambda r: None, lambda: None)
    assert log == [("late", "go")]


def test_a_gated_worker_imports_its_kernel_packages_before_it_may_build(monkeypatch):
    """Host work done while waiting for `build`; a package that is missing is left to the build to report."""
    import sys

    from bench_core.machine.packages import KernelPackage
    from bench_core.run import worker
    monkeypatch.delitem(sys.modules, "json.tool", raising=False)
    stage = SimpleNamespace(packages=(KernelPackage("missing", "Missing", (), "no_such_module_here"),
                                      KernelPackage("tool", "json.tool", (), "json.tool")))
    worker.import_packages(stage)
    assert "json.tool" in sys.modules


@pytest.mark.slow
def test_with_bench_build_profile_a_worker_writes_where_its_build_and_imports_went(tmp_path, monkeypatch, tiny_cfg):
    """A benchmark's tool (benchmarks/h200.sh buildprof): the build's costliest calls and the worker's imports."""
    from helpers import built_event
    monkeypatch.setenv("BENCH_BUILD_PROFILE", str(tmp_path))
    built_event(StageJob(tiny_cfg, Stage(), "cpu"))
    build = (tmp_path / "build_adam_layernorm_fp32_r0.txt").read_text()
    assert "cumulative" in build and "build_stage" in build
    imports = next(tmp_path.glob("imports_r0_*.txt")).read_text()
    assert imports.startswith("torch: ") and "torch._dynamo: " in imports
