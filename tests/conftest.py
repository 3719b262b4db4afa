import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cpu_probe():
    from bench_core.probe import run_probe
    return run_probe()


@pytest.fixture
def tiny_cfg():
    from bench_core.config import BenchConfig
    return BenchConfig(depth=2, width=64, heads=4, seq_len=32, batch_size=2, vocab_size=256,
                       warmup=1, iters=4, device="cpu")
