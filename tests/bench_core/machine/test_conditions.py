"""Noise with its cause: the NVML/host sampler (a scripted pynvml), the flags derived from its figures at and around
each bound, the merge across processes, and the figures' way through CSV, JSON and the history database."""
import csv
import io
import os
import subprocess
import sys
import threading
import time
import types
from dataclasses import replace

import pytest

from bench_core.machine.conditions import RUN_PID_ENV, ClocksLocked, Conditions, ConditionsSampler, decode_reasons
from bench_core.measure.noise import Cause, StageConditions, causes, host_overloaded, worker_starved
from bench_core.results.columns import DISPLAY_COLUMNS
from bench_core.results.formats import ImportRejected, parse_csv, parse_json, to_csv, to_json
from bench_core.results.records import StageResult
from bench_core.results.store import Store
from bench_core.results.summary import summarize
from bench_core.run import events as ev
from bench_core.run.runner import StageFold
from helpers import sample_runs

gpu_run = sample_runs().gpu_run


class NotSupported(Exception):
    pass


def fake_nvml(clocks=(1980,), reasons=(0,), procs=((),), app=(1980, 1980), power_mw=(600_000,), temps=(60,)):
    """A pynvml stand-in: each query returns its script's next value, then keeps returning the last one.
    `app`: (applications clock, default applications clock); a None raises NVML's 'not supported'."""
    nvml = types.ModuleType("pynvml")
    nvml.NVML_CLOCK_SM, nvml.NVML_TEMPERATURE_GPU = 1, 0
    calls = {"clock": 0}

    def script(values, counter=None):
        state = {"i": 0}

        def read(*_):
            value = values[min(state["i"], len(values) - 1)]
            state["i"] += 1
            if counter:
                calls[counter] += 1
            return value
        return read

    def maybe(value):
        def read(*_):
            if value is None:
                raise NotSupported("not supported")
            return value
        return read

    nvml.nvmlInit = nvml.nvmlShutdown = lambda: None
    nvml.nvmlDeviceGetHandleByIndex = lambda i: f"gpu{i}"
    nvml.nvmlDeviceGetClockInfo = script(clocks, "clock")
    nvml.nvmlDeviceGetCurrentClocksEventReasons = script(reasons)
    nvml.nvmlDeviceGetPowerUsage = script(power_mw)
    nvml.nvmlDeviceGetTemperature = script(temps)
    nvml.nvmlDeviceGetComputeRunningProcesses = script([[types.SimpleNamespace(pid=p) for p in ps] for ps in procs])
    nvml.nvmlDeviceGetApplicationsClock = maybe(app[0])
    nvml.nvmlDeviceGetDefaultApplicationsClock = maybe(app[1])
    nvml.calls = calls
    return nvml


def sample(monkeypatch, nvml, every_s=60.0, until_clock_reads=0):
    """Start and stop a sampler on `nvml`; with a long period only the first and last samples are taken."""
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    sampler = ConditionsSampler(0, every_s=every_s)
    sampler.start()
    deadline = time.time() + 10
    while nvml is not None and nvml.calls["clock"] < until_clock_reads and time.time() < deadline:
        time.sleep(0.005)
    return sampler.stop()


# ---------------------------------------------------------------- the sampler
def test_the_sampler_keeps_every_clock_sample_on_its_thread(monkeypatch):
    nvml = fake_nvml(clocks=(1410, 1980, 1755, 1980))
    c = sample(monkeypatch, nvml, every_s=0.005, until_clock_reads=8)
    assert len(c.sm_clock_mhz) >= 8 and c.sm_clock_mhz[:4] == (1410, 1980, 1755, 1980)
    figures = StageConditions.of(c)
    assert figures.sm_clock_mhz_min == 1410 and figures.sm_clock_mhz_median == 1980  # the lowest, and the usual one
    assert figures.power_w_median == 600.0 and figures.temp_c_max == 60.0


def test_min_and_median_of_a_stage_pool_every_process_sample():
    a = Conditions(sm_clock_mhz=(1980, 1980))
    b = Conditions(sm_clock_mhz=(1500, 1600, 1700))
    merged = StageConditions.of(a.merged(b))
    # min over processes; median of all five samples (the median of the two medians would be 1790)
    assert merged.sm_clock_mhz_min == 1500 and merged.sm_clock_mhz_median == 1700


def test_reason_bits_decode_to_causes_without_idle_or_a_clock_setting():
    assert decode_reasons(0x1 | 0x2) == ()
    assert decode_reasons(0x4 | 0x8 | 0x20 | 0x40 | 0x80) == ("sw_power_cap", "hw_slowdown", "sw_thermal",
                                                              "hw_thermal", "hw_power_brake")
    assert decode_reasons(0x1 | 0x800) == ("bit_0x800",)   # a bit newer than this table keeps its value


