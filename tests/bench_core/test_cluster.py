"""The executor without a cluster: local is the default and never imports Ray; the drive loop turns a lost node
into 'node lost: <node>' on the running stage only, and passes a cancel on within one poll; nodes are named,
probed and picked."""
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace

import pytest

from bench_core.cluster import address as addr
from bench_core.cluster import executor as ex
from bench_core.cluster.nodes import EVERY_GPU_TYPE, Node, Retry, from_ray, pick
from bench_core.cluster.remote import stream_run
from bench_core.cluster.retry import resubmitter
from bench_core.levers.presets import preset
from bench_core.machine.probe import Probe
from bench_core.results.records import Status
from bench_core.run.runner import RunHooks, new_run
from helpers import CFG, PROBE

NATIVE = preset("native")


@pytest.mark.slow
def test_local_is_the_default_and_a_local_run_never_imports_ray(tmp_path):
    script = (
        "import sys\n"
        "from bench_core.cluster.address import cluster_address, executor_for\n"
        "from bench_core.config.settings import Limits\n"
        "from bench_core.levers.presets import preset\n"
        "from bench_core.service.jobs import JobManager\n"
        "from helpers import CFG, PROBE, wait\n"
        "executor = executor_for(cluster_address())\n"
        "manager = JobManager(None, Limits(), probe=PROBE, executor=executor)\n"
        "job = manager.submit(CFG, preset('native')[:1], 'native', 's')\n"
        "final = wait(manager, job.job_id, timeout=120)\n"
        "print(executor.name, final.run.stages[0].status.value, final.run.node, 'ray' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k != addr.ADDRESS_ENV}
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(__file__)), os.getcwd()])
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=180)
    assert out.stdout.split() == ["local", "ok", "None", "False"], out.stderr[-2000:]


def test_an_address_picks_the_ray_executor_which_connects_only_when_used():
    assert addr.cluster_address({addr.ADDRESS_ENV: " "}) is None
    chosen = addr.executor_for(addr.cluster_address({addr.ADDRESS_ENV: "ray://head:10001"}))
    assert (chosen.name, chosen.concurrent, chosen.address) == ("ray", True, "ray://head:10001")


class FakeHandle:
    node = "gpu-2"

    def __init__(self, messages, hold=None):
        self.messages, self.hold, self.cancelled_at = list(messages), hold, None

    def next_message(self, timeout):
        if self.hold is not None and not self.messages:
            if self.cancelled_at is None:
                time.sleep(timeout)
                return None
            return self.hold
        return self.messages.pop(0) if self.messages else None

    def cancel(self):
        self.cancelled_at = time.monotonic()


def _three_stage_run():
    run = new_run(CFG, NATIVE[:3], PROBE, "native")
    first = replace(run.stages[0], status=Status.OK, times_ms=(1.0, 1.1), losses=(2.0, 2.0))
    second = replace(run.stages[1], status=Status.RUNNING, times_ms=(1.0,), losses=(2.0,))
    return run.with_stage(first).with_stage(second)


def test_a_lost_node_fails_the_running_stage_names_the_node_and_keeps_the_finished_one():
    run = _three_stage_run()
    done = []
    hooks = RunHooks(on_stage_done=lambda r, s: done.append((s.index, s.status, s.reason)))
    final = ex.drive(FakeHandle([ex.Progress(run), ex.StageDone(run, 0), ex.NodeLost("gpu-2", "NodeDiedError")]),
                     run, hooks)
    assert [(s.status, s.reason) for s in final.stages] == [
        (Status.OK, ""), (Status.FAILED, "node lost: gpu-2"), (Status.FAILED, "node lost: gpu-2 (did not run)")]
    assert final.stages[0] == run.stages[0]   # its measurements as they arrived
    assert done == [(0, Status.OK, ""), (1, Status.FAILED, "node lost: gpu-2"),
                    (2, Status.FAILED, "node lost: gpu-2 (did not run)")]


def test_a_crash_on_the_node_is_told_apart_from_a_lost_node():
    run = _three_stage_run()
    final = ex.drive(FakeHandle([ex.Crashed("ValueError: bad")]), run, RunHooks())
    assert final.stages[1].reason == "the run failed on gpu-2: ValueError: bad"


