"""Faults a shared server must survive, each with real processes."""
import os
import sqlite3
import subprocess
import sys
import textwrap


from bench_core.jobs import JobManager
from bench_core.levers import Stage
from bench_core.probe import run_probe
from bench_core.runner import run_stage
from bench_core.settings import Limits
from bench_core.store import Store
from tests.bench_core.test_jobs import CFG, PROBE, FakeRunner, wait
from tests.bench_core.test_probe import fake_package
from tests.conftest import ROOT


def test_oom_stage_is_marked_and_the_rest_of_the_job_and_the_next_job_run(tmp_path):
    env = {**os.environ, "BENCH_TEST_FAULT": "oom@adam-loop+layernorm+fp32"}
    store = Store(str(tmp_path / "runs.sqlite3"))
    manager = JobManager(store, Limits(), probe=PROBE, env=env)
    first = manager.submit(CFG, [Stage("adam-loop"), Stage("adam-fused")], "custom", "a")
    second = manager.submit(CFG, [Stage("adam")], "custom", "b")
    one, two = wait(manager, first.job_id, 120), wait(manager, second.job_id, 120)
    assert one.run.stages[0].status == "oom"
    assert "you tried to allocate 4294967296 bytes" in one.run.stages[0].reason
    assert one.run.stages[1].status == "ok" and two.run.stages[0].status == "ok"
    assert [s.status for s in store.load_run(first.job_id).stages] == ["oom", "ok"]
    manager.shutdown()


def test_locked_database_is_reported_and_results_kept_in_memory(tmp_path):
    path = str(tmp_path / "runs.sqlite3")
    store = Store(path, timeout_s=0.2)
    manager = JobManager(store, Limits(), probe=PROBE, stage_runner=FakeRunner())
    blocker = sqlite3.connect(path)
    blocker.execute("BEGIN EXCLUSIVE")
    job = manager.submit(CFG, [Stage(), Stage("adam-fused")], "custom", "a")
    done = wait(manager, job.job_id)
    assert done.status == "done" and [s.status for s in done.run.stages] == ["ok", "ok"]
    assert "NOT saved" in manager.persistence_error and "database is locked" in manager.persistence_error
    blocker.rollback()
    blocker.close()
    # the next write flushes what was kept in memory, and clears the error
    job2 = manager.submit(CFG, [Stage()], "custom", "b")
    wait(manager, job2.job_id)
    assert manager.persistence_error is None
    assert [s.status for s in Store(path).load_run(job.job_id).stages] == ["ok", "ok"]
    manager.shutdown()


def test_full_disk_is_reported_and_results_kept_in_memory(tmp_path):
    """RLIMIT_FSIZE makes every write past a few KiB fail as a full disk would (EFBIG), in a child process."""
    script = textwrap.dedent(f"""
        import resource, signal, sys
        sys.path.insert(0, {ROOT!r})
        from tests.bench_core.test_jobs import CFG, PROBE, FakeRunner, wait
        from bench_core.jobs import JobManager
        from bench_core.levers import Stage
        from bench_core.settings import Limits
        from bench_core.store import Store
        store = Store({str(tmp_path / 'runs.sqlite3')!r})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
        manager = JobManager(store, Limits(), probe=PROBE, stage_runner=FakeRunner())
        job = manager.submit(CFG.__class__(**{{**CFG.to_dict(), "iters": 400}}), [Stage()], "custom", "a")
        done = wait(manager, job.job_id)
        print("STATUS", done.status, len(done.run.stages[0].times_ms))
        print("ERROR", manager.persistence_error)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "STATUS done 400" in proc.stdout, proc.stdout + proc.stderr
    error = proc.stdout.split("ERROR", 1)[1]
    assert "NOT saved" in error and ("disk" in error or "File too large" in error), error


def test_broken_apex_extension_makes_its_stages_unavailable(tmp_path):
    env = fake_package(tmp_path, "PyTorch Extensions written by NVIDIA", "0.1",
                       ext_source="raise ImportError('undefined symbol: _ZN3c104cuda9SetDeviceEi')")
    probe = run_probe(env=env)
    probe["cuda"] = {"available": True, "free_bytes": 80 * 2**30}  # judge the lever as on a GPU machine
    result = run_stage(CFG, Stage("apex-fusedadam"), 0, "cuda", probe)
    assert result.status == "unavailable"
    assert result.reason.startswith("apex amp_C extension fails to load: ImportError: undefined symbol")


def test_no_user_string_reaches_a_shell_eval_or_path():
    """The engine and pages never build shell commands, eval text or open user-named files."""
    offenders = []
    for folder in ("bench_core", "pages"):
        for name in os.listdir(os.path.join(ROOT, folder)):
            if name.endswith(".py"):
                text = open(os.path.join(ROOT, folder, name)).read()
                for needle in ("shell=True", "eval(", "exec(", "os.system(", "os.popen(", "pickle.load"):
                    if needle in text:
                        offenders.append(f"{folder}/{name}: {needle}")
    assert offenders == []