def test_a_reason_seen_in_one_sample_is_kept(monkeypatch):
    c = sample(monkeypatch, fake_nvml(reasons=(0x1, 0x4 | 0x1, 0x1)), every_s=0.005, until_clock_reads=4)
    assert c.throttle_reasons == ("sw_power_cap",)
    assert sample(monkeypatch, fake_nvml(reasons=(0x1, 0x2))).throttle_reasons == ()


def test_the_older_throttle_reasons_call_is_used_where_the_new_name_is_missing(monkeypatch):
    nvml = fake_nvml()
    del nvml.nvmlDeviceGetCurrentClocksEventReasons
    nvml.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: 0x40
    assert sample(monkeypatch, nvml).throttle_reasons == ("hw_thermal",)


def test_other_processes_leave_out_the_worker_and_this_runs_own(monkeypatch):
    """This test process plays the runner: a child of it is one of the run's idle workers, not another tenant;
    pid 1 and this process's parent are strangers."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])  # noqa: S603
    try:
        monkeypatch.setenv(RUN_PID_ENV, str(os.getpid()))
        pids = (os.getpid(), child.pid, 1, os.getppid())
        assert sample(monkeypatch, fake_nvml(procs=(pids,))).other_processes == 2
        assert sample(monkeypatch, fake_nvml(procs=((os.getpid(), child.pid),))).other_processes == 0
        # a stranger that came for a moment during the timed steps is counted
        c = sample(monkeypatch, fake_nvml(procs=((os.getpid(),), (os.getpid(), 1), (os.getpid(),))),
                   every_s=0.005, until_clock_reads=5)
        assert c.other_processes == 1
    finally:
        child.kill()
        child.wait()


def test_other_processes_are_unknown_when_nvml_names_pids_of_another_namespace(monkeypatch):
    foreign = (2**22 + 11, 2**22 + 12)   # above any pid of this namespace's pid_max default
    assert sample(monkeypatch, fake_nvml(procs=(foreign,))).other_processes is None
    assert sample(monkeypatch, fake_nvml(procs=(foreign[:1],))).other_processes == 0   # the one there is the worker
    assert sample(monkeypatch, fake_nvml(procs=((),))).other_processes is None


@pytest.mark.parametrize("app, reasons, expected", [
    ((1980, 1980), (0,), ClocksLocked.NO),
    ((1500, 1980), (0,), ClocksLocked.YES),           # application clocks set off their default
    ((1980, 1980), (0x2,), ClocksLocked.YES),         # the driver said a clock setting held the clocks
    ((None, 1980), (0,), ClocksLocked.UNKNOWN),       # the query is not supported: NVML cannot say
    ((1980, None), (0,), ClocksLocked.UNKNOWN),
])
def test_clocks_locked(monkeypatch, app, reasons, expected):
    assert sample(monkeypatch, fake_nvml(app=app, reasons=reasons)).clocks_locked == expected


def scripted_clocks(monkeypatch, wall, cpu):
    """The sampler's wall and process clocks, read at start then at stop."""
    import bench_core.machine.conditions as conditions
    fake = types.SimpleNamespace(perf_counter=iter(wall).__next__, process_time=iter(cpu).__next__)
    monkeypatch.setattr(conditions, "time", fake)


def test_without_pynvml_only_the_host_figures_are_there(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)   # import pynvml raises ImportError
    scripted_clocks(monkeypatch, wall=(100.0, 102.0), cpu=(5.0, 6.8))
    sampler = ConditionsSampler(0)
    sampler.start()
    c = sampler.stop()
    assert c.sm_clock_mhz == () and c.power_w == () and c.temp_c_max is None and c.throttle_reasons == ()
    assert c.other_processes is None and c.clocks_locked == ClocksLocked.UNKNOWN
    assert c.load_avg == max(os.getloadavg()[0], c.load_avg) and c.host_cores == os.cpu_count()
    assert c.cpu_share == pytest.approx(0.9)   # 1.8 s of the process's CPU time in 2 s of wall time


def test_the_cpu_share_counts_every_thread_of_the_worker(monkeypatch):
    """The launch loop's thread and the CUDA driver's are all the worker's: here the main thread only waits while
    another thread spends 0.1 s of CPU, and the share counts that thread's time."""
    monkeypatch.setitem(sys.modules, "pynvml", None)

    def spin():
        end = time.thread_time() + 0.1
        while time.thread_time() < end:
            pass
    t0 = time.perf_counter()
    sampler = ConditionsSampler(0)
    sampler.start()
    t = threading.Thread(target=spin)
    t.start()
    t.join()
    share = sampler.stop().cpu_share
    wall = time.perf_counter() - t0
    assert share >= 0.1 / wall


