"""Third-party kernel libraries the levers use: what the probe imports, and what the machine fingerprint hashes."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KernelPackage:
    title: str
    distributions: tuple[str, ...]   # the names pip may have installed it under
    module: str                      # what its lever imports: the probe imports exactly this


# Third-party kernel libraries the levers use, by import name: the probe, the status board and the machine
# fingerprint all read this one table.
KERNEL_PACKAGES = {
    "liger_kernel": KernelPackage("Liger-Kernel", ("liger-kernel",), "liger_kernel.transformers"),
    "torchao": KernelPackage("torchao (float8)", ("torchao",), "torchao.float8"),
    "transformer_engine": KernelPackage("Transformer Engine (optional)",
                                        ("transformer-engine", "transformer_engine", "transformer-engine-torch"),
                                        "transformer_engine.pytorch"),
}
