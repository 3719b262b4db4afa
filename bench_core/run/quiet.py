"""Quiet windows: while a process of a run is timed or profiled, no other process of the run runs.

From the moment the runner releases a worker's timed steps (`release`, or `go` for a worker that is not gated)
until its measured work is over, every other live process group of the run (workers started ahead, spares, the
ceilings process, a finished worker still exiting) is stopped with SIGSTOP and continued with SIGCONT after. On
Linux the timed process's threads run on every allowed core but one, the tool's core, where the parent's threads
are kept. Why: a launch-bound stage is paced by the host CPU, and a worker importing torch beside it (6-11 s) made
such a stage 7-22% slower on an H100 and an H200. Each window says what used the host anyway (QuietRecord).
"""
from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bench_core.results.records import QuietRecord, ThreadUse

PROC = "/proc"
# Benchmarks only: "0" leaves a GPU run's timed process unpinned (benchmarks/quiet_host.py sets it, to tell what the
# pinning itself does to a launch-bound step).
PIN_TIMED_ENV = "BENCH_PIN_TIMED"


def pins_timed(device: str) -> bool:
    """Whether a run on `device` pins its timed process (QuietHost's `pin_timed`): a GPU run does, unless
    PIN_TIMED_ENV is "0"."""
    return device == "cuda" and os.environ.get(PIN_TIMED_ENV, "1") != "0"


@dataclass(frozen=True)
class ProcStat:
    """One process's line of /proc/<pid>/stat, the fields a window reads."""
    pid: int
    ppid: int
    pgrp: int
    state: str      # R, S, D, T (stopped), Z...
    ticks: int      # utime + stime, in clock ticks (os.sysconf('SC_CLK_TCK') a second)


def parse_stat(text: str) -> ProcStat | None:
    """/proc/<pid>/stat's text; the command name may hold spaces and parentheses, so fields follow its last ')'."""
    head, _, tail = text.rpartition(")")
    fields = tail.split()
    try:
        return ProcStat(pid=int(head.split("(", 1)[0]), ppid=int(fields[1]), pgrp=int(fields[2]), state=fields[0],
                        ticks=int(fields[11]) + int(fields[12]))
    except (IndexError, ValueError):
        return None


def read_processes(proc: str = PROC) -> dict[int, ProcStat] | None:
    """Every process now; None where there is no /proc (not Linux)."""
    try:
        names = os.listdir(proc)
    except OSError:
        return None
    found: dict[int, ProcStat] = {}
    for name in names:
        if name.isdigit():
            try:
                with open(os.path.join(proc, name, "stat")) as fh:
                    stat = parse_stat(fh.read())
            except OSError:
                continue  # it exited between the listing and the read
            if stat is not None:
                found[stat.pid] = stat
    return found


def host_busy_ticks(text: str) -> int | None:
    """/proc/stat's all-CPU line: user..steal less idle and iowait (guest time is already in user)."""
    values = _cpu_line(text)
    return None if values is None else sum(values) - values[3] - values[4]


def host_steal_ticks(text: str) -> int | None:
    """/proc/stat's all-CPU steal: time a hypervisor ran something else on this machine's virtual CPUs."""
    values = _cpu_line(text)
    return None if values is None else values[7]


def _cpu_line(text: str) -> list[int] | None:
    for line in text.splitlines():
        if line.startswith("cpu "):
            return [int(v) for v in line.split()[1:9]]
    return None


def read_host(proc: str = PROC) -> tuple[int | None, int | None]:
    """(busy, steal) ticks of the whole host so far."""
    try:
        with open(os.path.join(proc, "stat")) as fh:
            text = fh.read()
    except OSError:
        return None, None
    return host_busy_ticks(text), host_steal_ticks(text)


@dataclass(frozen=True)
class ThreadStat:
    """One thread's /proc/<pid>/task/<tid>/stat: its name, CPU ticks so far and the core it last ran on."""
    tid: int
    name: str
    ticks: int
    core: int


