"""The real engine, real worker processes, a tiny CPU config."""
import math
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace

import pytest

from bench_core.levers.presets import PRESETS
from bench_core.levers.stage import Stage
from bench_core.results.records import Status
from bench_core.results.summary import summarize
from bench_core.run.processes import StageJob
from bench_core.run.runner import RunHooks, new_run, run_all, run_stage
from helpers import WorkerSpy, alive, built_event, group_members, kill_group


def assert_workers_gone(workers):
    """Every worker process the run started has exited and been reaped, and nothing is left in its group.
    `workers`: (pid, start time) pairs from WorkerSpy."""
    assert workers, "the run started no worker process"

    def left():
        return {pid: group_members(pid, started) for pid, started in workers
                if alive(pid, started) or group_members(pid, started)}

    # a worker that reported `finished` exits in the background; the engine kills one still there after 60 s
    deadline = time.time() + 65
    while time.time() < deadline and left():
        time.sleep(0.05)
    leftovers = left()
    for pid, started in workers:
        kill_group(pid, started)
    assert not leftovers, f"worker processes (or their groups) outlived the stage: {leftovers}"


# Warm-up of exactly `warmup` steps (no minimum time): every stage's first timed step is then the same step of
# training, so first losses can be compared with the initial loss and with each other.
COUNTED_WARMUP = {**os.environ, "BENCH_WARMUP_MIN_S": "0"}


@pytest.mark.slow
def test_seed_preset_on_cpu(tiny_cfg, cpu_probe):
    updates = []
    run = run_all(new_run(tiny_cfg, PRESETS["seed"], cpu_probe, "seed"), cpu_probe,
                  RunHooks(on_update=updates.append, worker_env=COUNTED_WARMUP))
    base, *apex = run.stages
    assert base.warmup_steps == tiny_cfg.warmup
    assert base.status == Status.OK and base.verdict == "verified" and base.kernels["aten_native_layer_norm"]
    assert len(base.times_ms) == tiny_cfg.iters and all(0 < t < 5000 for t in base.times_ms)
    assert base.rounds == (tiny_cfg.iters,)
    assert abs(base.losses[0] - math.log(tiny_cfg.vocab_size)) < 0.3 and base.losses[-1] < base.losses[0]
    assert base.peak_rss_mib and base.peak_rss_mib > 50
    assert base.host_ms == () and base.energy_j is None  # GPU figures: none on a CPU, never made up
    for stage in apex:
        assert stage.status == Status.UNAVAILABLE and not stage.times_ms
        assert stage.reason == "Apex FusedAdam runs CUDA kernels only (amp_C); no CPU path"
    s = summarize(run).stages[0]
    assert s.speedup == 1.0 and s.speedup_ci is None  # the baseline is the reference
    assert s.timing.p10_ms <= s.timing.median_ms <= s.timing.p90_ms
    assert s.rates.tokens_per_s == pytest.approx(tiny_cfg.tokens_per_step / (s.timing.median_ms / 1e3))
    assert s.rates.mfu is None and s.rates.mfu_reason == "no GPU: MFU is a GPU figure"
    assert s.profile is not None and s.profile.source == "cpu" and sum(s.profile.breakdown_ms.values()) > 0
    # unavailable stages are marked before any worker runs; progress streamed one iteration at a time
    first_ok = next(i for i, u in enumerate(updates) if u.stages[0].times_ms)
    assert all(st.status == Status.UNAVAILABLE for st in updates[first_ok].stages[1:])
    counts = [len(u.stages[0].times_ms) for u in updates]
    assert set(range(tiny_cfg.iters + 1)) <= set(counts)
    assert run.status == Status.DONE


