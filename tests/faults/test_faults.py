"""Faults a shared server must survive, each with real processes, real files and real file systems."""
import errno
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from bench_core.config.settings import Limits
from bench_core.levers.stage import Stage
from bench_core.machine.probe import Probe, run_probe
from bench_core.results.records import Status
from bench_core.results.store import Store
from bench_core.run.runner import RunHooks, run_stage
from bench_core.service.jobs import JobManager
from helpers import CFG, PROBE, FakeRunner, WorkerSpy, environ_of, fake_package, kill_group, wait, wait_for

HELPERS = Path(__file__).resolve().parents[1] / "helpers.py"


@pytest.mark.slow
def test_oom_stage_is_marked_and_the_rest_of_the_job_and_the_next_job_run(tmp_path):
    env = {**os.environ, "BENCH_TEST_FAULT": "oom@adam-loop+layernorm+fp32"}
    store = Store(str(tmp_path / "runs.sqlite3"))
    manager = JobManager(store, Limits(), probe=PROBE, env=env)
    first = manager.submit(CFG, [Stage("adam-loop"), Stage("adam-fused")], "custom", "a")
    second = manager.submit(CFG, [Stage("adam")], "custom", "b")
    one, two = wait(manager, first.job_id, 180), wait(manager, second.job_id, 180)
    assert one.run.stages[0].status == Status.OOM
    assert "you tried to allocate 4294967296 bytes" in one.run.stages[0].reason  # the fault's 2**30 float32
    assert one.run.stages[1].status == Status.OK and two.run.stages[0].status == Status.OK
    assert [s.status for s in store.load_run(first.job_id).stages] == [Status.OOM, Status.OK]
    manager.shutdown()


def test_locked_database_is_reported_and_results_kept_in_memory(tmp_path):
    path = str(tmp_path / "runs.sqlite3")
    store = Store(path, timeout_s=0.2)
    manager = JobManager(store, Limits(), probe=PROBE, runner=FakeRunner())
    blocker = sqlite3.connect(path)
    blocker.execute("BEGIN EXCLUSIVE")
    job = manager.submit(CFG, [Stage(), Stage("adam-fused")], "custom", "a")
    done = wait(manager, job.job_id)
    assert done.status == Status.DONE and [s.status for s in done.run.stages] == [Status.OK, Status.OK]
    assert "NOT saved" in manager.persistence_error and "database is locked" in manager.persistence_error
    blocker.rollback()
    blocker.close()
    # the next write flushes what was kept in memory, and clears the error
    job2 = manager.submit(CFG, [Stage()], "custom", "b")
    wait(manager, job2.job_id)
    assert manager.persistence_error is None
    assert [s.status for s in Store(path).load_run(job.job_id).stages] == [Status.OK, Status.OK]
    manager.shutdown()


@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MiB tmpfs, mounted for this test (needs root, or CAP_SYS_ADMIN)."""
    mount = shutil.which("mount")
    if mount is None:
        pytest.skip("no mount(8) here to create a small tmpfs for a real full disk")
    folder = tmp_path / "disk"
    folder.mkdir()
    proc = subprocess.run([mount, "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for a real full disk (needs root/CAP_SYS_ADMIN): {proc.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    """Write zeros until the file system says ENOSPC; the filler file is returned, to be deleted to free space."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    assert shutil.disk_usage(folder).free == 0
    return filler


def test_full_disk_is_reported_results_kept_in_memory_and_replayed(small_disk):
    path = str(small_disk / "runs.sqlite3")
    store = Store(path)
    filler = fill(small_disk)
    manager = JobManager(store, Limits(), probe=PROBE, runner=FakeRunner())
    job = manager.submit(CFG, [Stage(), Stage("adam-fused")], "custom", "a")
    done = wait(manager, job.job_id)
    assert done.status == Status.DONE and [len(s.times_ms) for s in done.run.stages] == [CFG.iters] * 2
    error = manager.persistence_error
    # every write since the start was kept: marking interrupted runs, the queued run, the running run, two
    # stages, the finished run
    # SQLite cannot create its write-ahead log on a full disk: it reports an I/O error
    assert error.startswith("6 write(s) kept in memory, NOT saved to ") and path in error, error
    assert "OperationalError: disk I/O error" in error, error
    filler.unlink()  # space again: the next write replays everything kept, in order, and clears the error
    job2 = manager.submit(CFG, [Stage()], "custom", "b")
    wait(manager, job2.job_id)
    assert manager.persistence_error is None
    saved = Store(path).load_run(job.job_id)
    assert saved.status == Status.DONE and [len(s.times_ms) for s in saved.stages] == [CFG.iters] * 2
    manager.shutdown()


def test_full_disk_error_says_the_disk_is_full(small_disk):
    store = Store(str(small_disk / "runs.sqlite3"))
    fill(small_disk)
    manager = JobManager(store, Limits(), probe=PROBE, runner=FakeRunner())
    wait(manager, manager.submit(CFG, [Stage()], "custom", "a").job_id)
    error = manager.persistence_error
    manager.shutdown()
    assert "No space left" in error or "ENOSPC" in error or "disk is full" in error, error


