"""Worker processes from the parent's side: the handle, the pool that starts them ahead, and exit codes."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

from bench_core.config.bench_config import BenchConfig
from bench_core.config.environment import DISTRIBUTED_ENV, child_env, die_with_parent  # noqa: F401 (workers')
from bench_core.levers.stage import Stage
from bench_core.machine.conditions import RUN_PID_ENV
from bench_core.run.events import Built, Error, Unavailable, decode

# Events after which a worker touches the device no more before `go`: built, or it will not run at all.
SETTLED_EVENTS = (Built, Unavailable, Error)

STDERR_LINES = 12  # what a failed stage keeps of its worker's stderr


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"worker killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"worker killed by signal {-code}"
    return f"worker exited with code {code}"


def meaningful_stderr(text: str, limit: int = STDERR_LINES) -> str | None:
    """The lines that say what went wrong: a rank's exception and its last frames, not torchrun's banners."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not set(ln.strip()) <= set("=-*_ ")]  # rows of '=' and such
    errors = [i for i, ln in enumerate(lines) if "Error" in ln or "Exception" in ln or ln.startswith("[rank")]
    if errors:
        first = errors[0]
        chosen = lines[max(first - 2, 0):first + limit]
    else:
        chosen = lines[-limit:]
    return " | ".join(ln.strip()[:300] for ln in chosen)[:1500] or None


@dataclass(frozen=True)
class StageJob:
    """What one worker process runs: a stage of a run, in one round. Crosses the process boundary as one JSON
    line (stdin, or BENCH_JOB_FILE under torchrun): `to_json` and `from_json` are its only encoding."""
    config: BenchConfig
    stage: Stage
    device: str
    round: int = 0
    profile: bool = True          # the kernel proof and breakdown are taken once per stage, in its first round
    build_ahead: bool = True      # build model and optimizer before the go signal (off when memory is tight)
    threads: int | None = None    # torch's CPU threads in the worker (a server's job leaves itself a core)
    timed_cores: int | None = None  # cores its timed steps are pinned to (run.quiet): its threads are capped there

    @property
    def gated(self) -> bool:
        """A single-process worker built ahead touches the device only when told (`build`), and its warm-up ends
        only when told (`release`): the runner lets the next worker build while this one warms up, never while
        it is timed (WorkerHandle.build, .release)."""
        return self.build_ahead and self.stage.world_size == 1

    def to_json(self) -> str:
        return json.dumps({"config": self.config.to_dict(), "stage": self.stage.key, "device": self.device,
                           "round": self.round, "profile": self.profile, "build_ahead": self.build_ahead,
                           "threads": self.threads, "timed_cores": self.timed_cores})

    @classmethod
    def from_json(cls, text: str) -> StageJob:
        data = json.loads(text)
        return cls(config=BenchConfig.from_dict(data["config"]), stage=Stage.from_key(data["stage"]),
                   device=data["device"], round=data["round"], profile=data["profile"],
                   build_ahead=data["build_ahead"], threads=data["threads"], timed_cores=data.get("timed_cores"))


@dataclass
class _Started:
    """A single-process worker already running: it imports torch (and warms CUDA) before it reads a job."""
    proc: subprocess.Popen
    stderr: Any
    env: dict | None
    warm_cuda: bool


def _start_single(env: dict | None, warm_cuda: bool) -> _Started:
    stderr = tempfile.TemporaryFile(mode="w+")
    cmd = ["-m", "bench_core.run.worker"] + (["--warm-cuda"] if warm_cuda else [])
    proc = subprocess.Popen([sys.executable, *cmd], env=child_env(env, **{RUN_PID_ENV: str(os.getpid())}),  # noqa: S603
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
                            start_new_session=True)
    return _Started(proc, stderr, env, warm_cuda)


class SpareWorkers:
    """Workers started before their jobs are known, while a cold probe runs: each pays its torch import and CUDA
    context then, and a run's pool adopts it (`WorkerPool(spares=...)`) instead of starting a process after the
    probe. Those not adopted are killed on `close`."""

    def __init__(self, count: int, env: dict | None, warm_cuda: bool):
        self._spare = [_start_single(env, warm_cuda) for _ in range(count)]

    def take(self, env: dict | None, warm_cuda: bool) -> _Started | None:
        while self._spare:
            started = self._spare.pop(0)
            if started.proc.poll() is None and started.env == env and started.warm_cuda == warm_cuda:
                return started
            _kill_group(started.proc)
            started.stderr.close()
        return None

    def __len__(self) -> int:
        return len(self._spare)

    def groups(self) -> list[int]:
        """The process groups of the spares not adopted (each started in a session of its own)."""
        return [started.proc.pid for started in self._spare if started.proc.poll() is None]

    def close(self) -> None:
        while self._spare:
            started = self._spare.pop()
            _kill_group(started.proc)
            for stream in (started.proc.stdin, started.proc.stdout, started.stderr):
                if stream and not stream.closed:
                    stream.close()


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


