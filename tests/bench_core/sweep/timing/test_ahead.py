"""Compiling ahead (timing.ahead): which steps, in how many processes, dealt how; that what it leaves in the cache is
what the timing process then reads (the real compiler on a tiny llama on CPU); and that stopping the timing process
stops its compiling children too."""
from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.stage import Stage
from bench_core.sweep.timing.ahead import AheadJob, compile_ahead, jobs_for, processes_for, shares
from bench_core.sweep.timing.timings import Part

LLAMA = BenchConfig(family="llama", depth=4, width=48, heads=2, seq_len=24, batch_size=1, vocab_size=96, device="cpu")
BF16 = Stage("adam-fused", "rmsnorm", "bf16").for_family("llama")
COMPILED = BF16.replace(compile="compile")


def test_each_compiled_step_is_a_job_once_and_an_eager_stage_has_none():
    other = BenchConfig(**{**LLAMA.to_dict(), "batch_size": 2})
    jobs = jobs_for([(LLAMA, (COMPILED, BF16)), (other, (COMPILED, BF16))], False, [(LLAMA, COMPILED), (LLAMA, BF16)])
    # the full-depth step first (the compiled stage's only), then each point's shallow steps; BF16 compiles nothing
    assert [(j.part, j.config.batch_size, j.stage) for j in jobs] == [
        (Part.STEP_FULL, 1, COMPILED), (Part.STEP_1, 1, COMPILED), (Part.STEP_2, 1, COMPILED),
        (Part.STEP_1, 2, COMPILED), (Part.STEP_2, 2, COMPILED)]
    assert jobs_for([(LLAMA, (BF16,))], True, [(LLAMA, BF16)]) == []
    # with the breakdown, its compiled parts too, each once though both stages name it
    parts = jobs_for([(LLAMA, (COMPILED, COMPILED.replace(optimizer="adam")))], True, [])
    names = [(j.part, j.name) for j in parts]
    assert len(names) == len(set(names)) and (Part.NORM, "rmsnorm@bf16+compile") in names
    assert all(AheadJob.from_dict(j.to_dict()) == j for j in jobs + parts)


def test_the_processes_side_by_side_go_with_the_cores_and_the_costliest_job_goes_first():
    assert processes_for(jobs=32, cores=16) == 8
    assert processes_for(jobs=32, cores=2) == 0     # a 2-core host: a second process would only take the first's core
    assert processes_for(jobs=1, cores=16) == 0     # one job: nothing to do side by side
    assert processes_for(jobs=3, cores=16) == 3
    full = AheadJob(LLAMA, COMPILED, Part.STEP_FULL, COMPILED.key)          # four blocks deep
    ones = [AheadJob(LLAMA, COMPILED, Part.STEP_1, COMPILED.key)] * 4       # one block each
    dealt = shares([*ones, full], 2)
    assert dealt[0] == [full] and dealt[1] == ones                          # 4 blocks against 4 x 1


@pytest.mark.skipif(not (shutil.which("c++") or shutil.which("g++")),
                    reason="inductor's CPU backend needs a C++ compiler")
@pytest.mark.slow
def test_a_step_compiled_ahead_is_read_from_the_cache_when_it_is_timed(tmp_path, monkeypatch):
    """The real compiler: a process compiles the tiny llama's one-block step into a fresh cache; the timing code
    then reads both its graphs (forward, backward) from it and compiles none. Without the process ahead, the same
    timing in a fresh cache compiles both (its counts would read 0 and 2): the shape is this test's own, so no
    earlier test's compile can answer it."""
    import torch

    from bench_core.sweep.timing.process import time_part
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    job = AheadJob(LLAMA, COMPILED, Part.STEP_1, COMPILED.key)
    ahead = compile_ahead([job], "cpu", processes=1)
    assert ahead is not None and ahead.failed == () and (ahead.steps, ahead.processes) == (1, 1)
    found = time_part(torch, LLAMA, "cpu", Part.STEP_1, COMPILED.key, COMPILED, torch.Generator().manual_seed(0),
                      1, 2)
    assert not isinstance(found, str), found
    assert (found.cache_hits, found.cache_misses) == (2, 0)


@pytest.mark.slow
def test_a_step_that_fails_ahead_is_named_and_left_to_the_timing(tmp_path, monkeypatch):
    """A job that cannot run (here a width its heads do not divide) is said, not raised: it is compiled while it
    is timed, as before."""
    bad = AheadJob(BenchConfig(**{**LLAMA.to_dict(), "width": 47}), COMPILED, Part.STEP_1, COMPILED.key)
    ahead = compile_ahead([bad], "cpu", processes=1)
    assert ahead is not None and len(ahead.failed) == 1
    assert ahead.failed[0].startswith(f"step@1 {COMPILED.key} at width 47, batch 1: ")
    assert "1 failed there and compiled as they were timed (first: step@1" in ahead.words


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split(")")[-1].split()[0] != "Z"   # a zombie has ended
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_stopping_the_timing_process_stops_what_it_compiles_ahead(tmp_path, monkeypatch):
    """A budget spent while compiling ahead: the timing process is killed with its group, so no compiling child
    is left on the GPU, and the first point says where the time went. A stand-in timing process starts a child
    and hangs."""
    from bench_core.sweep.core import runner
    from bench_core.sweep.core.spec import Axis, SweepSpec, grid, parse_comparison
    from bench_core.sweep.timing.messages import ahead_begins_line
    pid_file = tmp_path / "child.pid"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\ncat > /dev/null\nsleep 60 &\necho $! > {pid_file}\n"
                    f"echo '{ahead_begins_line(4, 2)}' >&2\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setattr(runner.sys, "executable", str(fake))
    spec = SweepSpec(parse_comparison(f"{BF16.key},{COMPILED.key}", "llama"), LLAMA, (Axis("batch_size", (1, 2)),),
                     None)
    cancel = threading.Event()
    threading.Timer(1.5, cancel.set).start()
    got = list(runner.predict_in_process(grid(spec.axes, spec.base), spec.comparison, "cpu", cancel))
    assert got == [(0, None, ("stopped while compiling ahead 4 steps in 2 processes (sweep.timing.ahead), before "
                              "any point was timed",))]
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child)
