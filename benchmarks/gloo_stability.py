"""Two-process (gloo, CPU) stages back to back while other processes keep the CPU busy.

    python benchmarks/gloo_stability.py --stages 30 --load 2
Each stage is a real one-stage run (runner.run_stage -> torchrun --standalone -> two bench_core.run.worker ranks ->
init_process_group('gloo'), DDP, warm-up with all_agree, barrier, timed steps, profile on rank 0, teardown).
`--load N` starts N busy-loop processes (each stops by itself after `--max-minutes`, and is killed at the end);
`--load-cmd CMD` also runs CMD (e.g. the test suite) over and over in its own process group, killed at the end.
Prints every stage's status and wall time, and for a failure its reason; `--stderr-dir` keeps the full stderr
of every failed stage. A stage that ended `ok` although torchrun reported a failed rank (a rank that failed after
rank 0 had reported) is flagged too. Exit code 1 if any stage did not end `ok` or any rank failed.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import signal
import subprocess
import sys
import threading
import time

BUSY = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def start_load(count: int, seconds: float) -> list[subprocess.Popen]:
    """`count` processes that spin on the CPU; each exits by itself after `seconds` even if we die."""
    return [subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=seconds)],  # noqa: S603 (our own argv)
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(count)]


def stop_load(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait()


class LoadCommand:
    """`cmd` run again and again (shell, own process group) until stopped; its output goes to `log`."""

    def __init__(self, cmd: str, log: str, deadline: float):
        self.cmd, self.log, self.deadline = cmd, log, deadline
        self.proc: subprocess.Popen | None = None
        self.runs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        with open(self.log, "a") as out:
            while not self._stop.is_set() and time.monotonic() < self.deadline:
                self.proc = subprocess.Popen(self.cmd, shell=True, stdout=out, stderr=subprocess.STDOUT,  # noqa: S602
                                             stdin=subprocess.DEVNULL, start_new_session=True)
                self.runs += 1
                while self.proc.poll() is None and not self._stop.is_set() and time.monotonic() < self.deadline:
                    time.sleep(0.5)
                self._kill()

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # our own child's group only
            except ProcessLookupError:
                pass
            self.proc.wait()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._kill()


RANK_FAILED = ("ChildFailedError", "exitcode  :", "Signal ")


def keep_stderr(folder: str | None, number: int, text: str) -> str:
    if not folder or not text:
        return ""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"stage{number:02d}.stderr.txt")
    with open(path, "w") as fh:
        fh.write(text)
    return f"  (full stderr: {path})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stages", type=int, default=30, help="two-process stages to run, one after another")
    ap.add_argument("--load", type=int, default=2, help="busy-loop processes running during the stages")
    ap.add_argument("--load-cmd", default=None, help="a shell command run over and over as extra load "
                    "(e.g. '.venv/bin/python -m pytest -q tests'), in its own process group, killed at the end")
    ap.add_argument("--load-log", default=os.devnull, help="where --load-cmd's output goes")
    ap.add_argument("--max-minutes", type=float, default=60.0, help="stop starting stages (and the load) after this")
    ap.add_argument("--stage-timeout", type=float, default=300.0, help="the runner's per-stage limit, seconds")
    ap.add_argument("--optimizer", default="adam")
    ap.add_argument("--warmup-min-s", default="0.2", help="BENCH_WARMUP_MIN_S for the workers")
    ap.add_argument("--stderr-dir", default=None, help="write each failed stage's full stderr here")
    args = ap.parse_args()

    os.environ["BENCH_WARMUP_MIN_S"] = args.warmup_min_s  # read at import by config, in us and in the workers
    # Keep every stage's launcher: its exit code and full stderr are read when the runner closes it (at once for a
    # failed stage; in the background for a finished one, whose torchrun may still be tearing down).
    from bench_core.config.bench_config import BenchConfig
    from bench_core.levers.registry import KERNEL_PACKAGES
    from bench_core.levers.stage import Stage
    from bench_core.machine.probe import run_probe
    from bench_core.run import processes, runner
    handles: list = []
    exits: dict[int, tuple[int | None, str]] = {}
    original_init, original_close = processes.WorkerHandle.__init__, processes.WorkerHandle.close

    def spy_init(handle, *a, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        original_init(handle, *a, **kw)
        handles.append(handle)

    def spy_close(handle):  # noqa: ANN001, ANN202
        if id(handle) not in exits and not handle.stderr.closed:
            exits[id(handle)] = (handle.proc.poll(), handle.stderr_text())
        original_close(handle)

    processes.WorkerHandle.__init__ = spy_init
    processes.WorkerHandle.close = spy_close
    meaningful = runner.meaningful_stderr

    cfg = BenchConfig(depth=2, width=64, heads=4, seq_len=32, batch_size=2, vocab_size=256, warmup=1, iters=4,
                      device="cpu")
    stage = Stage(args.optimizer, gpus="2")
    print(f"# {datetime.datetime.now().isoformat(timespec='seconds')}  {platform.node()}  {os.cpu_count()} cores  "
          f"python {platform.python_version()}", flush=True)
    print(f"# command: python {' '.join(shlex.quote(a) for a in sys.argv)}", flush=True)
    import torch
    print(f"# torch {torch.__version__}; stage {stage.optimizer} gpus=2 on cpu (gloo); {args.load} busy-loop "
          f"load processes; load command: {args.load_cmd or 'none'}; BENCH_WARMUP_MIN_S={args.warmup_min_s}",
          flush=True)
    probe = run_probe(packages=KERNEL_PACKAGES)
    deadline = time.monotonic() + args.max_minutes * 60
    load = start_load(args.load, args.max_minutes * 60 + 60)
    load_cmd = LoadCommand(args.load_cmd, args.load_log, deadline) if args.load_cmd else None
    statuses: list[str] = []
    failures: list[tuple[int, str]] = []
    hidden: list[int] = []
    staged: list[tuple[int, object]] = []
    walls: list[float] = []
    try:
        for i in range(args.stages):
            if time.monotonic() > deadline:
                print(f"# time limit reached after {i} stages", flush=True)
                break
            t0 = time.monotonic()
            result = runner.run_stage(cfg, stage, probe, runner.RunHooks(timeout_s=args.stage_timeout))
            wall = time.monotonic() - t0
            walls.append(wall)
            handle = handles[-1] if handles else None
            status = str(getattr(result.status, "value", result.status))
            statuses.append(status)
            line = f"stage {i + 1:2d}/{args.stages}: {status:8s} {wall:6.1f} s"
            if status != "ok":
                line += f"  reason: {result.reason}"
                failures.append((i + 1, result.reason or ""))
                text = exits.get(id(handle), (None, ""))[1] if handle is not None else ""
                line += keep_stderr(args.stderr_dir, i + 1, text)
            staged.append((i + 1, handle))
            print(line, flush=True)
    finally:
        if load_cmd is not None:
            load_cmd.stop()
        stop_load(load)
    # A stage reported ok can still have had a rank fail after rank 0's last event: look at every launcher's exit.
    end = time.monotonic() + 120
    while time.monotonic() < end and any(h is not None and id(h) not in exits for _, h in staged):
        time.sleep(0.5)
    for (number, handle), status in zip(staged, statuses, strict=False):
        code, text = exits.get(id(handle), (None, "")) if handle is not None else (None, "")
        if status == "ok" and (code not in (0, None) or any(mark in text for mark in RANK_FAILED)):
            hidden.append(number)
            print(f"stage {number:2d}: ok, but its launcher exited with {code}: {meaningful(text)}"
                  f"{keep_stderr(args.stderr_dir, number, text)}", flush=True)
        elif status == "ok" and handle is not None and id(handle) not in exits:
            print(f"stage {number:2d}: ok, its launcher had not exited 120 s after the last stage", flush=True)
    ran = len(statuses)
    ok = statuses.count("ok")
    if load_cmd is not None:
        print(f"# the load command ran {load_cmd.runs} time(s)", flush=True)
    print(f"# {ok}/{ran} stages ok, {ran - ok} failed, {len(hidden)} ok but with a failed rank; wall per stage "
          f"min {min(walls, default=0):.1f} s, max {max(walls, default=0):.1f} s, total {sum(walls):.0f} s", flush=True)
    return 0 if ran and ok == ran and ran == args.stages and not hidden else 1


if __name__ == "__main__":
    sys.exit(main())
