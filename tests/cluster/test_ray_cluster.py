"""A real Ray cluster on this one CPU machine: a head and a second node, each its own `ray start` process named
by a `machine-<name>` resource. The dashboard's job manager runs the native ladder on the tiny model on each node;
both runs land in History with their node's name; the CLI's --cluster runs a stage on a named node. Then the
second node is killed mid-run: its finished stages stay, the running one fails 'node lost: bench-b'. The cluster
is stopped however the test ends."""
import importlib.util
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bench_core.cluster.ray_executor import RayExecutor
from bench_core.config.settings import Limits
from bench_core.levers.presets import preset
from bench_core.results.records import Status
from bench_core.results.store import Store
from bench_core.service.jobs import JobManager
from helpers import CFG, PROBE, wait, wait_for

SPEC = importlib.util.spec_from_file_location("_ray_cluster",
                                              Path(__file__).parents[2] / "benchmarks" / "_ray_cluster.py")
ray_cluster = importlib.util.module_from_spec(SPEC)
sys.modules[SPEC.name] = ray_cluster
SPEC.loader.exec_module(ray_cluster)

pytestmark = [pytest.mark.timeout(420), pytest.mark.slow]   # a Ray head and a second node
NATIVE = preset("native")


@pytest.fixture(scope="module")
def cluster():
    started = ray_cluster.LocalCluster(("bench-a", "bench-b"))
    try:
        yield started.start()
    finally:
        import ray
        ray.shutdown()
        started.stop()


@pytest.fixture(scope="module")
def manager(cluster, tmp_path_factory):
    executor = RayExecutor(cluster.address)
    store = Store(str(tmp_path_factory.mktemp("history") / "runs.sqlite3"))
    jobs = JobManager(store, Limits(), probe=PROBE, executor=executor)
    yield jobs
    jobs.shutdown()


def test_the_machines_list_names_both_nodes_with_their_own_probes(manager):
    nodes = manager.executor.nodes(wait_s=150)
    assert sorted(n.name for n in nodes) == ["bench-a", "bench-b"]
    assert all(n.alive and n.probe is not None and n.probe.torch for n in nodes), nodes
    assert {n.gpu_type for n in nodes} == {"CPU"}


def test_a_ladder_on_each_node_lands_in_history_with_its_node(manager):
    jobs = [manager.submit(CFG, NATIVE, "native", "s1", machine=name) for name in ("bench-a", "bench-b")]
    finals = [wait(manager, job.job_id, timeout=240) for job in jobs]
    for job, final in zip(jobs, finals, strict=True):
        assert final.status == Status.DONE, final
        ran = [s for s in final.run.stages if s.status != Status.UNAVAILABLE]
        assert ran and all(s.status == Status.OK and s.times_ms for s in ran), [(s.key, s.reason) for s in ran]
        stored = manager.store.load_run(job.job_id)
        assert stored.node == final.run.node
        assert [s.status for s in stored.stages] == [s.status for s in final.run.stages]
    listed = {r["run_id"]: r["node"] for r in manager.store.list_runs()}
    assert listed == {jobs[0].job_id: "bench-a", jobs[1].job_id: "bench-b"}


def test_the_cli_runs_a_stage_on_the_named_node_through_the_same_executor(cluster, tmp_path):
    out = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, "-m", "bench_core", "run", "--cluster", cluster.address, "--machine",
                           "bench-a", "--stages", "adam+layernorm+fp32", "--model", "tiny", "--iters", "3",
                           "--warmup", "1", "--no-db", "--quiet", "--json", str(out)],
                          capture_output=True, text=True, timeout=240, env=cluster.env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    saved = json.loads(out.read_text())
    assert saved["node"] == "bench-a" and [s["status"] for s in saved["stages"]] == ["ok"]


def test_a_node_killed_mid_run_keeps_what_finished_and_names_the_lost_node(manager, cluster):
    # at least 667 steps a stage (the adaptive stop's floor) of a model wider than the tiny one: time to kill the node
    long = replace(CFG, iters=2000, width=128, depth=2, seq_len=64, batch_size=4)
    job = manager.submit(long, NATIVE, "native", "s2", machine="bench-b")

    def second_stage_running():
        run = manager.snapshot(job.job_id).run
        done = [s for s in run.stages if s.status == Status.OK]
        return done and any(s.status == Status.RUNNING and s.times_ms for s in run.stages)

    wait_for(second_stage_running, timeout=240, what="a finished stage and a running one")
    before = manager.snapshot(job.job_id).run
    cluster.kill_node("bench-b")
    final = wait(manager, job.job_id, timeout=120).run
    ok_before = [s.index for s in before.stages if s.status == Status.OK]
    stored = manager.store.load_run(job.job_id)
    for run in (final, stored):
        assert [s.index for s in run.stages if s.status == Status.OK] == ok_before
        lost = [s for s in run.stages if s.status == Status.FAILED and s.reason == "node lost: bench-b"]
        assert len(lost) == 1, [(s.key, s.status, s.reason) for s in run.stages]
        assert all(s.status in (Status.OK, Status.UNAVAILABLE, Status.FAILED) for s in run.stages)
    assert stored.stages[ok_before[0]].times_ms == before.stages[ok_before[0]].times_ms  # nothing finished lost
