"""The timed loop stops by the adaptive rule: a steady process at its floor, a noisy one at its ceiling; on CUDA the
rule is read one step behind the queue, so the GPU always has a step to run. Fake clocks and fake CUDA events."""
from types import SimpleNamespace

import pytest

from bench_core.config.bench_config import STOP_CHECK_EVERY, BenchConfig
from bench_core.run import step


class FakeDDP:
    enabled = False

    def barrier(self):
        pass

    def gather(self, value):
        return [value]

    def all_agree(self, flag):
        return bool(flag)


class Clock:
    """perf_counter for the loop: each step advances it by the next of `step_ms`, cycled."""

    def __init__(self, step_ms):
        self.now, self.step_ms, self.steps = 0.0, step_ms, 0

    def perf_counter(self):
        return self.now

    def step(self):
        self.now += self.step_ms[self.steps % len(self.step_ms)] / 1e3
        self.steps += 1
        return SimpleNamespace(item=lambda: 1.0)


def _cpu_steps(monkeypatch, iters, step_ms):
    clock = Clock(step_ms)
    monkeypatch.setattr(step, "time", SimpleNamespace(perf_counter=clock.perf_counter))
    built = SimpleNamespace(cfg=BenchConfig(iters=iters, device="cpu"), cuda=False, scaler=None, ddp=FakeDDP(),
                            step=clock.step)
    times = []
    step.measure(built, lambda s: times.append(s.ms), None)
    return times


def test_a_steady_cpu_process_stops_at_its_floor(monkeypatch):
    times = _cpu_steps(monkeypatch, 30, [10.0])
    assert len(times) == BenchConfig(iters=30).min_iters == 6 and times == pytest.approx([10.0] * 6)


def test_a_noisy_cpu_process_runs_to_its_ceiling(monkeypatch):
    assert len(_cpu_steps(monkeypatch, 30, [5.0, 15.0])) == 30


def test_a_ceiling_below_the_floor_times_every_step(monkeypatch):
    assert len(_cpu_steps(monkeypatch, 4, [10.0])) == 4


def test_the_rule_is_asked_at_the_floor_then_every_check_only(monkeypatch):
    """Six 5 ms and six 15 ms steps, then steady 10 ms ones; floor 6. The median's interval (ranks
    n/2 -+ 0.98 sqrt(n)) first lies on 10 ms steps only at 24 steps, but the rule is asked at 6, 11, 16, 21, 26...:
    it stops at 26."""
    floor = BenchConfig(iters=60).min_iters
    assert floor == 6 and STOP_CHECK_EVERY == 5
    assert len(_cpu_steps(monkeypatch, 60, [5.0, 15.0] * 6 + [10.0] * 100)) == 26


class FakeCuda:
    """CUDA events on a fake GPU clock: a step's kernels take `step_ms`; records `synchronize` calls."""

    def __init__(self, step_ms):
        self.gpu_ms, self.step_ms, self.n = 0.0, step_ms, 0
        self.recorded: list = []
        self.synced: list = []
        self.cuda = SimpleNamespace(Event=self.event)
        self.float32 = "float32"

    def event(self, enable_timing=True):
        fake = self

        class Event:
            t = None

            def record(self):
                fake.recorded.append(self)
                self.t = fake.gpu_ms

            def query(self):
                return False   # never done unless waited for: the loop must wait itself to read the times

            def synchronize(self):  # (which step's end, how many ends were recorded by then)
                ends = fake.recorded[1::2]
                fake.synced.append((ends.index(self), len(ends)))

            def elapsed_time(self, end):
                return end.t - self.t
        return Event()

    def empty(self, n, dtype=None, pin_memory=False):
        return [SimpleNamespace(copy_=lambda *a, **k: None) for _ in range(n)]

    def step(self):
        self.gpu_ms += self.step_ms[self.n % len(self.step_ms)]
        self.n += 1
        return SimpleNamespace(detach=lambda: SimpleNamespace(float=lambda: 1.0))


def _cuda_steps(monkeypatch, iters, step_ms):
    fake = FakeCuda(step_ms)
    monkeypatch.setattr(step, "float", lambda x: 1.0, raising=False)
    built = SimpleNamespace(cfg=BenchConfig(iters=iters), scaler=None, ddp=FakeDDP(), step=fake.step)
    times = []
    steps: list = []
    timed = step._time_cuda(built, iters, lambda s: (steps.append(s), times.append(s.ms)), steps, fake, None)
    return fake, times, timed


def test_a_steady_cuda_process_stops_one_step_after_the_check_and_reads_the_rule_one_step_behind(monkeypatch):
    fake, times, timed = _cuda_steps(monkeypatch, 30, [10.0])
    floor = BenchConfig(iters=30).min_iters
    assert timed == len(times) == floor + 1     # the step queued while the rule was read is timed and kept
    assert set(times) == {10.0}
    # at the check the host waits for steps up to floor-1 while step `floor` is already queued behind them
    at_check = [(step_index, recorded) for step_index, recorded in fake.synced if step_index < floor]
    assert at_check == [(n, floor + 1) for n in range(floor)]


def test_a_noisy_cuda_process_runs_to_its_ceiling(monkeypatch):
    _, times, timed = _cuda_steps(monkeypatch, 30, [5.0, 15.0])
    assert timed == len(times) == 30


@pytest.mark.parametrize("iters", [4, 6])
def test_cuda_below_the_floor_times_every_step(monkeypatch, iters):
    assert _cuda_steps(monkeypatch, iters, [10.0])[2] == iters
