"""The environment every child process gets (worker, torchrun, probe): the parent's, never the operator token."""
from __future__ import annotations

import os

TOKEN_ENV = "BENCH_OPERATOR_TOKEN"  # noqa: S105 (the variable's name, not a secret)
SECRET_ENV = (TOKEN_ENV,)
# NVLink multicast stays off on shared hosts: a program using it can take the host's GPUs down for others.
DISTRIBUTED_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def child_env(env: dict | None = None, **extra: str) -> dict[str, str]:
    """The environment of any child: the parent's (or `env`), minus secrets, plus `extra`."""
    base = dict(os.environ if env is None else env)
    for name in SECRET_ENV:
        base.pop(name, None)
    return {**base, **extra}