def read_threads(pid: int, proc: str = PROC) -> dict[int, ThreadStat]:
    """Every thread of `pid` now; {} where it cannot be read. Which of the timed process's threads ran, and on
    which cores, says whether a thread of its own (the NVML sampler, an intra-op pool) shared the launching one's."""
    found: dict[int, ThreadStat] = {}
    try:
        tids = os.listdir(os.path.join(proc, str(pid), "task"))
    except OSError:
        return found
    for tid in tids:
        try:
            with open(os.path.join(proc, str(pid), "task", tid, "stat")) as fh:
                head, _, tail = fh.read().rpartition(")")
            fields = tail.split()
            found[int(tid)] = ThreadStat(int(tid), head.split("(", 1)[1], int(fields[11]) + int(fields[12]),
                                         int(fields[36]))
        except (OSError, IndexError, ValueError):
            continue  # exited between the listing and the read
    return found


def thread_use(start: dict[int, ThreadStat], end: dict[int, ThreadStat], tick_s: float,
               main: int) -> tuple[ThreadUse, ...]:
    """The threads that used CPU between two readings, busiest first; `main`: the process's own thread id."""
    used = [ThreadUse(name=t.name, cpu_s=round((t.ticks - (start[tid].ticks if tid in start else 0)) * tick_s, 4),
                      core=t.core, main=tid == main) for tid, t in end.items()]
    return tuple(sorted((u for u in used if u.cpu_s > 0), key=lambda u: -u.cpu_s))


def tree(processes: dict[int, ProcStat], root: int) -> set[int]:
    """`root`'s process group and every descendant of `root` (torchrun's ranks may have sessions of their own)."""
    members = {p.pid for p in processes.values() if p.pgrp == root} | {root}
    grew = True
    while grew:
        more = {p.pid for p in processes.values() if p.ppid in members} - members
        members |= more
        grew = bool(more)
    return members


def used_ticks(start: dict[int, ProcStat], end: dict[int, ProcStat], pids: Iterable[int]) -> int:
    """CPU ticks the processes used between two readings; one born between them counts whole, one gone is lost."""
    return sum(end[p].ticks - (start[p].ticks if p in start else 0) for p in pids if p in end)


@dataclass(frozen=True)
class Reading:
    at: float                                 # time.monotonic()
    parent_s: float                           # this process's CPU, all threads (time.process_time)
    host_ticks: int | None
    processes: dict[int, ProcStat] | None
    steal_ticks: int | None = None


def take_reading(proc: str = PROC) -> Reading:
    busy, steal = read_host(proc)
    return Reading(time.monotonic(), time.process_time(), busy, read_processes(proc), steal)


def signal_groups(groups: Iterable[int], sig: signal.Signals) -> list[int]:
    """Send `sig` to each process group; those that no longer exist are left out of the answer."""
    done = []
    for group in groups:
        try:
            os.killpg(group, sig)
            done.append(group)
        except (ProcessLookupError, PermissionError):
            continue
    return done


def allowed_cores() -> tuple[int, ...]:
    return tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else ()


def pin(pid: int, cores: Iterable[int], proc: str = PROC) -> None:
    """Every thread of `pid`: sched_setaffinity(pid) moves its main thread only, and torch's threads exist already."""
    cores = set(cores)
    try:
        tids = [int(t) for t in os.listdir(os.path.join(proc, str(pid), "task"))]
    except OSError:
        tids = [pid]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cores)
        except OSError:
            continue  # a thread (or the process) that has exited


