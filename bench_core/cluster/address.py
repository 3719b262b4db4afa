"""Where runs go: the cluster's address (BENCH_RAY_ADDRESS, or --cluster), checked before Ray is asked, and the
executor for it. Above both executors, so the interface module never imports the Ray one."""
from __future__ import annotations

import os
import socket

from bench_core.cluster.executor import Executor, LocalExecutor
from bench_core.config.bench_config import ConfigError

ADDRESS_ENV = "BENCH_RAY_ADDRESS"


def cluster_address(env: dict | None = None) -> str | None:
    """BENCH_RAY_ADDRESS, or None: no cluster, everything runs here."""
    address = (os.environ if env is None else env).get(ADDRESS_ENV, "").strip()
    return address or None


def check_address(address: str, field: str, timeout_s: float = 5.0) -> str:
    """`HOST:PORT` or `ray://HOST:PORT` that accepts a connection; else ConfigError naming `field`. Checked before
    Ray connects, since `ray.init` waits minutes on an address where nothing answers."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if "://" in host or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(field, address, "must be HOST:PORT (a head's GCS, e.g. 10.0.0.1:6379) or "
                          "ray://HOST:PORT (Ray Client, e.g. ray://10.0.0.1:10001), the port 1-65535")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConfigError(field, address, f"no Ray cluster answers there ({exc.strerror or exc}); start one "
                          "with `ray start --head` (docs/CLUSTER.md)") from None
    return address


def executor_for(address: str | None) -> Executor:
    """Local without an address; Ray (imported only then) with one."""
    if address is None:
        return LocalExecutor()
    from bench_core.cluster.ray_executor import RayExecutor
    return RayExecutor(address)
