"""The environment every child process gets (worker, torchrun, probe): the parent's, never the operator token."""
from __future__ import annotations

import os
import signal

TOKEN_ENV = "BENCH_OPERATOR_TOKEN"  # noqa: S105 (the variable's name, not a secret)
SECRET_ENV = (TOKEN_ENV,)
# NVLink multicast stays off on shared hosts: a program using it can take the host's GPUs down for others.
DISTRIBUTED_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def die_with_parent() -> None:
    """If the server is killed (even kill -9), its child must not live on: a stage worker holding the GPU, or one
    a quiet window had stopped, which nothing would ever resume (SIGKILL ends a stopped process too)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def child_env(env: dict | None = None, **extra: str) -> dict[str, str]:
    """The environment of any child: the parent's (or `env`), minus secrets, plus `extra`."""
    base = dict(os.environ if env is None else env)
    for name in SECRET_ENV:
        base.pop(name, None)
    return {**base, **extra}
