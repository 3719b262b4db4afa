"""The runner lets the next stage's worker touch the device only while this stage warms up: `build` goes to the
next worker once this one has started, and this one's warm-up is released only once the next has built."""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import replace
from types import SimpleNamespace

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.stage import Stage
from bench_core.results.records import initial_stage
from bench_core.run import events as ev
from bench_core.run.processes import StageJob
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


def test_two_steps_fit_twice_is_read_from_the_free_memory_and_the_steps_estimate():
    from bench_core.models.families import estimate_memory
    from bench_core.run.runner import new_run, steps_fit_twice
    cfg = BenchConfig(device="cuda", batch_size=32)
    need = estimate_memory(cfg)["total_bytes"]
    run = replace(new_run(cfg, [Stage()], SimpleNamespace(cuda_available=True), "custom"), device="cuda")
    assert steps_fit_twice(run, SimpleNamespace(free_bytes={"cuda": 2 * need}))
    assert not steps_fit_twice(run, SimpleNamespace(free_bytes={"cuda": 2 * need - 1}))
    assert steps_fit_twice(run, SimpleNamespace(free_bytes={}))   # unknown: as before
    assert steps_fit_twice(replace(run, device="cpu"), SimpleNamespace(free_bytes={"cpu": 1}))


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


def test_with_bench_build_profile_a_worker_writes_where_its_build_and_imports_went(tmp_path, monkeypatch, tiny_cfg):
    """A benchmark's tool (benchmarks/h200.sh buildprof): the build's costliest calls and the worker's imports."""
    from helpers import built_event
    monkeypatch.setenv("BENCH_BUILD_PROFILE", str(tmp_path))
    built_event(StageJob(tiny_cfg, Stage(), "cpu"))
    build = (tmp_path / "build_adam_layernorm_fp32_r0.txt").read_text()
    assert "cumulative" in build and "build_stage" in build
    imports = next(tmp_path.glob("imports_r0_*.txt")).read_text()
    assert imports.startswith("torch: ") and "torch._dynamo: " in imports
