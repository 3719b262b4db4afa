"""Whether the two sides of a sweep's comparison run the same code on this device, read from the lever registry:
a sweep between them maps only noise. On a CPU adam and adam-loop both ran torch's for-loop Adam (foreach kernels
are CUDA's), the page offered that comparison first and said nothing, and two such sweeps disagreed.

The rule is the registry's (levers.same_code). Torch-free: the Sweep page asks before a sweep starts (and offers
first a lever that differs here); the command line says it before it starts.
"""
from __future__ import annotations

from collections.abc import Sequence

from bench_core.levers.registry import Lever
from bench_core.levers.same_code import proofs_here, same_here  # noqa: F401 (same_here: this module's rule)
from bench_core.sweep.spec import Comparison


def _what_runs(a: Lever, b: Lever, device: str) -> str:
    """What both run here: the lever whose every proof holds on this device is itself here (adam-loop)."""
    plain = [lv for lv in (a, b) if proofs_here(lv, device) == frozenset(p.kernel.key for p in lv.expects)]
    return plain[0].title if len(plain) == 1 else "code"


def _apart_elsewhere(levers: Sequence[Lever], device: str) -> tuple[str, str]:
    """The kernels that tell the levers apart on other devices, as code, and those devices: ("`aten::_foreach_*`",
    "CUDA")."""
    elsewhere = [p for lv in levers for p in lv.expects if p.on not in (None, device)]
    return (", ".join(dict.fromkeys(f"`{p.kernel.label}`" for p in elsewhere)),
            " and ".join(dict.fromkeys(str(p.on).upper() for p in elsewhere)))


def same_code_warning(comparison: Comparison, device: str) -> str | None:
    """A sentence for the page (Markdown) where every lever B changes from A is one that runs the same here; else
    None."""
    pairs = [(la, lb) for la, lb in zip(comparison.a.levers, comparison.b.levers, strict=True) if la != lb]
    if not pairs or not all(same_here(la, lb, device) for la, lb in pairs):
        return None
    said = "; ".join(f"`{la.name}` and `{lb.name}` run the same {_what_runs(la, lb, device)}" for la, lb in pairs)
    kernels, where = _apart_elsewhere([lv for pair in pairs for lv in pair], device)
    return (f"On {device.upper()}, {said}: the kernels that tell them apart ({kernels}) run on {where} only. "
            "A sweep of this comparison would map only noise; pick one whose stages differ on this device.")