def test_a_cpu_measurement_has_no_conditions(tiny_cfg):
    import torch

    from bench_core.levers.stage import Stage
    from bench_core.run.processes import StageJob
    from bench_core.run.step import build_stage, measure
    built = build_stage(StageJob(tiny_cfg, Stage(), "cpu"), Stage(), torch)
    assert measure(built, lambda step: None, torch).conditions is None


# ---------------------------------------------------------------- the flags, at and around each bound
def test_host_busy_above_one_runnable_thread_per_core():
    assert not host_overloaded(16.0, 16) and host_overloaded(16.01, 16) and not host_overloaded(3.0, 16)
    assert not host_overloaded(None, 16) and not host_overloaded(20.0, None)


def test_worker_starved_below_the_noise_rules_share():
    assert not worker_starved(0.90) and worker_starved(0.899) and not worker_starved(1.03)
    assert not worker_starved(None)


def test_each_cause_with_its_figures():
    steady = StageConditions(sm_clock_mhz_min=1980, throttle_reasons=(), gpu_other_processes=0, host_load_avg=4.0,
                             host_cores=16, worker_cpu_share=0.99, clocks_locked="no")
    assert causes(steady) == ()
    throttled = replace(steady, sm_clock_mhz_min=1590, throttle_reasons=("sw_power_cap", "hw_slowdown"))
    assert [c.text for c in causes(throttled)] == ["throttled (sw_power_cap, hw_slowdown, SM clock down to 1,590 MHz)"]
    assert [c.text for c in causes(replace(steady, gpu_other_processes=1))] == ["shared (1 other process on the GPU)"]
    assert causes(replace(steady, gpu_other_processes=None)) == ()     # unknown is not a flag
    busy = replace(steady, host_load_avg=17.25, worker_cpu_share=0.75)
    assert [c.cause for c in causes(busy)] == [Cause.HOST_BUSY, Cause.HOST_BUSY]
    assert [c.text for c in causes(busy)] == ["host busy (load 17.2 on 16 cores)",
                                              "host busy (the worker had a CPU 75% of the time)"]


def with_conditions(conditions, index=3):
    run = gpu_run()
    return replace(run, stages=tuple(replace(s, conditions=conditions) if s.index == index else s
                                     for s in run.stages))


BUSY = Conditions(sm_clock_mhz=(1980, 1980, 1965), power_w=(420.0, 440.0, 430.0), temp_c_max=52.0,
                  other_processes=0, clocks_locked=ClocksLocked.NO, load_avg=17.0, host_cores=16, cpu_share=0.97)


def test_a_steady_stage_measured_on_a_busy_host_is_noisy_with_that_cause():
    steady = summarize(gpu_run()).stages[3]
    assert steady.noisy is False and steady.noise_reason is None
    s = summarize(with_conditions(BUSY)).stages[3]
    assert s.noisy is True and s.noise_reason == "host busy (load 17.0 on 16 cores)"
    notes = next(c for c in DISPLAY_COLUMNS if c.key == "reason")
    assert "noisy: host busy (load 17.0 on 16 cores)" in notes.cell(s)


def test_the_conditions_column_says_each_figure():
    s = summarize(with_conditions(replace(BUSY, throttle_reasons=("hw_thermal",)))).stages[3]
    column = next(c for c in DISPLAY_COLUMNS if c.key == "conditions")
    assert column.cell(s) == ("SM 1,965 MHz min (1,980 median) · throttled: hw_thermal · 430 W · 52 °C · "
                              "0 other GPU processes · load 17.0/16 cores · worker CPU 97% · clocks locked: no")


# ---------------------------------------------------------------- merged across processes
def test_the_fold_merges_each_process_conditions():
    run = gpu_run()
    fold = StageFold(replace(run.stages[0], conditions=None, rounds=(), times_ms=()), lambda r: None)
    first = Conditions(sm_clock_mhz=(1980,), throttle_reasons=("sw_power_cap",), other_processes=0,
                       clocks_locked=ClocksLocked.NO, load_avg=2.0, host_cores=16, cpu_share=0.99, temp_c_max=50.0)
    second = Conditions(sm_clock_mhz=(1700,), throttle_reasons=("hw_slowdown", "sw_power_cap"), other_processes=2,
                        clocks_locked=ClocksLocked.UNKNOWN, load_avg=5.0, host_cores=16, cpu_share=0.8,
                        temp_c_max=48.0)
    fold.apply(ev.Memory(conditions=first.to_dict()))
    fold.apply(ev.Memory(conditions=None))     # a process that could not sample keeps what the others said
    fold.apply(ev.decode(ev.Memory(conditions=second.to_dict()).encode()))
    c = fold.result.conditions
    assert c.sm_clock_mhz == (1980, 1700) and c.throttle_reasons == ("sw_power_cap", "hw_slowdown")
    assert c.other_processes == 2 and c.load_avg == 5.0 and c.cpu_share == 0.8 and c.temp_c_max == 50.0
    assert c.clocks_locked == ClocksLocked.UNKNOWN      # one process could not say: the stage cannot either
    assert first.merged(replace(second, clocks_locked=ClocksLocked.YES)).clocks_locked == ClocksLocked.YES


