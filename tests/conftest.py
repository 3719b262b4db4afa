import os
from pathlib import Path

import pytest

# The engine warms each stage up for at least 0.25 s by default (bench_core/config/bench_config.py says why). A tiny
# CPU model has nothing to settle: 0.2 s keeps the suite's real stages short. Set before bench_core.config.bench_config
# is imported (here and in every worker process, which inherits the environment).
os.environ.setdefault("BENCH_WARMUP_MIN_S", "0.2")

# tests/helpers.py (imported as `helpers`, see its docstring): show its failed asserts as pytest does in tests.
pytest.register_assert_rewrite("helpers")


@pytest.fixture(scope="session")
def root() -> Path:
    """The repository root, for files used by path (app.py). bench_core itself is imported as installed."""
    return Path(__file__).resolve().parents[1]


def _cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


# Slow tests (pytest.ini) in the sweep's test files, which are being split with bench_core/sweep/: marked here by
# name until they carry @pytest.mark.slow themselves, then this set goes.
SLOW_SWEEP_TESTS = {"test_the_timing_process_times_each_stage_in_its_familys_form",
                    "test_a_compiled_stages_parts_are_timed_compiled",
                    "test_a_step_compiled_ahead_is_read_from_the_cache_when_it_is_timed",
                    "test_a_step_that_fails_ahead_is_named_and_left_to_the_timing",
                    "test_a_real_tiny_sweep_on_cpu_end_to_end_and_its_import"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        # a browser test starts a real server and Chromium: never quick
        if "browser" in item.keywords or getattr(item, "originalname", item.name) in SLOW_SWEEP_TESTS:
            item.add_marker(pytest.mark.slow)
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cpu_probe():
    from bench_core.levers.registry import KERNEL_PACKAGES
    from bench_core.machine.probe import run_probe
    return run_probe(packages=KERNEL_PACKAGES)


@pytest.fixture
def tiny_cfg():
    from bench_core.config.bench_config import BenchConfig
    return BenchConfig(depth=2, width=64, heads=4, seq_len=32, batch_size=2, vocab_size=256,
                       warmup=1, iters=4, device="cpu")