class WorkerHandle:
    """One stage's process, started with its job (or adopted from `SpareWorkers`). It imports torch, builds its
    model when told (`build`, for a gated job; at once otherwise), then waits for `go`.

    Its stdout is read from the start, into `lines`: the runner learns that a worker has built (`settled`)
    before it runs that worker's stage."""

    def __init__(self, job: StageJob, env: dict | None, world: int = 1, warm_cuda: bool = False,
                 started: _Started | None = None):
        self.job = job
        self.job_file: str | None = None
        self.lines: queue.Queue = queue.Queue()
        self.settled = threading.Event()   # built (or unavailable, failed, exited): the device is free of it
        self._built_sent = False
        if world == 1:
            started = started or _start_single(env, warm_cuda)
            self.proc, self.stderr = started.proc, started.stderr
            self._send(job.to_json())
            self._read()
            return
        # torchrun (through a launcher that dies with us), one worker per rank; the job travels in a file
        self.stderr = tempfile.TemporaryFile(mode="w+")
        fd, self.job_file = tempfile.mkstemp(suffix=".json")
        with os.fdopen(fd, "w") as fh:
            fh.write(job.to_json())
        env = child_env(env, **DISTRIBUTED_ENV, BENCH_JOB_FILE=self.job_file, **{RUN_PID_ENV: str(os.getpid())},
                        **({"OMP_NUM_THREADS": "1"} if job.device == "cpu" else {}))
        cmd = ["-m", "bench_core.run.launch", "--standalone", f"--nproc-per-node={world}",
               "-m", "bench_core.run.worker"]
        self.proc = subprocess.Popen([sys.executable, *cmd], env=env,  # noqa: S603 (our own argv)
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
                                     start_new_session=True)
        self._read()

    def _read(self) -> None:
        def read() -> None:
            for line in self.proc.stdout or ():
                if isinstance(decode(line), SETTLED_EVENTS):
                    self.settled.set()
                self.lines.put(line)
            self.settled.set()
            self.lines.put(None)   # end of stream
        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()

    def _send(self, line: str) -> None:
        if self.proc.stdin is None:
            return
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the worker died first; its exit code says why

    def build(self) -> None:
        """A gated worker may now create its device context and build (once; a no-op for other workers)."""
        if self.job.gated and not self._built_sent:
            self._built_sent = True
            self._send("build")

    def go(self) -> None:
        """Start the stage's work. Until now the worker has only imported and built. A gated worker's warm-up then
        runs until `release`; any other worker's stdin closes here."""
        self.build()
        if self.job_file is None:
            self._send("go")
        if not self.job.gated:
            self._close_stdin()

    def release(self) -> None:
        """A gated worker may end its warm-up (the next worker has built): its timed steps follow."""
        self._send("release")
        self._close_stdin()

    def _close_stdin(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """Kill the worker's whole process group; the driver frees its GPU memory when it dies."""
        _kill_group(self.proc)

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout, self.stderr):
            if stream and not stream.closed:
                stream.close()
        if self.job_file:
            try:
                os.unlink(self.job_file)
            except OSError:
                pass


class WorkerPool:
    """Starts single-process workers ahead of their stage, so torch import and model build happen before the
    measured work instead of between stages.

    `ahead` workers are started at once; another one each time a stage's measured and profiled steps are over
    (`top_up`), so no process start competes with a stage's timed steps for the host CPU. A started worker
    touches the device only when the runner lets it build (WorkerHandle.build): during the warm-up of the stage
    before it, never during timed or profiled steps.
    """

    def __init__(self, jobs: list[StageJob], env: dict | None, ahead: int, warm_cuda: bool,
                 spares: SpareWorkers | None = None):
        self.jobs, self.env, self.ahead, self.warm_cuda = jobs, env, max(ahead, 1), warm_cuda
        self.spares = spares
        self._started: dict[int, WorkerHandle] = {}
        self._next = 0

    def start(self) -> None:
        while self._next < len(self.jobs) and len(self._started) < self.ahead:
            self._spawn()

    def _spawn(self) -> None:
        started = self.spares.take(self.env, self.warm_cuda) if self.spares else None
        self._started[self._next] = WorkerHandle(self.jobs[self._next], self.env, warm_cuda=self.warm_cuda,
                                                 started=started)
        self._next += 1

    def top_up(self) -> None:
        if self._next < len(self.jobs):
            self._spawn()

    def peek(self, index: int) -> WorkerHandle | None:
        """The worker started for job `index`, if one is waiting (not taken)."""
        return self._started.get(index)

    def take(self, index: int) -> WorkerHandle:
        handle = self._started.pop(index, None)
        if handle is None or not handle.alive:
            if handle is not None:  # it died waiting (e.g. killed): start it again, cold
                handle.close()
            while self._next <= index:
                self._next += 1
            handle = WorkerHandle(self.jobs[index], self.env, warm_cuda=self.warm_cuda)
        return handle

    def groups(self) -> list[int]:
        """The process groups of every worker started and not yet taken, and of the spares (run.quiet pauses them)."""
        return [h.proc.pid for h in self._started.values() if h.alive] + (self.spares.groups() if self.spares else [])

    def close(self) -> None:
        for handle in self._started.values():
            handle.kill()
            handle.close()
        self._started.clear()
        if self.spares is not None:
            self.spares.close()
