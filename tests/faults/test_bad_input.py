"""At least 20 kinds of bad configuration: each gets a message naming the field and limit, and nothing runs."""
from dataclasses import replace

import pytest

from bench_core.config.bench_config import ConfigError
from bench_core.config.settings import Limits
from bench_core.levers.stage import Stage
from bench_core.machine.probe import Probe
from bench_core.service.jobs import JobManager, LimitExceeded, NotAllowed
from helpers import CFG, PROBE_DATA, FakeRunner

LIMITS = Limits(max_params=50_000_000, max_tokens_per_step=4096, max_stages_per_job=4)

BAD_CONFIGS = [
    ({"depth": 0}, "depth=0: must be a positive integer"),
    ({"width": -64}, "width=-64: must be a positive integer"),
    ({"heads": 0}, "heads=0: must be a positive integer"),
    ({"seq_len": 0}, "seq_len=0: must be a positive integer"),
    ({"batch_size": -1}, "batch_size=-1: must be a positive integer"),
    ({"vocab_size": 0}, "vocab_size=0: must be a positive integer"),
    ({"iters": 0}, "iters=0: must be a positive integer"),
    ({"warmup": -5}, "warmup=-5: must be a positive integer"),
    ({"seed": -1}, "seed=-1: must be >= 0"),
    ({"repeats": 0}, "repeats=0: must be a positive integer"),
    ({"repeats": 6}, "repeats=6: exceeds the limit of 5"),
    ({"depth": 2.5}, "depth=2.5: must be an integer"),
    ({"width": "768"}, "width='768': must be an integer"),
    ({"batch_size": True}, "batch_size=True: must be an integer"),
    ({"iters": None}, "iters=None: must be an integer"),
    ({"width": 100, "heads": 3}, "width=100: must be divisible by heads (3)"),
    ({"width": 8, "heads": 16}, "heads=16: must not exceed width (8)"),
    ({"seq_len": 10**6}, "seq_len=1000000: exceeds the limit of 8192"),
    ({"batch_size": 10**4}, "batch_size=10000: exceeds the limit of 256"),
    ({"vocab_size": 10**7}, "vocab_size=10000000: exceeds the limit of 262144"),
    ({"iters": 10**5}, "iters=100000: exceeds the limit of 2000"),
    ({"warmup": 10**4}, "warmup=10000: exceeds the limit of 200"),
    ({"depth": 10**3}, "depth=1000: exceeds the limit of 96"),
    ({"width": 10**5, "heads": 8}, "width=100000: exceeds the limit of 12288"),
    ({"heads": 512, "width": 1024}, "heads=512: exceeds the limit of 128"),
    ({"seq_len": 128, "batch_size": 64}, "seq_len x batch_size = 8192 exceeds the limit of 4096"),
    ({"depth": 48, "width": 1024, "heads": 16}, "parameters, above the limit of 0.05B"),
    ({"device": "cuda"}, "device='cuda': no CUDA device is available"),
    ({"device": "tpu"}, "device='tpu': must be one of auto, cuda, cpu"),
    ({"depth": 24, "width": 1024, "heads": 16, "seq_len": 1024, "batch_size": 4, "vocab_size": 50304},
     "exceeds the 0.5 GiB free on cpu"),
]


@pytest.fixture
def manager(tmp_path):
    from bench_core.results.store import Store
    runner = FakeRunner()
    probe = Probe.from_dict({**PROBE_DATA, "cpu": {"available_bytes": 2**29}})
    m = JobManager(Store(str(tmp_path / "db.sqlite3")), LIMITS, probe=probe, runner=runner)
    m.runner = runner
    yield m
    m.shutdown()


@pytest.mark.parametrize("changes,message", BAD_CONFIGS, ids=[m[:40] for _, m in BAD_CONFIGS])
def test_bad_config_is_refused_and_nothing_is_launched(manager, changes, message):
    limits = LIMITS if "0.5 GiB" not in message else replace(LIMITS, max_params=10**12, max_tokens_per_step=10**6)
    manager.limits = limits
    with pytest.raises(ConfigError) as info:
        manager.submit(replace(CFG, **changes), [Stage()], "custom", "s")
    assert message in str(info.value), str(info.value)
    assert manager.jobs() == [] and manager.runner.calls == [] and manager.store.list_runs() == []


@pytest.mark.parametrize("stages,message", [
    ([], "pick at least one stage"),
    ([Stage()] * 5, "5 stages exceed the limit of 4 stages per job"),
])
def test_bad_stage_lists_are_refused(manager, stages, message):
    with pytest.raises(LimitExceeded, match=message):
        manager.submit(CFG, stages, "custom", "s")
    assert manager.jobs() == []


def test_unknown_levers_are_refused_before_anything_runs():
    for kind, name in (("optimizer", "sgd"), ("norm", "groupnorm"), ("precision", "fp8"), ("compile", "jit"),
                       ("head", "softmax")):
        with pytest.raises(ConfigError, match=f"unknown {kind} lever"):
            Stage(**{kind: name})


def test_a_norm_of_the_other_family_is_refused_before_anything_runs(manager):
    with pytest.raises(ConfigError, match="rmsnorm is an RMS norm, valid only for the llama family"):
        manager.submit(CFG, [Stage("adam", "rmsnorm")], "custom", "s")
    assert manager.jobs() == []


def test_viewer_is_refused_at_the_api(manager):
    with pytest.raises(NotAllowed):
        manager.submit(CFG, [Stage()], "custom", "s", role="viewer")
    assert manager.jobs() == []
