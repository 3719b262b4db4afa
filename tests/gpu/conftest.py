"""What the GPU tests share: one probe of the kernel packages for the session (a lever the probe says is unavailable
skips itself with the probe's reason, `runnable`)."""
import pytest

from bench_core.levers.registry import KERNEL_PACKAGES
from bench_core.levers.stage import Stage
from bench_core.machine.probe import run_probe


@pytest.fixture(scope="session")
def probe():
    return run_probe(packages=KERNEL_PACKAGES)


@pytest.fixture
def runnable(probe):
    def check(stage: Stage) -> Stage:
        reason = stage.unavailable_reason(probe, "cuda")
        if reason:
            pytest.skip(f"{stage.key}: {reason}")
        return stage
    return check
