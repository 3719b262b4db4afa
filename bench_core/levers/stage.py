"""A stage: one lever of each kind, checked against the registry, with what follows from its levers."""
from __future__ import annotations

from dataclasses import dataclass, field

from bench_core.levers.registry import (
    BASELINE_LEVERS,
    KINDS,
    LEVERS,
    VENDOR_TITLES,
    CompileLever,
    HeadLever,
    Lever,
    NormLever,
    OptimizerLever,
    PrecisionLever,
    names_of,
)
from bench_core.machine.probe import Probe


@dataclass(frozen=True)
class Stage:
    optimizer: str = "adam"
    norm: str = "layernorm"
    precision: str = "fp32"
    compile: str = "eager"
    gpus: str = "1"
    head: str = "ce"
    levers: tuple[Lever, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from bench_core.config.bench_config import ConfigError
        object.__setattr__(self, "gpus", str(self.gpus))
        chosen = []
        for kind in KINDS:
            name = getattr(self, kind)
            lever = LEVERS.get(name)
            if lever is None or lever.kind != kind:
                raise ConfigError(kind, name, f"unknown {kind} lever; choose one of {', '.join(names_of(kind))}")
            chosen.append(lever)
        object.__setattr__(self, "levers", tuple(chosen))

    def lever(self, kind: str) -> Lever:
        return self.levers[KINDS.index(kind)]

    @property
    def optimizer_lever(self) -> OptimizerLever:
        return self.lever("optimizer")  # type: ignore[return-value]

    @property
    def norm_lever(self) -> NormLever:
        return self.lever("norm")  # type: ignore[return-value]

    @property
    def precision_lever(self) -> PrecisionLever:
        return self.lever("precision")  # type: ignore[return-value]

    @property
    def compile_lever(self) -> CompileLever:
        return self.lever("compile")  # type: ignore[return-value]

    @property
    def head_lever(self) -> HeadLever:
        return self.lever("head")  # type: ignore[return-value]

    def family_error(self, family: str) -> str | None:
        """Why this stage cannot train a `family` model (its norm serves the other family), or None."""
        norm = self.norm_lever
        if norm.family == family:
            return None
        kind = "an RMS norm" if norm.family == "llama" else "a LayerNorm"
        return f"{norm.name} is {kind}, valid only for the {norm.family} family; for {family} use {norm.twin}"

    def native_twin(self) -> Stage | None:
        """The same stage with each vendor lever (Apex, Liger, torchao, TE) swapped for the PyTorch lever it
        replaces; None when it uses no such lever."""
        swaps = {lever.kind: lever.native for lever in self.levers if lever.native}
        return Stage(**{**self.as_dict(), **swaps}) if swaps else None

    @property
    def vendors(self) -> str:
        """The libraries whose levers this stage uses, for a sentence ("Apex", "Liger-Kernel + torchao")."""
        names = dict.fromkeys(lever.vendor for lever in self.levers if lever.vendor)
        return " + ".join(VENDOR_TITLES[v] for v in names if v)

    def for_family(self, family: str) -> Stage:
        """The same stage with its norm swapped for its twin when the norm serves the other family."""
        from dataclasses import replace
        return self if self.norm_lever.family == family else replace(self, norm=self.norm_lever.twin)

    @property
    def world_size(self) -> int:
        return int(self.gpus)

    @property
    def key(self) -> str:
        parts = [self.optimizer, self.norm, self.precision]
        parts += [self.compile] if self.compile != "eager" else []
        parts += [self.head] if self.head != "ce" else []
        return "+".join(parts + ([f"gpus{self.gpus}"] if self.gpus != "1" else []))

    @classmethod
    def from_key(cls, key: str) -> Stage:
        """The stage a key names (as `key`, the CSV and the dashboard write it): '+'-separated lever names in any
        order, `gpusN` for the GPU count; a kind left out takes its baseline lever."""
        from bench_core.config.bench_config import ConfigError
        chosen: dict[str, str] = {}
        for part in (p.strip() for p in key.split("+")):
            name = part[len("gpus"):] if part.startswith("gpus") else part
            lever = LEVERS.get(name)
            if not part or lever is None or (lever.kind == "gpus") != part.startswith("gpus"):
                raise ConfigError("stages", key, f"{part!r} is no lever; choose per kind: " + "; ".join(
                    f"{kind} {', '.join(_key_names(kind))}" for kind in KINDS))
            if lever.kind in chosen:
                raise ConfigError("stages", key, f"two {lever.kind} levers ({chosen[lever.kind]}, {name}); "
                                  f"a stage takes one of each kind")
            chosen[lever.kind] = name
        return cls(**chosen)

    @property
    def label(self) -> str:
        return " · ".join(lever.title for lever in self.levers if lever.name not in ("eager", "1", "ce"))

    def as_dict(self) -> dict[str, str]:
        return {kind: getattr(self, kind) for kind in KINDS}

    def unavailable_reason(self, probe: Probe, device: str) -> str | None:
        for lever in self.levers:
            reason = lever.requires(probe, device, self)
            if reason:
                return reason
        return None

    def snippet(self) -> str:
        changed = [lever for lever in self.levers if BASELINE_LEVERS[lever.kind] != lever.name]
        if not changed:
            return "# baseline: a plain PyTorch loop\n" + LEVERS["adam"].snippet + LEVERS["fp32"].snippet
        return f"# {self.label}: the change to a plain PyTorch loop\n" + "".join(lv.snippet for lv in changed)


def _key_names(kind: str) -> list[str]:
    """A kind's lever names as a key writes them (the GPU count as gpusN)."""
    return [f"gpus{n}" if kind == "gpus" else n for n in names_of(kind)]
