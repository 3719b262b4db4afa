"""Whether two levers run the same code on a device, read from the registry: on a CPU adam and adam-loop both run
torch's for-loop Adam (foreach kernels are CUDA's). A sweep between such levers maps only noise (sweep.views.words),
and the components view measures them once (components.bench)."""
from __future__ import annotations

from bench_core.levers.lever_types import Lever


def proofs_here(lever: Lever, device: str) -> frozenset[str]:
    """The key kernels the lever must show on `device`."""
    return frozenset(p.kernel.key for p in lever.expects if p.on in (None, device))


def _class(lever: Lever) -> str | None:
    return getattr(lever, "expected_class", None)   # optimizers and model parts name the class they build


def same_here(a: Lever, b: Lever, device: str) -> bool:
    """Two levers of one kind that build the same class from the same source and whose proofs (the kernels each
    must show) differ only on another device: the registry tells them apart there, and nothing does here."""
    return (a.name != b.name and a.kind == b.kind and a.vendor == b.vendor and _class(a) is not None
            and _class(a) == _class(b) and a.betrayed_by == b.betrayed_by
            and proofs_here(a, device) == proofs_here(b, device))