def test_file_size_limit_efbig_is_reported_kept_in_memory_and_replayed(tmp_path):
    """RLIMIT_FSIZE (in a child process) makes every write past 8 KiB fail with EFBIG, 'File too large'; then the
    limit is lifted and the next write replays what was kept."""
    script = textwrap.dedent(f"""
        import importlib.util, resource, signal
        spec = importlib.util.spec_from_file_location("helpers", {str(HELPERS)!r})  # by path: tests/ is no package
        helpers = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(helpers)
        CFG, PROBE, FakeRunner, wait = helpers.CFG, helpers.PROBE, helpers.FakeRunner, helpers.wait
        from bench_core.service.jobs import JobManager
        from bench_core.levers.stage import Stage
        from bench_core.config.settings import Limits
        from bench_core.results.store import Store
        store = Store({str(tmp_path / 'runs.sqlite3')!r})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, resource.RLIM_INFINITY))
        manager = JobManager(store, Limits(), probe=PROBE, runner=FakeRunner())
        job = manager.submit(CFG.__class__(**{{**CFG.to_dict(), "iters": 400}}), [Stage()], "custom", "a")
        done = wait(manager, job.job_id)
        print("STATUS", done.status, len(done.run.stages[0].times_ms))
        print("ERROR", manager.persistence_error)
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        wait(manager, manager.submit(CFG, [Stage()], "custom", "b").job_id)
        print("AFTER", manager.persistence_error, len(Store({str(tmp_path / 'runs.sqlite3')!r}).load_run(
            job.job_id).stages[0].times_ms))
        manager.shutdown()
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "STATUS done 400" in proc.stdout, proc.stdout + proc.stderr
    error = proc.stdout.split("ERROR", 1)[1].split("\n", 1)[0]
    assert "write(s) kept in memory, NOT saved to" in error and "OperationalError: disk I/O error" in error, \
        error
    assert "AFTER None 400" in proc.stdout, proc.stdout + proc.stderr


def test_broken_apex_extension_makes_its_stages_unavailable(tmp_path):
    env = fake_package(tmp_path, "PyTorch Extensions written by NVIDIA", "0.1",
                       ext_source="raise ImportError('undefined symbol: _ZN3c104cuda9SetDeviceEi')")
    probe = run_probe(env=env)
    # judge the lever as on a GPU machine, with this broken Apex
    probe = Probe.from_dict({**probe.to_dict(), "cuda": {"available": True, "free_bytes": 80 * 2**30}})
    result = run_stage(replace(CFG, device="cuda"), Stage("apex-fusedadam"), probe)
    assert result.status == Status.UNAVAILABLE and not result.timeline  # no worker was started for it
    assert result.reason.startswith("apex amp_C extension fails to load: ImportError: undefined symbol")


def test_the_operator_token_never_reaches_a_worker(monkeypatch):
    """Read from /proc while the worker hangs: its environment has the parent's variables but not the token."""
    monkeypatch.setenv("BENCH_OPERATOR_TOKEN", "s3cret-token")
    monkeypatch.setenv("BENCH_TEST_MARKER", "inherited")
    monkeypatch.setenv("BENCH_TEST_FAULT", "hang")
    spy = WorkerSpy(monkeypatch)
    for worker_env in (None, {**os.environ}):  # the process's own environment, and one handed in (JobManager)
        spy.workers.clear()
        hooks = RunHooks(worker_env=worker_env)
        seen = {}

        def watch(hooks=hooks, seen=seen):
            wait_for(lambda: spy.pids, what="the worker to start")
            seen.update(environ_of(spy.pids[0]))
            hooks.cancel.set()

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            result = run_stage(CFG, Stage(), PROBE, hooks)
        finally:
            watcher.join(timeout=60)
            for pid, started in spy.workers:
                kill_group(pid, started)
        assert result.status == Status.CANCELLED
        assert seen.get("BENCH_TEST_MARKER") == "inherited", sorted(seen)  # we did read the worker's environment
        assert "BENCH_OPERATOR_TOKEN" not in seen and "s3cret-token" not in "".join(seen.values())


@pytest.mark.slow
def test_the_operator_token_never_reaches_the_probe(tmp_path, monkeypatch):
    """The probe's process dumps its environment at start-up (a sitecustomize on its PYTHONPATH)."""
    dump = tmp_path / "env.txt"
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import os\nif os.environ.get('BENCH_ENV_DUMP'):\n"
        "    open(os.environ['BENCH_ENV_DUMP'], 'w').write('\\n'.join(sorted(os.environ)))\n")
    monkeypatch.setenv("BENCH_OPERATOR_TOKEN", "s3cret-token")
    monkeypatch.setenv("BENCH_ENV_DUMP", str(dump))
    monkeypatch.setenv("PYTHONPATH", f"{hook}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    for env in (None, {**os.environ}):
        dump.unlink(missing_ok=True)
        probe = run_probe(env=env)
        assert probe.error is None and dump.exists()
        names = dump.read_text().split("\n")
        assert "BENCH_ENV_DUMP" in names and "BENCH_OPERATOR_TOKEN" not in names, names


def test_no_user_string_reaches_a_shell_eval_or_path(root):
    """The engine, the dashboard and its pages never build shell commands, eval text, unpickle or open user-named
    files: ruff's bandit rules (S) over them are clean. Exceptions are per line (`# noqa: S603` on our own argv)."""
    paths = [p for p in ("bench_core", "dashboard", "pages", "app.py") if (root / p).exists()]
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select", "S", "--output-format",
                           "concise", *paths], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "All checks passed!" and not proc.stderr, proc.stdout + proc.stderr