def test_cancel_reaches_the_handle_within_one_poll_and_unfinished_stages_say_cancelled():
    run = _three_stage_run()
    handle = FakeHandle([ex.Progress(run)], hold=ex.NodeLost("gpu-2", "TaskCancelledError"))
    hooks = RunHooks()
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("run", ex.drive(handle, run, hooks)))
    thread.start()
    time.sleep(0.3)
    asked = time.monotonic()
    hooks.cancel.set()
    thread.join(5)
    assert handle.cancelled_at is not None and handle.cancelled_at - asked < 3 * ex.POLL_S
    final = result["run"]
    assert final.status == Status.CANCELLED
    assert [s.status for s in final.stages] == [Status.OK, Status.CANCELLED, Status.CANCELLED]


@pytest.mark.slow
def test_the_node_side_streams_the_run_on_its_own_probe_and_a_cancel_stops_its_worker(cpu_probe):
    """stream_run is the Ray task's body: Ray's cancel raises KeyboardInterrupt into it."""
    cfg = replace(CFG, iters=2000, width=128, depth=2, seq_len=64, batch_size=4)
    run = new_run(cfg, NATIVE[:1], PROBE, "native")
    messages = stream_run(run, "node-x", None, 120, interval_s=0.05, probe=cpu_probe)
    first = next(messages)
    assert isinstance(first, ex.Progress) and first.run.node == "node-x" and first.run.machine is cpu_probe
    deadline = time.monotonic() + 120
    for message in messages:
        assert time.monotonic() < deadline
        if isinstance(message, ex.Progress) and message.run.stages[0].times_ms:
            break
    children_before = _children()
    assert children_before, "the stage's worker process runs"
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        messages.throw(KeyboardInterrupt)
    assert time.monotonic() - started < 10
    assert not (_children() & children_before), "the stage's worker process was stopped"


def _children() -> set[int]:
    me = str(os.getpid())
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[1] == me and fields[0] != "Z" and "bench_core.run.worker" in open(f"/proc/{pid}/cmdline").read():
            found.add(int(pid))
    return found


def _node(name, gpu=None, busy=False, alive=True):
    probe = Probe.from_dict({"cuda": {"available": bool(gpu), "name": gpu}})
    return Node(node_id=name, name=name, address="10.0.0.1", alive=alive, gpus=1 if gpu else 0, busy=busy,
                probe=probe)


def test_every_gpu_type_once_takes_one_alive_node_per_gpu_a_free_one_first():
    nodes = [_node("h200", "NVIDIA H200"), _node("a100-1", "NVIDIA A100", busy=True), _node("a100-2", "NVIDIA A100"),
             _node("l40s", "NVIDIA L40S", alive=False)]
    assert pick(nodes, [EVERY_GPU_TYPE]) == ["a100-2", "h200"]
    assert pick(nodes, ["h200", "a100-1"]) == ["h200", "a100-1"]
    with pytest.raises(ValueError, match="machine: l40s is not an alive node"):
        pick(nodes, ["l40s"])


def test_a_node_is_named_by_its_machine_resource_else_by_host_and_address():
    entry = {"NodeID": "ab", "Alive": True, "NodeManagerAddress": "10.0.0.2", "NodeManagerHostname": "box",
             "NodeManagerPort": 6380, "Resources": {"GPU": 2.0, "machine-h200": 1.0, "accelerator_type:H200": 1.0}}
    node = from_ray(entry, busy=["h200"])
    assert (node.name, node.gpus, node.accelerator, node.busy, node.gpu_type) == ("h200", 2, "H200", True, "H200")
    assert from_ray({**entry, "Resources": {}}).name == "box (10.0.0.2:6380)"


def test_the_cross_gpu_view_reads_each_runs_contributions_side_by_side():
    from bench_core.cluster.compare import across_gpus
    from bench_core.results.contributions import contributions
    from bench_core.results.summary import summarize
    from helpers import sample_runs
    run = sample_runs().gpu_run()
    other = replace(run, node="a100-1", run_id="other")
    rows = across_gpus([run, other])
    expected = contributions(summarize(run))
    assert rows and len(rows) == len({(c.lever, c.against, c.context) for c in expected})
    first = expected[0]
    row = next(r for r in rows if (r.lever, r.against, r.context) == (first.lever, first.against, first.context))
    assert list(row.by_gpu) == [run.gpu, f"{run.gpu} (a100-1)"]
    assert row.by_gpu[run.gpu].startswith(f"×{first.ratio:.2f}")


