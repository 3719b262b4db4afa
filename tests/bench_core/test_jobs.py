"""JobManager: FIFO, one stage at a time, cancel, immutable snapshots, jobs outlive sessions."""
import dataclasses
import os
import threading
import time

import pytest

from bench_core.config import BenchConfig
from bench_core.jobs import JobManager, LimitExceeded, NotAllowed
from bench_core.levers import PRESETS, Stage
from bench_core.runner import initial_stage, run_stage
from bench_core.settings import Limits
from bench_core.store import Store

CFG = BenchConfig(depth=1, width=32, heads=2, seq_len=16, batch_size=2, vocab_size=64, warmup=1, iters=3, device="cpu")
PROBE = {"cuda": {"available": False}, "cpu": {"available_bytes": 8 * 2**30}, "apex": {"status": "missing"},
         "adam_fused": {"cpu": True}, "bf16": {"cpu": True}, "fp16": {"cpu": True},
         "compile": {"cpu": {"usable": True}}}


class FakeRunner:
    """Records the order and overlap of stage runs; each takes `seconds`."""

    def __init__(self, seconds=0.05):
        self.seconds, self.calls, self.running, self.max_running = seconds, [], 0, 0
        self.lock = threading.Lock()

    def __call__(self, cfg, stage, index, device, probe, *, on_update=None, cancel=None, **_):
        with self.lock:
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            self.calls.append((cfg.seed, index))
        result = initial_stage(index, stage, cfg.iters)
        for i in range(cfg.iters):
            if cancel is not None and cancel.is_set():
                result = dataclasses.replace(result, status="cancelled", reason="cancelled by user")
                break
            time.sleep(self.seconds / cfg.iters)
            result = dataclasses.replace(result, status="running", times_ms=result.times_ms + (1.0,),
                                         losses=result.losses + (4.0,))
            on_update(result)
        else:
            result = dataclasses.replace(result, status="ok")
        with self.lock:
            self.running -= 1
        return result


def wait(manager, job_id, timeout=60):
    deadline = time.time() + timeout
    while manager.snapshot(job_id).active:
        assert time.time() < deadline, "job did not finish"
        time.sleep(0.02)
    return manager.snapshot(job_id)


@pytest.fixture
def store(tmp_path):
    return Store(str(tmp_path / "runs.sqlite3"))


def test_jobs_run_in_fifo_order_one_stage_at_a_time(store):
    runner = FakeRunner()
    manager = JobManager(store, Limits(max_jobs_per_session=10), probe=PROBE, stage_runner=runner)
    ids = [manager.submit(dataclasses.replace(CFG, seed=i), PRESETS["native"][:2], "native", f"s{i}").job_id
           for i in range(4)]
    assert [q.position for q in manager.queued()] == list(range(len(manager.queued())))
    for job_id in ids:
        wait(manager, job_id)
    assert [seed for seed, _ in runner.calls] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert runner.max_running == 1
    finished = [manager.snapshot(i) for i in ids]
    assert all(s.status == "done" for s in finished)
    assert all(finished[i].started_at >= finished[i - 1].finished_at for i in range(1, 4))
    manager.shutdown()


def test_snapshots_never_change_under_the_reader(store):
    manager = JobManager(store, Limits(), probe=PROBE, stage_runner=FakeRunner(seconds=0.5))
    job = manager.submit(CFG, [Stage()], "custom", "s")
    time.sleep(0.2)
    held = manager.snapshot(job.job_id)
    frozen = (held.status, held.version, held.run.stages[0].times_ms)
    wait(manager, job.job_id)
    assert (held.status, held.version, held.run.stages[0].times_ms) == frozen
    with pytest.raises(dataclasses.FrozenInstanceError):
        held.status = "done"
    assert manager.snapshot(job.job_id).version > held.version
    manager.shutdown()


def test_job_survives_its_submitting_session(store):
    manager = JobManager(store, Limits(), probe=PROBE, stage_runner=FakeRunner())

    def a_browser_tab():
        return manager.submit(CFG, [Stage(), Stage("adam-fused")], "custom", session_id="tab-1").job_id

    job_id = a_browser_tab()  # the tab is gone; only the manager holds the job
    done = wait(manager, job_id)
    assert done.status == "done" and done.session_id == "tab-1"
    assert [j.job_id for j in manager.jobs()] == [job_id]  # another viewer sees it
    assert store.load_run(job_id).status == "done"
    manager.shutdown()


