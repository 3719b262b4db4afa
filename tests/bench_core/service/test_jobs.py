"""JobManager: FIFO, one stage at a time, cancel, immutable snapshots, jobs outlive sessions."""
import dataclasses
import os
import time

import pytest

from bench_core.config.settings import Limits
from bench_core.levers.presets import PRESETS
from bench_core.levers.stage import Stage
from bench_core.machine.probe import Probe
from bench_core.results.formats import ImportRejected, to_json
from bench_core.results.records import Status
from bench_core.results.store import Store
from bench_core.run.runner import new_run, plan_jobs
from bench_core.service.jobs import JobManager, JobSnapshot, LimitExceeded, NotAllowed
from helpers import CFG, PROBE, FakeRunner, sample_run, wait, wait_for


@pytest.fixture
def store(tmp_path):
    return Store(str(tmp_path / "runs.sqlite3"))


def test_jobs_run_in_fifo_order_one_stage_at_a_time(store):
    runner = FakeRunner()
    manager = JobManager(store, Limits(max_jobs_per_session=10), probe=PROBE, runner=runner)
    ids = [manager.submit(dataclasses.replace(CFG, seed=i), PRESETS["native"][:2], "native", f"s{i}").job_id
           for i in range(4)]
    assert [q.position for q in manager.queued()] == list(range(len(manager.queued())))
    for job_id in ids:
        wait(manager, job_id)
    assert [seed for seed, _ in runner.calls] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert runner.max_running == 1
    finished = [manager.snapshot(i) for i in ids]
    assert all(s.status == Status.DONE for s in finished)
    assert all(finished[i].started_at >= finished[i - 1].finished_at for i in range(1, 4))
    manager.shutdown()


def test_snapshots_never_change_under_the_reader(store):
    manager = JobManager(store, Limits(), probe=PROBE, runner=FakeRunner(seconds=0.5))
    job = manager.submit(CFG, [Stage()], "custom", "s")
    wait_for(lambda: manager.snapshot(job.job_id).run.stages[0].times_ms, what="the first iteration")
    held = manager.snapshot(job.job_id)
    frozen = (held.status, held.version, held.run.stages[0].times_ms)
    wait(manager, job.job_id)
    assert (held.status, held.version, held.run.stages[0].times_ms) == frozen
    with pytest.raises(dataclasses.FrozenInstanceError):
        held.status = Status.DONE
    assert manager.snapshot(job.job_id).version > held.version
    manager.shutdown()


def test_job_survives_its_submitting_session(store):
    manager = JobManager(store, Limits(), probe=PROBE, runner=FakeRunner())

    def a_browser_tab():
        return manager.submit(CFG, [Stage(), Stage("adam-fused")], "custom", session_id="tab-1").job_id

    job_id = a_browser_tab()  # the tab is gone; only the manager holds the job
    done = wait(manager, job_id)
    assert done.status == Status.DONE and done.session_id == "tab-1"
    assert [j.job_id for j in manager.jobs()] == [job_id]  # another viewer sees it
    assert store.load_run(job_id).status == Status.DONE
    manager.shutdown()


def test_cancel_kills_the_running_stage_and_drops_the_rest(store):
    env = {**os.environ, "BENCH_TEST_FAULT": "hang@adam+layernorm+fp32"}
    manager = JobManager(store, Limits(), probe=PROBE, env=env)
    job = manager.submit(CFG, [Stage(), Stage("adam-fused"), Stage("adam-loop")], "custom", "s")
    wait_for(lambda: manager.snapshot(job.job_id).run.stages[0].status == Status.RUNNING, what="stage 1 to run")
    time.sleep(1.0)
    start = time.monotonic()
    manager.cancel(job.job_id)
    done = wait(manager, job.job_id)
    elapsed = time.monotonic() - start
    assert done.status == Status.CANCELLED and elapsed < 5
    assert [s.status for s in done.run.stages] == [Status.CANCELLED] * 3
    assert [s.reason for s in done.run.stages] == ["cancelled by user", "job cancelled", "job cancelled"]
    assert [s.status for s in store.load_run(job.job_id).stages] == [Status.CANCELLED] * 3
    assert store.load_run(job.job_id).status == Status.CANCELLED
    manager.shutdown()