class FakeExecutor:
    """Machines and a submit, as the Ray executor has them: each submitted run gets the handle its node scripts."""
    name, concurrent = "fake", True

    def __init__(self, nodes, scripts):
        self._nodes, self.scripts, self.submitted = nodes, scripts, []

    def nodes(self, wait_s=0.0):
        return self._nodes

    def submit(self, run, probe, hooks):
        self.submitted.append(run)
        handle = FakeHandle(self.scripts[run.node](run))
        handle.node = run.node
        return handle

    def run_all(self, run, probe, hooks, retry=Retry.NEVER):
        return ex.drive(self.submit(run, probe, hooks), run, hooks, resubmitter(self, probe, hooks, retry))

    def node_probe(self, node):
        return None


def _finish(run, index):
    stage = replace(run.stages[index], status=Status.OK, times_ms=(2.0, 2.1), losses=(2.0, 2.0), rounds=(2,))
    return run.with_stage(stage)


def _lost_mid_run(run):
    """Node a: stage 0 finishes, stage 1 has timed steps, then the node dies."""
    first = _finish(run, 0)
    second = first.with_stage(replace(first.stages[1], status=Status.RUNNING, times_ms=(1.0,), losses=(2.0,)))
    return [ex.Progress(first), ex.StageDone(first, 0), ex.Progress(second), ex.NodeLost("a", "NodeDiedError")]


def _runs_all(run):
    """A healthy node: every stage of what it was given finishes."""
    messages = []
    for stage in run.stages:
        run = _finish(run, stage.index)
        messages += [ex.Progress(run), ex.StageDone(run, stage.index)]
    return messages + [ex.Done(replace(run, status=Status.DONE))]


def _cluster_run(stages=4):
    return replace(new_run(CFG, NATIVE[:stages], PROBE, "native"), node="a")


@pytest.mark.parametrize("retry", [Retry.SAME_GPU, Retry.ANY])
def test_a_lost_node_with_a_retry_runs_the_rest_on_another_node_and_names_who_ran_what(retry):
    nodes = [_node("a", "NVIDIA H200"), _node("b", "NVIDIA H200", busy=True), _node("c", "NVIDIA A100"),
             _node("d", "NVIDIA H200", alive=False)]
    other = {Retry.SAME_GPU: "b", Retry.ANY: "c"}[retry]   # a free node first, but only of the lost one's GPU type
    executor = FakeExecutor(nodes, {"a": _lost_mid_run, other: _runs_all})
    run = _cluster_run()
    done = []
    hooks = RunHooks(on_stage_done=lambda r, s: done.append((s.index, s.status, s.node)))
    final = ex.drive(executor.submit(run, PROBE, hooks), run, hooks, resubmitter(executor, PROBE, hooks, retry))
    assert [(s.status, s.reason, s.node) for s in final.stages] == [
        (Status.OK, "", "a"), (Status.FAILED, "node lost: a", "a"), (Status.OK, "", other), (Status.OK, "", other)]
    assert final.stages[0].times_ms == (2.0, 2.1) and final.status == Status.DONE and final.node == "a"
    resent = executor.submitted[1]
    assert resent.node == other and [s.key for s in resent.stages] == [s.key for s in run.stages[2:]]
    assert [s.index for s in resent.stages] == [0, 1]   # the run loop indexes stages by position
    assert done == [(0, Status.OK, None), (0, Status.OK, "a"), (1, Status.FAILED, "a"),  # stored as they came
                    (2, Status.OK, other), (3, Status.OK, other)]


def test_without_a_retry_or_another_node_of_that_gpu_type_the_rest_did_not_run():
    nodes = [_node("a", "NVIDIA H200"), _node("c", "NVIDIA A100")]
    for retry in (Retry.NEVER, Retry.SAME_GPU):
        executor = FakeExecutor(nodes, {"a": _lost_mid_run, "c": _runs_all})
        run = _cluster_run()
        final = ex.drive(executor.submit(run, PROBE, RunHooks()), run, RunHooks(),
                         resubmitter(executor, PROBE, RunHooks(), retry))
        assert [s.reason for s in final.stages] == ["", "node lost: a", "node lost: a (did not run)",
                                                    "node lost: a (did not run)"], retry
        assert len(executor.submitted) == 1