@pytest.mark.slow
def test_native_preset_on_cpu(tiny_cfg, cpu_probe):
    cfg = replace(tiny_cfg, iters=3)
    run = run_all(new_run(cfg, PRESETS["native"], cpu_probe, "native"), cpu_probe,
                  RunHooks(worker_env=COUNTED_WARMUP))
    statuses = [s.status for s in run.stages]
    assert statuses == [Status.OK] * 4 + [Status.UNAVAILABLE], [s.reason for s in run.stages]
    assert run.stages[4].key == "adam-fused+layernorm+bf16+graphs"
    assert run.stages[4].reason == "CUDA graphs capture GPU work: needs a CUDA device"
    fused = run.stages[1]
    assert fused.kernels["aten_fused_adam"] and fused.verdict == "verified"
    assert run.stages[2].autocast_dtype == "bfloat16" and run.stages[2].kernels["gemm_bf16"]
    compiled = run.stages[3]
    assert compiled.kernels["compiled_region"] and compiled.verdict == "verified", compiled.warnings
    # identical data and init, and the same number of warm-up steps: every stage starts from the same loss
    assert [s.warmup_steps for s in run.stages[:4]] == [cfg.warmup] * 4
    first = [s.losses[0] for s in run.stages[:4]]
    assert max(first) - min(first) < 0.05
    # every stage records what its levers put in the model: GPT's norm modules, built with the stage's parts
    built = [s.surgery.of("layernorm") if s.surgery else None for s in run.stages[:4]]
    assert all(c is not None and c.swaps[0].text == f"{2 * cfg.depth + 1} LayerNorm" for c in built), built


@pytest.mark.slow
def test_fp16_stage_uses_grad_scaler(tiny_cfg, cpu_probe):
    result = run_stage(tiny_cfg, Stage("adam", "layernorm", "fp16"), cpu_probe)
    assert result.status == Status.OK and result.autocast_dtype == "float16" and result.verdict == "verified"
    assert any("_amp_foreach_non_finite_check_and_unscale" in n for n in result.kernels["grad_scaler"])
    assert result.skipped_steps is not None and 0 <= result.skipped_steps <= tiny_cfg.iters
    bf16 = run_stage(tiny_cfg, Stage("adam", "layernorm", "bf16"), cpu_probe)
    assert bf16.status == Status.OK and bf16.kernels["grad_scaler"] == [] and bf16.skipped_steps is None


@pytest.mark.slow
@pytest.mark.parametrize("fault,expected", [("abort", "signal SIGABRT"), ("segfault", "signal SIGSEGV"),
                                            ("exit3", "exited with code 3")])
def test_crashing_worker_is_failed_and_next_stage_runs(tiny_cfg, cpu_probe, monkeypatch, fault, expected):
    spy = WorkerSpy(monkeypatch)
    env = {**os.environ, "BENCH_TEST_FAULT": f"{fault}@adam+layernorm+fp32"}
    stages = [Stage("adam"), Stage("adam-fused")]
    run = run_all(new_run(tiny_cfg, stages, cpu_probe, "custom"), cpu_probe, RunHooks(worker_env=env))
    assert run.stages[0].status == Status.FAILED and expected in run.stages[0].reason
    assert run.stages[1].status == Status.OK
    assert len(spy.pids) == 2  # one process per stage
    assert_workers_gone(spy.workers)


@pytest.mark.slow
def test_a_lever_that_cannot_be_built_in_the_worker_is_unavailable(tiny_cfg, cpu_probe):
    """The worker-side path: the probe saw nothing wrong, the worker's own build raises ImportError."""
    env = {**os.environ, "BENCH_TEST_FAULT": "build@adam+layernorm+fp32"}
    stages = [Stage("adam"), Stage("adam-fused")]
    run = run_all(new_run(tiny_cfg, stages, cpu_probe, "custom"), cpu_probe, RunHooks(worker_env=env))
    broken, after = run.stages
    assert Stage("adam").unavailable_reason(cpu_probe, "cpu") is None  # not the parent's judgement
    assert broken.status == Status.UNAVAILABLE and not broken.times_ms, broken.reason
    assert broken.reason == ("Adam · LayerNorm · FP32 could not be built: ImportError: test fault: the norm lever's "
                             "extension could not be imported")
    assert after.status == Status.OK and len(after.times_ms) == tiny_cfg.iters
    assert summarize(run).baseline_note == f"no speedups: the baseline stage adam+layernorm+fp32 is unavailable " \
                                        f"({broken.reason})"


def test_hanging_worker_times_out(tiny_cfg, cpu_probe, monkeypatch):
    spy = WorkerSpy(monkeypatch)
    env = {**os.environ, "BENCH_TEST_FAULT": "hang"}
    start = time.monotonic()
    result = run_stage(tiny_cfg, Stage(), cpu_probe, RunHooks(timeout_s=3, worker_env=env))
    assert result.status == Status.TIMEOUT and result.reason == "stage exceeded its 3 s limit"
    assert time.monotonic() - start < 10
    assert_workers_gone(spy.workers)