def test_cancel_kills_the_running_stage_and_drops_the_rest(store):
    env = {**os.environ, "BENCH_TEST_FAULT": "hang@adam+layernorm+fp32"}
    manager = JobManager(store, Limits(), probe=PROBE, env=env)
    job = manager.submit(CFG, [Stage(), Stage("adam-fused"), Stage("adam-loop")], "custom", "s")
    deadline = time.time() + 60
    while manager.snapshot(job.job_id).status != "running":
        assert time.time() < deadline
        time.sleep(0.05)
    time.sleep(1.0)
    start = time.monotonic()
    manager.cancel(job.job_id)
    done = wait(manager, job.job_id)
    elapsed = time.monotonic() - start
    assert done.status == "cancelled" and elapsed < 5
    assert [s.status for s in done.run.stages] == ["cancelled"] * 3
    assert [s.status for s in store.load_run(job.job_id).stages] == ["cancelled"] * 3
    manager.shutdown()


def test_cancel_a_queued_job_never_runs_it(store):
    runner = FakeRunner(seconds=0.5)
    manager = JobManager(store, Limits(), probe=PROBE, stage_runner=runner)
    first = manager.submit(CFG, [Stage()], "custom", "a")
    second = manager.submit(dataclasses.replace(CFG, seed=99), [Stage()], "custom", "b")
    manager.cancel(second.job_id)
    wait(manager, first.job_id)
    assert manager.snapshot(second.job_id).status == "cancelled"
    assert all(seed != 99 for seed, _ in runner.calls)
    manager.shutdown()


def test_real_stage_processes_through_the_manager(store):
    manager = JobManager(store, Limits(), probe=PROBE, stage_runner=run_stage)
    job = manager.submit(CFG, PRESETS["seed"], "seed", "s")
    done = wait(manager, job.job_id, timeout=120)
    assert [s.status for s in done.run.stages] == ["ok", "unavailable", "unavailable", "unavailable"]
    assert len(store.load_run(job.job_id).stages[0].times_ms) == CFG.iters
    manager.shutdown()


def test_limits_and_roles_are_enforced_at_the_api(store):
    limits = Limits(max_queue_length=1, max_jobs_per_session=1, max_stages_per_job=2)
    manager = JobManager(store, limits, probe=PROBE, stage_runner=FakeRunner(seconds=1.0))
    with pytest.raises(NotAllowed):
        manager.submit(CFG, [Stage()], "custom", "v", role="viewer")
    with pytest.raises(LimitExceeded, match="3 stages exceed the limit of 2"):
        manager.submit(CFG, [Stage()] * 3, "custom", "a")
    job = manager.submit(CFG, [Stage()], "custom", "a")
    while manager.snapshot(job.job_id).status != "running":
        time.sleep(0.01)
    with pytest.raises(LimitExceeded, match="limit 1 per session"):
        manager.submit(CFG, [Stage()], "custom", "a")
    manager.submit(CFG, [Stage()], "custom", "b")
    with pytest.raises(LimitExceeded, match=r"the queue is full \(1 jobs waiting\)"):
        manager.submit(CFG, [Stage()], "custom", "c")
    with pytest.raises(NotAllowed):
        manager.cancel(job.job_id, role="viewer")
    manager.shutdown()


def test_eta_comes_from_what_the_job_has_measured():
    from bench_core.jobs import JobSnapshot
    from bench_core.runner import new_run
    run = new_run(CFG, [Stage(), Stage("adam-fused"), Stage("adam-loop")], PROBE, "custom")
    first = dataclasses.replace(run.stages[0], status="ok", times_ms=(10.0,) * 3, wall_s=2.03)
    second = dataclasses.replace(run.stages[1], status="running", times_ms=(10.0,))
    run = run.with_stage(first).with_stage(second)
    snap = JobSnapshot("j", "s", "running", run, submitted_at=0.0, started_at=1.0)
    # 2 iterations left in stage 2 + 3 in stage 3 at 10 ms, plus stage 3's start-up overhead (2.03 - 0.03 s)
    assert snap.eta_s() == pytest.approx(0.05 + 2.0)
    assert dataclasses.replace(snap, status="done").eta_s() is None