def test_cancel_a_queued_job_never_runs_it_and_unavailable_stages_stay_unavailable(store):
    runner = FakeRunner(seconds=0.5)
    manager = JobManager(store, Limits(), probe=PROBE, runner=runner)
    first = manager.submit(CFG, [Stage()], "custom", "a")
    second = manager.submit(dataclasses.replace(CFG, seed=99), [Stage(), Stage("apex-fusedadam")], "custom", "b")
    cancelled = manager.cancel(second.job_id)
    assert cancelled.status == Status.CANCELLED
    wait(manager, first.job_id)
    assert all(seed != 99 for seed, _ in runner.calls)
    run = manager.snapshot(second.job_id).run
    assert [s.status for s in run.stages] == [Status.CANCELLED, Status.UNAVAILABLE]
    assert run.stages[1].reason == "Apex FusedAdam runs CUDA kernels only (amp_C); no CPU path"
    assert [s.status for s in store.load_run(second.job_id).stages] == [Status.CANCELLED, Status.UNAVAILABLE]
    manager.shutdown()


@pytest.mark.slow
def test_real_stage_processes_through_the_manager(store):
    manager = JobManager(store, Limits(), probe=PROBE)
    job = manager.submit(CFG, PRESETS["seed"], "seed", "s")
    done = wait(manager, job.job_id, timeout=180)
    assert [s.status for s in done.run.stages] == [Status.OK] + [Status.UNAVAILABLE] * 3
    saved = store.load_run(job.job_id)
    assert saved.status == Status.DONE and len(saved.stages[0].times_ms) == CFG.iters
    assert saved.stages[0].profile is not None and saved.stages[0].profile.source == "cpu"
    manager.shutdown()


def test_cpu_jobs_leave_the_server_a_core(store):
    """A CPU job's workers get cores - 1 torch threads (in each StageJob), so the dashboard stays responsive."""
    seen = {}

    def runner(run, probe, hooks):
        seen["threads"] = hooks.worker_threads
        seen["jobs"] = plan_jobs(run, probe, hooks.worker_threads)
        return dataclasses.replace(run, status=Status.DONE)

    manager = JobManager(store, Limits(), probe=PROBE, env={"PATH": os.environ["PATH"]}, runner=runner)
    wait(manager, manager.submit(CFG, [Stage()], "custom", "s").job_id)
    assert seen["threads"] == max(1, (os.cpu_count() or 2) - 1)
    assert [job.threads for _, job in seen["jobs"]] == [seen["threads"]]
    manager.shutdown()


def test_limits_and_roles_are_enforced_at_the_api(store):
    limits = Limits(max_queue_length=1, max_jobs_per_session=1, max_stages_per_job=2)
    manager = JobManager(store, limits, probe=PROBE, runner=FakeRunner(seconds=1.0))
    with pytest.raises(NotAllowed):
        manager.submit(CFG, [Stage()], "custom", "v", role="viewer")
    with pytest.raises(LimitExceeded, match="3 stages exceed the limit of 2"):
        manager.submit(CFG, [Stage()] * 3, "custom", "a")
    job = manager.submit(CFG, [Stage()], "custom", "a")
    wait_for(lambda: manager.snapshot(job.job_id).status == Status.RUNNING, what="the job to start")
    with pytest.raises(LimitExceeded, match="limit 1 per session"):
        manager.submit(CFG, [Stage()], "custom", "a")
    manager.submit(CFG, [Stage()], "custom", "b")
    with pytest.raises(LimitExceeded, match=r"the queue is full \(1 jobs waiting\)"):
        manager.submit(CFG, [Stage()], "custom", "c")
    with pytest.raises(NotAllowed):
        manager.cancel(job.job_id, role="viewer")
    manager.shutdown()