class QuietWindow:
    """One open window: the others are stopped and pinned until `close`, which is safe to call more than once."""

    def __init__(self, host: QuietHost, timed_pid: int, round_: int):
        self.host, self.timed_pid, self.round = host, timed_pid, round_
        self.paused: list[int] = []
        self.timed_cores: tuple[int, ...] = ()
        self.closed = False
        self.threads_end: dict[int, ThreadStat] = {}
        groups = sorted(set(host.others()) - {timed_pid})
        if host.pause:
            self.paused = signal_groups(groups, signal.SIGSTOP)
        self.groups = set(groups)
        self.start = take_reading(host.proc)  # after the pause: a stopped process's counters no longer move
        self.threads = read_threads(timed_pid, host.proc)
        cores = host.cores
        if host.pins and len(cores) >= 2:
            self.timed_cores = cores[1:]
            for pid in tree(self.start.processes or {}, timed_pid):
                pin(pid, self.timed_cores, host.proc)
            pin(os.getpid(), cores[:1], host.proc)

    def close(self) -> QuietRecord | None:
        """Resume every paused group and end the pinning; the window's record (None once closed already)."""
        if self.closed:
            return None
        self.closed = True
        try:
            end = take_reading(self.host.proc)  # before the resume, while the others are still stopped
            self.threads_end = read_threads(self.timed_pid, self.host.proc)
        finally:
            signal_groups(self.paused, signal.SIGCONT)
            self.host.closed(self)
        if self.timed_cores:
            cores = self.host.cores
            pin(os.getpid(), cores, self.host.proc)
            for pid in tree(end.processes or self.start.processes or {}, self.timed_pid):
                pin(pid, cores, self.host.proc)
        return self.record(end)

    def record(self, end: Reading) -> QuietRecord:
        start, tick = self.start, self.host.tick_s
        tool = timed = counted = None
        if start.processes is not None and end.processes is not None:
            others = {p for r in (start.processes, end.processes) for p, s in r.items() if s.pgrp in self.groups}
            counted = len(others)
            tool = used_ticks(start.processes, end.processes, others) * tick
            mine = tree(start.processes, self.timed_pid) | tree(end.processes, self.timed_pid)
            timed = used_ticks(start.processes, end.processes, mine) * tick
        host = None
        if start.host_ticks is not None and end.host_ticks is not None and timed is not None:
            # /proc/stat and each /proc/<pid>/stat are floors of finer clocks, read apart: a remainder below zero
            # is their rounding, not a negative load
            host = max((end.host_ticks - start.host_ticks) * tick - timed, 0.0)
        steal = None if start.steal_ticks is None or end.steal_ticks is None else \
            (end.steal_ticks - start.steal_ticks) * tick
        threads = thread_use(self.threads, self.threads_end, tick, self.timed_pid) if self.threads_end else ()
        return QuietRecord(round=self.round, window_s=round(end.at - start.at, 4), paused_groups=len(self.paused),
                           counted_processes=counted, tool_busy_s=_r(tool), parent_busy_s=_r(end.parent_s -
                                                                                               start.parent_s),
                           host_busy_s=_r(host), timed_cores=self.timed_cores, steal_s=_r(steal),
                           timed_threads=threads)


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


class QuietHost:
    """The run's quiet windows. `others` names the process groups of the run's other live processes at the moment
    a window opens; `pause=False` leaves them running and unpinned but still accounts for them (how a test sees
    what the pausing prevents). `on_change(True/False)` is told when a window opens and closes."""

    def __init__(self, others: Callable[[], Iterable[int]], pause: bool = True,
                 on_change: Callable[[bool], None] | None = None, proc: str = PROC, pin_timed: bool = True):
        self.others, self.pause, self.on_change, self.proc = others, pause, on_change, proc
        # Pinning is for a GPU run, whose timed process needs a core or two to launch kernels. On a CPU run the
        # cores are the device being measured: taking one from the stage would change its figure, so it keeps them
        # all and the parent, blocked on the stage's events, takes its turns.
        self.pins = pause and pin_timed
        self.tick_s = 1 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
        self.cores = allowed_cores()
        self._open: QuietWindow | None = None
        self._lock = threading.Lock()

    @property
    def timed_core_count(self) -> int | None:
        """The cores a timed process is pinned to (all but the tool's), where it is pinned; its torch threads are
        capped at this, so pinned steps never run more threads than cores."""
        return len(self.cores) - 1 if self.pins and len(self.cores) >= 2 else None

    def open(self, timed_pid: int, round_: int) -> QuietWindow:
        with self._lock:
            if self._open is not None:
                self._open.close()  # one window at a time: a stale one is never left holding processes stopped
            window = QuietWindow(self, timed_pid, round_)
            self._open = window
        if self.on_change:
            self.on_change(True)
        return window

    def closed(self, window: QuietWindow) -> None:
        if self._open is window:
            self._open = None
            if self.on_change:
                self.on_change(False)

    @property
    def is_open(self) -> bool:
        return self._open is not None

    def close(self) -> None:
        """Close any window still open (a run's `finally`): no process of the run is left stopped."""
        window = self._open
        if window is not None:
            window.close()
