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


def pytest_collection_modifyitems(config, items):
    for item in items:
        # a browser test starts a real server and Chromium: never quick
        if "browser" in item.keywords:
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
