"""Quiet windows (bench_core.run.quiet): while a stage's process is timed, the run's other processes do not run.

The bound every check uses is derived, not fitted: a stopped process uses no CPU, and the stop takes effect when
it next enters the kernel (microseconds). /proc/<pid>/stat's utime and stime are each a floor of a finer clock in
ticks, so a difference of two readings exceeds the CPU truly used by less than one tick per counter: at most two
ticks per process read.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from bench_core.levers.stage import Stage
from bench_core.results.records import QuietRecord, StageResult, Status, ThreadUse
from bench_core.results.summary import summarize
from bench_core.run.quiet import PIN_TIMED_ENV, QuietHost, parse_stat, pins_timed
from bench_core.run.runner import RunHooks, new_run, run_all
from helpers import CFG, PROBE, WorkerSpy, alive, group_members, kill_group

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc, stops process groups")

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
TICKS_PER_PROCESS = 2  # utime and stime: each reading is a floor, so each counter adds less than one tick


def bound_s(record: QuietRecord) -> float:
    return TICKS_PER_PROCESS * (record.counted_processes or 0) * TICK_S


def state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def spin() -> subprocess.Popen:
    """A process of our own that burns CPU, in a session (process group) of its own, as a stage worker is."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)  # noqa: S603


def stop(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.mark.parametrize("pause", [True, False])
def test_a_paused_process_is_stopped_and_counted_and_resumed(pause):
    busy, timed = spin(), subprocess.Popen(["sleep", "30"], start_new_session=True)  # noqa: S603, S607
    try:
        time.sleep(0.2)  # both started and scheduled
        host = QuietHost(lambda: [busy.pid], pause=pause)
        window = host.open(timed.pid, 0)
        assert host.is_open
        time.sleep(0.5)
        assert (state(busy.pid) == "T") is pause
        record = window.close()
        assert record is not None and record.round == 0 and record.window_s >= 0.5
        assert not host.is_open and window.close() is None  # closing twice is harmless
        assert state(busy.pid) in ("R", "S")                # running again
        assert record.counted_processes == 1 and record.paused_groups == (1 if pause else 0)
        assert record.parent_busy_s is not None and record.host_busy_s is not None
        if pause:
            assert record.tool_busy_s is not None and record.tool_busy_s <= bound_s(record)
        else:  # left running, the busy process is seen: the accounting can tell a disturbance from none
            assert record.tool_busy_s is not None and record.tool_busy_s > bound_s(record)
    finally:
        stop(busy)
        stop(timed)


def _stat_line(pid: int, ppid: int, pgrp: int, utime: int, stime: int, comm: str = "python") -> str:
    rest = ["S", ppid, pgrp, pgrp, 0, -1, 0, 0, 0, 0, 0, utime, stime, 0, 0, 20, 0, 1, 0, 100]
    return f"{pid} ({comm}) " + " ".join(str(v) for v in rest) + "\n"


def _fake_proc(root: Path, procs: dict[int, tuple[int, int, int, int]], busy: int, idle: int, steal: int = 0) -> None:
    """procs: pid -> (ppid, pgrp, utime, stime); /proc/stat's cpu line: user=busy less steal, idle, steal."""
    for pid, (ppid, pgrp, utime, stime) in procs.items():
        (root / str(pid)).mkdir(exist_ok=True)
        (root / str(pid) / "stat").write_text(_stat_line(pid, ppid, pgrp, utime, stime))
    line = f"{busy - steal} 0 0 {idle} 0 0 0 {steal} 0 0"
    (root / "stat").write_text(f"cpu  {line}\ncpu0 {line}\n")


def test_the_accounting_over_a_fake_proc(tmp_path):
    """Timed tree: 100 (its group) and 300, a child in a session of its own; the others: group 200 (200, 201)."""
    _fake_proc(tmp_path, {100: (1, 100, 50, 5), 300: (100, 300, 10, 0), 200: (1, 200, 40, 4), 201: (200, 200, 0, 0),
                          999: (1, 999, 7, 7)}, busy=1000, idle=500, steal=40)
    host = QuietHost(lambda: [200], pause=False, proc=str(tmp_path))
    window = host.open(100, 3)
    _fake_proc(tmp_path, {100: (1, 100, 150, 15), 300: (100, 300, 30, 0), 200: (1, 200, 43, 4), 201: (200, 200, 1, 1),
                          999: (1, 999, 9, 7)}, busy=1250, idle=700, steal=52)
    record = window.close()
    assert record is not None and record.round == 3 and record.counted_processes == 2
    assert record.tool_busy_s == pytest.approx(5 * TICK_S)          # 200: +3, 201: +2
    # the host's 250 busy ticks less the timed tree's 110 + 20
    assert record.host_busy_s == pytest.approx((250 - 130) * TICK_S)
    assert record.steal_s == pytest.approx(12 * TICK_S)            # the hypervisor's, apart
    assert record.timed_threads == ()                               # no task/ folder to read: none named


def test_the_timed_process_threads_that_ran_are_named_with_their_core():
    """A timed process whose own thread spins: the window names it as the main thread, with the CPU it used and a
    core it may run on; a thread that only slept is left out."""
    timed = subprocess.Popen([sys.executable, "-c", "import threading, time\n"  # noqa: S603
                              "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
                              "while True: pass"], start_new_session=True)
    try:
        time.sleep(0.3)
        host = QuietHost(lambda: [])
        window = host.open(timed.pid, 0)
        time.sleep(0.5)
        record = window.close()
        assert record is not None and record.steal_s is not None and record.steal_s >= 0
        assert [t.main for t in record.timed_threads] == [True]        # the sleeper used no CPU
        main = record.timed_threads[0]
        assert main.cpu_s > 0.2 and main.core in os.sched_getaffinity(0)
    finally:
        stop(timed)


def test_a_command_name_with_spaces_and_parentheses_is_read():
    stat = parse_stat(_stat_line(42, 7, 42, 11, 3, comm="a b) (c"))
    assert stat is not None and (stat.pid, stat.ppid, stat.pgrp, stat.ticks) == (42, 7, 42, 14)


def test_a_quiet_record_round_trips_and_older_files_read_as_empty():
    record = QuietRecord(round=1, window_s=0.5, paused_groups=2, counted_processes=3, tool_busy_s=0.0,
                         parent_busy_s=0.01, host_busy_s=0.2, timed_cores=(1, 2), steal_s=0.0,
                         timed_threads=(ThreadUse("python", 0.49, 3, True),
                                        ThreadUse("conditions-samp", 0.01, 5, False)))
    assert QuietRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    stage = StageResult(index=0, stage=Stage(), quiet=(record,), timelines=({"built": 1.0, "memory": 2.5},))
    assert StageResult.from_dict(stage.to_dict()) == stage
    old = stage.to_dict()
    del old["quiet"], old["timelines"]
    assert StageResult.from_dict(old).quiet == () and StageResult.from_dict(old).timelines == ()
    with pytest.raises(ValueError, match="tool_busy_s"):
        QuietRecord.from_dict({**record.to_dict(), "tool_busy_s": -1})
    totals = summarize(replace(new_run(CFG, [Stage()], PROBE, "custom"), stages=(
        replace(stage, quiet=(record, replace(record, round=2, steal_s=0.25))),))).stages[0].quiet
    assert totals is not None and totals.steal_s == pytest.approx(0.25) and totals.tool_busy_s == 0.0
    old_totals = summarize(replace(new_run(CFG, [Stage()], PROBE, "custom"), stages=(
        replace(stage, quiet=(replace(record, steal_s=None),)),))).stages[0].quiet
    assert old_totals is not None and old_totals.steal_s is None     # a file from before steal was read
    with pytest.raises(ValueError, match="core"):
        QuietRecord.from_dict({**record.to_dict(), "timed_threads": [{"name": "python", "cpu_s": 0.1, "core": -1}]})


# Steps long enough that a worker importing torch beside them shows (tens of ticks a window); three stages, two
# rounds, three workers started ahead (as on CUDA): each top-up's import overlaps the next stage's timed steps.
OVERLAP_CFG = replace(CFG, depth=2, width=128, seq_len=64, batch_size=4, vocab_size=256, iters=10, repeats=2)
LADDER = [Stage(), Stage("adam-fused"), Stage("adam-loop")]


@pytest.mark.slow
def test_no_other_process_of_the_run_uses_the_host_while_a_stage_is_timed(monkeypatch):
    spy = WorkerSpy(monkeypatch)
    updates: list = []
    run = run_all(new_run(OVERLAP_CFG, LADDER, PROBE, "custom"), PROBE,
                  RunHooks(ahead=3, on_update=updates.append))
    try:
        assert [s.status for s in run.stages] == [Status.OK] * 3
        for stage in run.stages:
            assert [q.round for q in stage.quiet] == [0, 1], stage.key  # a window for every round
            assert len(stage.timelines) == 2
            for timeline in stage.timelines:  # each process's own, on the wall clock
                assert timeline["built"] <= timeline["started"] <= timeline["memory"] <= timeline["finished"]
            for record in stage.quiet:
                assert record.tool_busy_s is not None and record.tool_busy_s <= bound_s(record), (stage.key, record)
                assert record.paused_groups <= (record.counted_processes or 0)
        assert sum(q.paused_groups for s in run.stages for q in s.quiet) > 0  # workers ahead were there to pause
        totals = summarize(run).stages[0].quiet
        assert totals is not None and totals.tool_busy_s == pytest.approx(sum(q.tool_busy_s or 0
                                                                              for q in run.stages[0].quiet))
    finally:
        leftovers = _leftovers(spy.workers)
        for pid, started in spy.workers:
            kill_group(pid, started)
    assert not leftovers, f"worker processes stopped or left behind: {leftovers}"


def _leftovers(workers: list[tuple[int, int]], wait_s: float = 65) -> dict:
    """Workers (or their groups) still there after the run; a finished one exits in the background (_reap)."""
    def left() -> dict:
        return {pid: (state(pid), group_members(pid, started)) for pid, started in workers
                if alive(pid, started) or group_members(pid, started)}
    deadline = time.time() + wait_s
    while time.time() < deadline and left():
        if any(s == "T" for s, _ in left().values()):
            return left()  # stopped: no window is open any more, nothing will resume it
        time.sleep(0.05)
    return left()


class _OwnGroupMeasurer:
    """Stands in for the ceilings process: a live process group of the run that the run itself never kills."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(["sleep", "60"], start_new_session=True)  # noqa: S603, S607
        self.group = self.proc.pid

    def start(self) -> None: ...

    def measure(self) -> None:
        return None

    def close(self) -> None: ...


@pytest.mark.slow
def test_a_cancel_during_a_window_leaves_nothing_stopped(monkeypatch):
    spy = WorkerSpy(monkeypatch)
    measurer = _OwnGroupMeasurer()
    cancel = threading.Event()
    seen: list[str | None] = []
    hooks = RunHooks(ahead=3, ceilings=measurer, cancel=cancel)

    def on_update(run) -> None:
        if hooks.quiet.is_set() and not cancel.is_set():
            seen.append(state(measurer.proc.pid))
            cancel.set()  # mid-window: the timed steps are running, the others stopped
    hooks.on_update = on_update
    try:
        run = run_all(new_run(replace(OVERLAP_CFG, iters=200), LADDER, PROBE, "custom"), PROBE, hooks)
        assert run.status == Status.CANCELLED and seen == ["T"]
        assert state(measurer.proc.pid) in ("R", "S")  # resumed, though the run ended mid-window
        leftovers = _leftovers(spy.workers)
        assert not leftovers, f"worker processes stopped or left behind: {leftovers}"
    finally:
        for pid, started in spy.workers:
            kill_group(pid, started)
        stop(measurer.proc)


@pytest.mark.slow
@pytest.mark.parametrize("isolate", [True, False])
def test_isolate_host_holds_live_updates_until_the_window_closes(isolate):
    hooks = RunHooks(isolate_host=isolate)
    during: list[bool] = []
    hooks.on_update = lambda run: during.append(hooks.quiet.is_set())
    run = run_all(new_run(replace(CFG, iters=5), [Stage()], PROBE, "custom"), PROBE, hooks)
    assert run.stages[0].status == Status.OK and run.stages[0].times_ms and during
    # held: no update while a stage is timed (its steps arrive once the window has closed); otherwise step by step
    assert any(during) is not isolate


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning needs two cores")
@pytest.mark.parametrize("pin_timed", [True, False])
def test_a_gpu_run_pins_the_timed_process_off_the_tools_core_and_a_cpu_run_does_not(pin_timed):
    """A GPU run's timed process is kept off the parent's core; a CPU run's keeps every core (they are the device)."""
    timed = subprocess.Popen(["sleep", "30"], start_new_session=True)  # noqa: S603, S607
    cores = set(os.sched_getaffinity(0))
    try:
        host = QuietHost(lambda: [], pin_timed=pin_timed)
        window = host.open(timed.pid, 0)
        inside, parent = os.sched_getaffinity(timed.pid), os.sched_getaffinity(0)
        window.close()
        if pin_timed:
            assert inside == cores - {min(cores)} and parent == {min(cores)}
            assert host.timed_core_count == len(cores) - 1
        else:
            assert inside == cores and parent == cores and host.timed_core_count is None
        assert os.sched_getaffinity(timed.pid) == cores and os.sched_getaffinity(0) == cores  # restored
    finally:
        stop(timed)


def test_a_gpu_run_pins_unless_a_benchmark_turns_it_off(monkeypatch):
    """benchmarks/quiet_host.py times the engine unpinned too, to tell what the pinning itself does."""
    assert pins_timed("cuda") and not pins_timed("cpu")
    monkeypatch.setenv(PIN_TIMED_ENV, "0")
    assert not pins_timed("cuda")
