"""What each lever changed in a stage's model (the surgery's report), typed and torch-free: modules swapped (count
and class), layers converted (n of m, with why the rest could not be), entry points applied, or why the lever is
unavailable for this model. The worker writes it once; records, proof and views read it."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Swap:
    """`count` modules of class `source` now run `target` (a new module, or the target's forward bound to them)."""
    source: str
    target: str
    count: int

    @property
    def text(self) -> str:
        return f"{self.count} {self.source} → {self.target}" if self.source != self.target else \
            f"{self.count} {self.target}"


@dataclass(frozen=True)
class LeverChange:
    lever: str                                     # the lever's name in the registry
    swaps: tuple[Swap, ...] = ()
    converted: int | None = None                   # layers converted (float8); None: not a conversion
    candidates: int | None = None                  # out of this many layers (the LM head, kept by design, not counted)
    not_converted: Mapping[str, int] = field(default_factory=dict)   # why a layer was not converted -> how many
    entry_points: tuple[str, ...] = ()             # the library functions applied (Liger's apply_liger_kernel_to_*)
    unavailable: str | None = None                 # why this lever cannot act on this model: the stage does not run
    note: str = ""                                 # a fact the verdict should know (what was checked, what stayed)
    built_in: bool = False                         # a built-in family's part, built with the stage's parts: no surgery

    @property
    def changed(self) -> bool:
        return self.unavailable is None and (any(s.count for s in self.swaps) or bool(self.converted))

    @property
    def text(self) -> str:
        if self.unavailable:
            return f"{self.lever}: unavailable: {self.unavailable}"
        parts = [s.text for s in self.swaps if s.count]
        if self.converted is not None:
            why = ", ".join(f"{n} {reason}" for reason, n in sorted(self.not_converted.items()))
            parts.append(f"{self.converted} of {self.candidates} layers converted" + (f" (not: {why})" if why else ""))
        parts += [f"via {e}" for e in self.entry_points]
        parts += [self.note] if self.note else []
        parts += ["built in"] if self.built_in else []
        return f"{self.lever}: " + ("; ".join(parts) if parts else "changed nothing")

    def to_dict(self) -> dict[str, Any]:
        return {"lever": self.lever, "swaps": [[s.source, s.target, s.count] for s in self.swaps],
                "converted": self.converted, "candidates": self.candidates,
                "not_converted": dict(self.not_converted), "entry_points": list(self.entry_points),
                "unavailable": self.unavailable, "note": self.note, "built_in": self.built_in}

    @classmethod
    def from_dict(cls, data: Any) -> LeverChange:
        if not isinstance(data, dict) or not isinstance(data.get("lever"), str):
            raise ValueError(f"model change: {data!r} is not an object with a lever name")
        swaps = data.get("swaps") or []
        if not all(isinstance(s, list) and len(s) == 3 and isinstance(s[2], int) for s in swaps):
            raise ValueError(f"model change of {data['lever']}, field swaps: {swaps!r} is not [source, target, count]s")
        return cls(lever=data["lever"], swaps=tuple(Swap(str(a), str(b), int(n)) for a, b, n in swaps),
                   converted=data.get("converted"), candidates=data.get("candidates"),
                   not_converted={str(k): int(v) for k, v in (data.get("not_converted") or {}).items()},
                   entry_points=tuple(str(e) for e in data.get("entry_points") or ()),
                   unavailable=data.get("unavailable"), note=str(data.get("note") or ""),
                   built_in=bool(data.get("built_in")))


@dataclass(frozen=True)
class SurgeryReport:
    """One entry per lever that acts on the model (a part built in, a module swapped, layers converted)."""
    changes: tuple[LeverChange, ...] = ()

    def of(self, lever: str) -> LeverChange | None:
        return next((c for c in self.changes if c.lever == lever), None)

    @property
    def unavailable(self) -> str | None:
        """The first lever's reason it cannot act on this model: the stage is unavailable, with it."""
        return next((c.unavailable for c in self.changes if c.unavailable), None)

    @property
    def text(self) -> str:
        return " | ".join(c.text for c in self.changes)

    @property
    def by_surgery(self) -> bool:
        """Some lever acted on the model by surgery (or could not): not only a built-in family's parts."""
        return any(not c.built_in for c in self.changes)

    def to_dict(self) -> dict[str, Any]:
        return {"changes": [c.to_dict() for c in self.changes]}

    @classmethod
    def from_dict(cls, data: Any) -> SurgeryReport:
        if not isinstance(data, dict):
            raise ValueError(f"model changes: {data!r} is not an object")
        return cls(tuple(LeverChange.from_dict(c) for c in data.get("changes") or ()))
