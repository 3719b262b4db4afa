"""A third-party kernel library, as the probe imports it and the machine fingerprint hashes it.

Which libraries there are is the lever registry's to say (each vendor names its package); the probe's callers pass
them in, so nothing below the levers keeps a list of its own.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass

PACKAGES_ENV = "BENCH_PROBE_PACKAGES"  # how the probe's fresh process learns which packages to import


@dataclass(frozen=True)
class KernelPackage:
    name: str                        # the import name the probe reports it under (liger_kernel, torchao, ...)
    title: str
    distributions: tuple[str, ...]   # the names pip may have installed it under
    module: str                      # what its lever imports: the probe imports exactly this


def encode(packages: Iterable[KernelPackage]) -> str:
    return json.dumps([asdict(p) for p in packages])


def decode(text: str | None) -> tuple[KernelPackage, ...]:
    return tuple(KernelPackage(p["name"], p["title"], tuple(p["distributions"]), p["module"])
                 for p in json.loads(text or "[]"))