def test_import_and_reprobe_are_refused_to_viewers_at_the_api(store):
    probes = []

    def probe_runner(measure_again=False):
        probes.append(measure_again)
        return PROBE

    manager = JobManager(store, Limits(), probe=PROBE, runner=FakeRunner(), probe_runner=probe_runner)
    data = to_json(sample_run()).encode()
    with pytest.raises(NotAllowed, match="only an operator may import runs"):
        manager.import_file("run.json", data, role="viewer")
    with pytest.raises(NotAllowed, match="only an operator may probe the machine again"):
        manager.reprobe(role="viewer")
    time.sleep(0.2)
    assert store.list_runs() == [] and probes == []
    # an operator may do both
    message = manager.import_file("run.json", data)
    assert message.startswith("Imported 1 run(s) from run.json: run ") and len(store.list_runs()) == 1
    manager.reprobe()
    wait_for(lambda: probes, what="the probe to run again")
    assert probes == [True]  # asked to measure again, not to read a cache
    manager.shutdown()


def test_import_never_overwrites_and_says_so(store):
    manager = JobManager(store, Limits(), probe=PROBE, runner=FakeRunner())
    run = sample_run()
    data = to_json(run).encode()
    assert manager.import_file("a.json", data) == f"Imported 1 run(s) from a.json: run {run.run_id}."
    again = manager.import_file("a.json", data)
    assert (f"a duplicate: run {run.run_id} already exists here, so it was imported again as run "
            f"{run.run_id}-imp-") in again
    assert len(store.list_runs()) == 2
    with pytest.raises(ImportRejected, match="missing columns"):
        manager.import_file("b.csv", b"a,b\n1,2\n")
    assert len(store.list_runs()) == 2
    manager.shutdown()


def test_a_measured_probe_is_refreshed_after_each_job(store):
    """No probe given: it is measured in the background, and again after each job (free memory changes)."""
    calls = []

    def probe_runner():
        calls.append(time.time())
        return Probe.from_dict({**PROBE.to_dict(), "cpu": {"available_bytes": len(calls) * 2**30}})

    manager = JobManager(store, Limits(), runner=FakeRunner(), probe_runner=probe_runner)
    assert manager.probe(timeout=10).free_bytes["cpu"] == 2**30
    wait(manager, manager.submit(CFG, [Stage()], "custom", "s").job_id)
    wait_for(lambda: len(calls) == 2, what="the probe after the job")
    assert manager.probe().free_bytes["cpu"] == 2 * 2**30
    manager.shutdown()


def test_eta_comes_from_what_the_job_has_measured():
    run = new_run(CFG, [Stage(), Stage("adam-fused"), Stage("adam-loop")], PROBE, "custom")
    first = dataclasses.replace(run.stages[0], status=Status.OK, times_ms=(10.0,) * 3, wall_s=2.03)
    second = dataclasses.replace(run.stages[1], status=Status.RUNNING, times_ms=(10.0,))
    run = run.with_stage(first).with_stage(second)
    snap = JobSnapshot("j", "s", Status.RUNNING, run, submitted_at=0.0, started_at=1.0)
    # 2 iterations left in stage 2 + 3 in stage 3 at 10 ms, plus stage 3's start-up overhead (2.03 - 0.03 s)
    assert snap.eta_s() == pytest.approx(0.05 + 2.0)
    assert dataclasses.replace(snap, status=Status.DONE).eta_s() is None
    # two rounds: every unfinished stage still has its iterations and its overhead in each round not started yet
    # (stage 2's second round, stage 3's two)
    twice = dataclasses.replace(snap, run=dataclasses.replace(run, config=dataclasses.replace(CFG, repeats=2)))
    assert twice.eta_s() == pytest.approx((5 + 6) * 0.010 + 3 * 2.0)