def _worker_baseline_vm_bytes() -> int:
    """Address space a worker has mapped before its job: a fresh interpreter with what the worker imports."""
    code = ("import re, torch; from bench_core.models import gpt; from bench_core.run import worker; "
            "print(re.search(r'VmSize:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return int(out.stdout.strip()) * 1024


@pytest.mark.slow
def test_cpu_oom_during_a_training_step(tiny_cfg, cpu_probe):
    """The model and Adam build under the cap; the first step's logits cannot be allocated.

    Weights: (V + T) * d + a one-layer block, about 1.1M parameters here, so weights, grads and both Adam moments
    take 16 B x 1.1M = 18 MiB. The logits alone are B * T * V fp32 = 16 * 1024 * 32768 * 4 B = 2 GiB in one
    allocation. The cap leaves 1 GiB above what the worker has mapped after its imports: 50x the states, half the
    logits. Threads and allocator arenas take well under 1 GiB, so the build fits and the step cannot."""
    big = replace(tiny_cfg, depth=1, width=32, heads=2, seq_len=1024, batch_size=16, vocab_size=32768)
    logits_bytes = big.batch_size * big.seq_len * big.vocab_size * 4
    assert logits_bytes == 2 * 2**30
    cap_mib = (_worker_baseline_vm_bytes() + 2**30) // 2**20
    env = {**os.environ, "BENCH_TEST_RLIMIT_AS_MIB": f"{cap_mib}@adam+layernorm+fp32"}
    result = run_stage(big, Stage(), cpu_probe, RunHooks(worker_env=env))
    assert result.status == Status.OOM, result.reason
    assert f"you tried to allocate {logits_bytes} bytes" in result.reason, result.reason
    # it failed in a step, not in the build: the worker reported its built model and had started
    assert result.params == 32768 * 32 + 1024 * 32 + 12 * 32 * 32 + 13 * 32 + 2 * 32
    assert {"built", "started"} <= set(result.timeline) and not result.times_ms


def test_cancel_kills_the_running_stage(tiny_cfg, cpu_probe, monkeypatch):
    spy = WorkerSpy(monkeypatch)
    cancel = threading.Event()
    env = {**os.environ, "BENCH_TEST_FAULT": "hang"}
    timer = threading.Timer(1.0, cancel.set)
    timer.start()
    start = time.monotonic()
    result = run_stage(tiny_cfg, Stage(), cpu_probe, RunHooks(cancel=cancel, worker_env=env))
    timer.cancel()
    assert result.status == Status.CANCELLED and result.reason == "cancelled by user"
    assert time.monotonic() - start < 10
    assert_workers_gone(spy.workers)


def test_unavailable_stages_stay_unavailable_after_a_cancel(tiny_cfg, cpu_probe):
    cancel = threading.Event()
    env = {**os.environ, "BENCH_TEST_FAULT": "hang"}
    stages = [Stage(), Stage("apex-fusedadam"), Stage("adam-fused")]
    timer = threading.Timer(1.0, cancel.set)
    timer.start()
    run = run_all(new_run(tiny_cfg, stages, cpu_probe, "custom"), cpu_probe, RunHooks(cancel=cancel, worker_env=env))
    timer.cancel()
    assert run.status == Status.CANCELLED
    assert [s.status for s in run.stages] == [Status.CANCELLED, Status.UNAVAILABLE, Status.CANCELLED]
    assert run.stages[1].reason.startswith("Apex FusedAdam runs CUDA kernels only")
    assert run.stages[2].reason == "job cancelled"


@pytest.mark.slow
def test_repeats_run_every_stage_each_round_in_alternating_order(tiny_cfg, cpu_probe, monkeypatch):
    """Round 0 runs the ladder forwards, round 1 backwards; the series of both rounds accumulate per stage."""
    spy = WorkerSpy(monkeypatch)
    cfg = replace(tiny_cfg, iters=3, repeats=2)
    run = run_all(new_run(cfg, [Stage(), Stage("adam-fused")], cpu_probe, "custom"), cpu_probe)
    assert [s.status for s in run.stages] == [Status.OK, Status.OK]
    for s in run.stages:
        assert s.rounds == (3, 3) and len(s.times_ms) == 6 and len(s.losses) == 6
        # warm-up: at least `warmup` steps and at least BENCH_WARMUP_MIN_S (0.2 s, tests/conftest.py) of them
        assert s.warmup_steps >= cfg.warmup and s.warmup_s >= float(os.environ["BENCH_WARMUP_MIN_S"])
        # every process's warm-up recorded, step by step (CPU: perf_counter times, no clock), in round order
        assert len(s.warmups) == 2 and (s.warmups[0].steps, s.warmups[0].seconds) == (s.warmup_steps, s.warmup_s)
        assert all(len(w.step_ms) == len(w.step_start_s) == w.steps and min(w.step_ms) > 0 and w.clock_mhz == ()
                   for w in s.warmups)
    a, b = run.stages
    # forwards then backwards: adam, adam-fused | adam-fused, adam
    assert a.started_at < b.started_at and b.finished_at < a.finished_at
    assert len(spy.pids) == 4  # a fresh process for every stage in every round
    s = summarize(run).stages[1]
    assert len(s.round_medians) == 2 and s.speedup_ci is not None


class _FakeCeilings:
    """Records when the run started and asked for the ceilings measurement (the real one is a GPU process)."""

    def __init__(self):
        self.events: list[tuple[str, float]] = []

    def start(self):
        self.events.append(("start", time.time()))

    def measure(self):
        from bench_core.machine.ceilings import Ceilings
        self.events.append(("measure", time.time()))
        return Ceilings(700.0, 50.0, 4000.0, "fake method", "2026-01-01T00:00:00+00:00", "fake GPU")

    def close(self):
        self.events.append(("close", time.time()))


@pytest.mark.slow
def test_ceilings_are_measured_after_the_stages_never_before_the_first(tiny_cfg, cpu_probe):
    fake = _FakeCeilings()
    stages = [Stage(), Stage(optimizer="adam-loop")]
    run = run_all(new_run(replace(tiny_cfg, iters=2), stages, cpu_probe, "custom"), cpu_probe,
                  RunHooks(ceilings=fake))
    first, last = run.stages
    assert [name for name, _ in fake.events] == ["start", "measure", "close"]
    started, measured = fake.events[0][1], fake.events[1][1]
    assert first.status == last.status == Status.OK
    assert first.started_at < first.finished_at <= started  # the first stage's worker ran before any of it
    assert last.finished_at <= measured                      # and the measurement after the last stage
    assert run.machine.ceilings is not None and run.machine.ceilings.copy_gbps == 4000.0
    assert run.machine.to_dict()["ceilings"]["device_name"] == "fake GPU"  # stored with the run


@pytest.mark.slow
def test_a_jobs_thread_count_reaches_its_worker(tiny_cfg):
    """The job manager's CPU-thread cap travels in the StageJob; torch's own default never exceeds the cores."""
    threads = (os.cpu_count() or 1) + 1
    assert built_event(StageJob(tiny_cfg, Stage(), "cpu", threads=threads)).cpu_threads == threads


def test_a_job_crosses_the_process_boundary_unchanged(tiny_cfg):
    job = StageJob(replace(tiny_cfg, family="llama"), Stage("adam-fused", "rmsnorm", "bf16", "compile", "2",
                                                            "liger-flce"), "cpu", round=3, profile=False,
                   build_ahead=False, threads=5)
    assert StageJob.from_json(job.to_json()) == job


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_the_timed_loop_returns_its_steps_and_peaks(tiny_cfg, precision):
    """In this process, no worker: every step handed on as it completes and kept in the result, in order; the CPU
    peak is RSS (no GPU figures); skipped steps are counted only where a GradScaler runs."""
    import torch

    from bench_core.run.step import TimedSteps, build_stage, measure
    stage = Stage("adam", "layernorm", precision)
    built = build_stage(StageJob(tiny_cfg, stage, "cpu"), stage, torch)
    seen = []
    timed = measure(built, seen.append, torch)
    assert isinstance(timed, TimedSteps) and timed.steps == tuple(seen)
    assert [s.i for s in timed.steps] == list(range(tiny_cfg.iters))
    assert all(s.ms > 0 and s.host_ms is None and math.isfinite(s.loss) for s in timed.steps)
    assert len(timed.rank_peak_mib) == 1 and timed.peak_rss_mib == timed.rank_peak_mib[0] > 50
    assert timed.peak_allocated_mib is None and timed.peak_reserved_mib is None and timed.energy_j is None
    assert timed.skipped_steps is None if precision == "fp32" else 0 <= timed.skipped_steps <= tiny_cfg.iters