def test_a_second_lost_node_moves_the_rest_again_never_back_to_a_lost_one():
    nodes = [_node("a", "NVIDIA H200"), _node("b", "NVIDIA H200"), _node("e", "NVIDIA H200")]

    def lost_b(run):
        first = _finish(run, 0)
        return [ex.StageDone(first, 0), ex.NodeLost("b", "NodeDiedError")]

    executor = FakeExecutor(nodes, {"a": _lost_mid_run, "b": lost_b, "e": _runs_all})
    run = _cluster_run(stages=5)
    final = ex.drive(executor.submit(run, PROBE, RunHooks()), run, RunHooks(),
                     resubmitter(executor, PROBE, RunHooks(), Retry.SAME_GPU))
    assert [(s.status, s.node) for s in final.stages] == [
        (Status.OK, "a"), (Status.FAILED, "a"), (Status.OK, "b"), (Status.OK, "e"), (Status.OK, "e")]
    assert [r.node for r in executor.submitted] == ["a", "b", "e"]


def test_a_stage_between_its_rounds_starts_afresh_elsewhere_the_one_being_timed_fails():
    from bench_core.cluster.retry import after_loss
    run = _cluster_run(stages=3)
    between = replace(run.stages[0], status=Status.RUNNING, times_ms=(1.0, 1.0), rounds=(2,))
    timing = replace(run.stages[1], status=Status.RUNNING, times_ms=(1.0, 1.0, 1.0), rounds=(2,))
    after, rest = after_loss(run.with_stage(between).with_stage(timing), "a")
    assert rest == [0, 2]
    assert (after.stages[0].status, after.stages[0].times_ms, after.stages[0].node) == (Status.PENDING, (), None)
    assert (after.stages[1].status, after.stages[1].reason) == (Status.FAILED, "node lost: a")


def test_a_retried_run_names_each_stages_node_in_its_json():
    from bench_core.results.records import RunResult
    run = _cluster_run(stages=2)
    run = run.with_stage(replace(_finish(run, 1).stages[1], node="b"))
    assert RunResult.from_dict(run.to_dict()).stages[1].node == "b"


def test_the_job_manager_gives_each_run_its_own_retry():
    from bench_core.config.settings import Limits
    from bench_core.service.jobs import JobManager
    from helpers import wait
    nodes = [_node("a", "NVIDIA H200"), _node("b", "NVIDIA H200")]
    executor = FakeExecutor(nodes, {"a": _lost_mid_run, "b": _runs_all})
    manager = JobManager(None, Limits(), probe=PROBE, executor=executor)
    try:
        kept = manager.submit(CFG, NATIVE[:4], "native", "s", machine="a", retry=Retry.SAME_GPU)
        plain = manager.submit(CFG, NATIVE[:4], "native", "s", machine="a")
        kept, plain = (wait(manager, j.job_id, timeout=30).run for j in (kept, plain))
    finally:
        manager.shutdown()
    assert [s.node for s in kept.stages] == ["a", "a", "b", "b"]
    assert [s.reason for s in plain.stages][2:] == ["node lost: a (did not run)"] * 2


def test_a_restarted_server_marks_a_remote_run_left_running_interrupted_naming_its_node(tmp_path):
    from bench_core.config.settings import Limits
    from bench_core.results.store import Store
    from bench_core.service.jobs import JobManager
    store = Store(str(tmp_path / "runs.sqlite3"))
    run = _cluster_run(stages=3)
    run = run.with_stage(replace(_finish(run, 0).stages[0]))
    retried = replace(run.stages[2], status=Status.RUNNING, times_ms=(1.0,), node="b")
    run = run.with_stage(retried)
    store.save_run(run)
    manager = JobManager(store, Limits(), probe=PROBE, executor=FakeExecutor([], {}))
    manager.shutdown()
    stored = store.load_run(run.run_id)
    assert stored.status == Status.INTERRUPTED
    assert [(s.status, s.reason) for s in stored.stages] == [
        (Status.OK, ""),
        (Status.INTERRUPTED, "the server stopped before this stage finished (on node a, whose task Ray ended "
                             "with the server)"),
        (Status.INTERRUPTED, "the server stopped before this stage finished (on node b, whose task Ray ended "
                             "with the server)")]
