"""Test-only fault hooks, read from the environment by the worker. Nothing sets these outside the tests.

BENCH_TEST_FAULT=abort|segfault|hang|exit3|oom|build[@stage_key] and BENCH_TEST_RLIMIT_AS_MIB=N[@stage_key].
"""
from __future__ import annotations

import os
import resource
import signal
import sys
import time


def _targets(spec: str, stage_key: str) -> str | None:
    """'value@stage_key' applies to that stage only; a bare 'value' to every stage."""
    value, _, target = spec.partition("@")
    return value if not target or target == stage_key else None


def fault_for(stage_key: str) -> str | None:
    return _targets(os.environ.get("BENCH_TEST_FAULT", ""), stage_key)


def apply_test_fault(stage_key: str) -> None:
    cap = _targets(os.environ.get("BENCH_TEST_RLIMIT_AS_MIB", ""), stage_key)
    if cap:
        limit = int(cap) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    kind = fault_for(stage_key)
    if kind == "abort":
        os.abort()
    if kind == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "hang":
        time.sleep(3600)
    if kind == "exit3":
        sys.exit(3)
    if kind == "oom":
        # A real allocator failure: cap the address space just above what is mapped now, then ask for 4 GiB.
        with open("/proc/self/statm") as fh:
            mapped = int(fh.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (mapped + 256 * 2**20, resource.RLIM_INFINITY))
        import torch
        torch.empty(2**30, dtype=torch.float32)


def broken_build(stage_key: str) -> bool:
    """BENCH_TEST_FAULT=build: the worker's own lever build raises, as a broken extension's import would."""
    return fault_for(stage_key) == "build"