# ---------------------------------------------------------------- files and history
FIELDS = ("sm_clock_mhz_min", "sm_clock_mhz_median", "throttle_reasons", "power_w_median", "temp_c_max",
          "gpu_other_processes", "host_load_avg", "host_cores", "worker_cpu_share", "clocks_locked")
THROTTLED = replace(BUSY, throttle_reasons=("sw_power_cap", "hw_thermal"), other_processes=1, load_avg=3.5)


def test_csv_carries_each_figure_and_empty_where_not_measured():
    rows = list(csv.DictReader(io.StringIO(to_csv(with_conditions(THROTTLED)))))
    assert rows[3]["sm_clock_mhz_min"] == "1965" and rows[3]["throttle_reasons"] == "sw_power_cap;hw_thermal"
    assert rows[3]["gpu_other_processes"] == "1" and rows[3]["clocks_locked"] == "no"
    assert float(rows[3]["worker_cpu_share"]) == 0.97 and float(rows[3]["power_w_median"]) == 430.0
    assert rows[3]["noise_reason"] == ("throttled (sw_power_cap, hw_thermal, SM clock down to 1,965 MHz); "
                                       "shared (1 other process on the GPU)")
    assert all(rows[0][name] == "" for name in FIELDS)   # not sampled: empty, never 0


def test_csv_round_trip_keeps_the_figures_and_the_cause():
    run = with_conditions(THROTTLED)
    [back] = parse_csv(to_csv(run).encode())
    before, after = summarize(run).stages[3], summarize(back).stages[3]
    assert after.conditions == before.conditions and after.conditions.sm_clock_mhz_min == 1965
    assert after.noise_reason == before.noise_reason and after.noisy
    assert summarize(back).stages[0].conditions is None


def test_json_and_store_round_trip_keep_the_raw_samples(tmp_path):
    run = with_conditions(THROTTLED)
    [back] = parse_json(to_json(run).encode())
    assert back.stages[3].conditions == THROTTLED and back.stages[0].conditions is None
    store = Store(str(tmp_path / "runs.sqlite3"))
    store.save_run(run)
    loaded = store.load_run(run.run_id)
    assert loaded.stages[3].conditions == THROTTLED
    assert summarize(loaded).stages[3].noise_reason == summarize(run).stages[3].noise_reason
    assert StageResult.from_dict(run.stages[3].to_dict()).conditions == THROTTLED


def test_an_older_csv_without_these_columns_imports_with_them_empty():
    text = to_csv(with_conditions(THROTTLED))
    header, *lines = [row for row in csv.reader(io.StringIO(text))]
    keep = [i for i, name in enumerate(header) if name not in FIELDS]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([[row[i] for i in keep] for row in [header, *lines]])
    [older] = parse_csv(buf.getvalue().encode())
    s = summarize(older).stages[3]
    assert s.conditions is None
    assert s.noise_reason.startswith("throttled")   # the file's own label stays as it was written


def test_a_json_run_without_conditions_imports():
    doc = to_json(gpu_run()).replace('"conditions": null', '"surplus": null')
    assert all(s.conditions is None for s in parse_json(doc.encode())[0].stages)


def test_a_csv_with_an_unknown_clocks_locked_is_rejected():
    text = to_csv(with_conditions(THROTTLED))
    rows = list(csv.reader(io.StringIO(text)))
    rows[4][rows[0].index("clocks_locked")] = "maybe"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    with pytest.raises(ImportRejected, match="row 5, column clocks_locked: 'maybe' is not one of"):
        parse_csv(buf.getvalue().encode())


def test_a_json_with_malformed_conditions_is_rejected():
    doc = to_json(with_conditions(THROTTLED))
    bad = doc.replace('"conditions": {', '"conditions": "hot", "was": {', 1)
    with pytest.raises(ImportRejected, match="malformed run"):
        parse_json(bad.encode())
