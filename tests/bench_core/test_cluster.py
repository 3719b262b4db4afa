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

from bench_core.cluster import executor as ex
from bench_core.cluster.nodes import EVERY_GPU_TYPE, Node, from_ray, pick
from bench_core.cluster.remote import stream_run
from bench_core.levers.presets import preset
from bench_core.machine.probe import Probe
from bench_core.results.records import Status
from bench_core.run.runner import RunHooks, new_run
from helpers import CFG, PROBE

NATIVE = preset("native")


def test_local_is_the_default_and_a_local_run_never_imports_ray(tmp_path):
    script = (
        "import sys\n"
        "from bench_core.cluster.executor import cluster_address, executor_for\n"
        "from bench_core.config.settings import Limits\n"
        "from bench_core.levers.presets import preset\n"
        "from bench_core.service.jobs import JobManager\n"
        "from helpers import CFG, PROBE, wait\n"
        "executor = executor_for(cluster_address())\n"
        "manager = JobManager(None, Limits(), probe=PROBE, executor=executor)\n"
        "job = manager.submit(CFG, preset('native')[:1], 'native', 's')\n"
        "final = wait(manager, job.job_id, timeout=120)\n"
        "print(executor.name, final.run.stages[0].status.value, final.run.node, 'ray' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k != ex.ADDRESS_ENV}
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(__file__)), os.getcwd()])
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=180)
    assert out.stdout.split() == ["local", "ok", "None", "False"], out.stderr[-2000:]


def test_an_address_picks_the_ray_executor_which_connects_only_when_used():
    assert ex.cluster_address({ex.ADDRESS_ENV: " "}) is None
    chosen = ex.executor_for(ex.cluster_address({ex.ADDRESS_ENV: "ray://head:10001"}))
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
