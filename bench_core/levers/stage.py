"""A stage: one lever of each kind (the registry's KINDS), checked against the registry, with what follows from its
levers. Its kinds are data: `Stage("adam", "layernorm", "fp32")` fills kinds in the registry's order, keywords name
them, absent kinds take their baseline. Each kind has two typed names: `stage.precision` is the lever's name (a str,
as keys, CSVs and configs write it) and `stage.precision_lever` is the Lever itself; `name_of(kind)` and
`lever(kind)` read any kind by its registry name."""
from __future__ import annotations

import textwrap
from typing import Any, TypeVar

from bench_core.levers.lever_types import (
    CompileLever,
    GpusLever,
    HeadLever,
    Lever,
    MlpLever,
    NormLever,
    OptimizerLever,
    PartLever,
    PrecisionLever,
)
from bench_core.levers.registry import BASELINE_LEVERS, FORWARD, KIND_SPECS, KINDS, LEVERS, names_of, twin
from bench_core.machine.packages import KernelPackage
from bench_core.machine.probe import Probe
from bench_core.models.architecture import PART_NOUNS
from bench_core.models.families import FAMILIES
from bench_core.models.families import family as family_spec


def saved_names(data: Any) -> dict[str, str]:
    """Each kind's lever name from a saved row or record; a file written before a kind existed ran its baseline
    (the one place old files are defaulted)."""
    return {kind: str(data.get(kind) or BASELINE_LEVERS[kind]) for kind in KINDS}


_L = TypeVar("_L", bound=Lever)

_KEY_ORDER = [k for k in KIND_SPECS if not k.key_last] + [k for k in KIND_SPECS if k.key_last]


class Stage:
    __slots__ = ("_names", "levers")
    _names: dict[str, str]
    levers: tuple[Lever, ...]

    def __init__(self, *positional: str, **named: Any):
        from bench_core.config.bench_config import ConfigError
        if len(positional) > len(KINDS):
            raise TypeError(f"Stage takes at most {len(KINDS)} levers, one per kind ({', '.join(KINDS)})")
        given = dict(zip(KINDS, positional, strict=False))
        for kind, name in named.items():
            if kind not in KINDS:
                raise ConfigError("stage", kind, f"unknown lever kind; choose one of {', '.join(KINDS)}")
            if kind in given:
                raise TypeError(f"Stage got two levers for {kind}")
            given[kind] = name
        names = {kind: str(given.get(kind, BASELINE_LEVERS[kind])) for kind in KINDS}
        chosen = []
        for kind, name in names.items():
            lever = LEVERS.get(name)
            if lever is None or lever.kind != kind:
                raise ConfigError(kind, name, f"unknown {kind} lever; choose one of {', '.join(names_of(kind))}")
            chosen.append(lever)
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "levers", tuple(chosen))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Stage is immutable: use stage.replace(kind=lever)")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stage) and self._names == other._names

    def __hash__(self) -> int:
        return hash(tuple(self._names.values()))

    def __repr__(self) -> str:
        return "Stage(" + ", ".join(f"{k}={v!r}" for k, v in self._names.items()) + ")"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Stage, tuple(self._names.values()))

    def replace(self, **changes: Any) -> Stage:
        return Stage(**{**self._names, **changes})

    def name_of(self, kind: str) -> str:
        """A kind's lever name, for code that walks the registry's KINDS."""
        if kind not in self._names:
            raise KeyError(f"Stage has no lever kind {kind!r}; kinds are {', '.join(KINDS)}")
        return self._names[kind]

    def lever(self, kind: str) -> Lever:
        return self.levers[KINDS.index(kind)]

    # One str property per kind (the lever's name) and one typed Lever property; test_levers checks every kind in
    # KIND_SPECS has both, so a new kind cannot be read by a name that silently does not exist.
    @property
    def optimizer(self) -> str:
        return self._names["optimizer"]

    @property
    def norm(self) -> str:
        return self._names["norm"]

    @property
    def precision(self) -> str:
        return self._names["precision"]

    @property
    def compile(self) -> str:
        return self._names["compile"]

    @property
    def gpus(self) -> str:
        return self._names["gpus"]

    @property
    def head(self) -> str:
        return self._names["head"]

    @property
    def mlp(self) -> str:
        return self._names["mlp"]

    @property
    def optimizer_lever(self) -> OptimizerLever:
        return self._typed("optimizer", OptimizerLever)

    @property
    def norm_lever(self) -> NormLever:
        return self._typed("norm", NormLever)

    @property
    def precision_lever(self) -> PrecisionLever:
        return self._typed("precision", PrecisionLever)

    @property
    def compile_lever(self) -> CompileLever:
        return self._typed("compile", CompileLever)

    @property
    def estimated_as(self) -> str:
        """The precision whose rate the run estimate gives this stage: the precision lever's, or its eager rate
        where it has one and the stage does not compile (registry: torchao FP8's scaling casts)."""
        lever = self.precision_lever
        return lever.eager_rate if lever.eager_rate and not self.compile_lever.traces_model else lever.name

    @property
    def gpus_lever(self) -> GpusLever:
        return self._typed("gpus", GpusLever)

    @property
    def head_lever(self) -> HeadLever:
        return self._typed("head", HeadLever)

    @property
    def mlp_lever(self) -> MlpLever:
        return self._typed("mlp", MlpLever)

    def _typed(self, kind: str, cls: type[_L]) -> _L:
        lever = self.lever(kind)
        if not isinstance(lever, cls):  # the registry gives each kind one class (test_levers holds it)
            raise TypeError(f"{kind} lever {lever.name} is a {type(lever).__name__}, not {cls.__name__}")
        return lever

    @property
    def part_levers(self) -> tuple[PartLever, ...]:
        """The levers that are parts of the model (norm, MLP, loss head...), in kind order."""
        return tuple(lever for lever in self.levers if isinstance(lever, PartLever))

    def family_error(self, family: str) -> str | None:
        """Why this stage cannot train a `family` model (a part of the type another family takes), or None."""
        conflict = self.family_conflict(family)
        return conflict[1] if conflict else None

    def family_conflict(self, family: str) -> tuple[str, str] | None:
        """(the part's kind, why) for the first model part of a type `family` does not take, or None. A plain part
        (PyTorch's own, named in no key) is never refused: the family builds its own twin of it."""
        takes = family_spec(family).takes
        for lever in self.part_levers:
            wanted = takes.get(lever.kind)
            if lever.plain or lever.part_type is None or wanted is None or lever.part_type == wanted:
                continue
            other = twin(lever, wanted)
            instead = f"for {family} use {other.name}" if other else \
                f"{family} takes a {wanted} {lever.kind}, and {lever.vendor.title if lever.vendor else 'PyTorch'} " \
                f"has no {wanted} {lever.kind} lever here"
            owners = [f for f in FAMILIES if family_spec(f).takes.get(lever.kind) == lever.part_type]
            return lever.kind, (f"{lever.name} is {PART_NOUNS.get(lever.part_type, lever.part_type)}, valid only "
                                f"for the {' or '.join(owners) or 'no'} family; {instead}")
        return None

    def for_family(self, family: str) -> Stage | None:
        """The same stage with each model part swapped for its twin of the type `family` takes; None when a part
        has no such twin (the family cannot run this stage)."""
        takes = family_spec(family).takes
        swaps = {}
        for lever in self.part_levers:
            wanted = takes.get(lever.kind)
            if lever.part_type is None or wanted is None or lever.part_type == wanted:
                continue
            other = twin(lever, wanted)
            if other is None:
                return None
            swaps[lever.kind] = other.name
        return self.replace(**swaps) if swaps else self

    def native_twin(self) -> Stage | None:
        """The same stage with each vendor lever (Apex, Liger, torchao, TE) swapped for the PyTorch lever it
        replaces; None when it uses no such lever."""
        swaps = {lever.kind: lever.native for lever in self.levers if lever.native}
        return self.replace(**swaps) if swaps else None

    @property
    def vendors(self) -> str:
        """The libraries whose levers this stage uses, for a sentence ("Apex", "Liger-Kernel + torchao")."""
        return " + ".join(dict.fromkeys(lever.vendor.title for lever in self.levers if lever.vendor))

    @property
    def world_size(self) -> int:
        return int(self.gpus)

    @property
    def key(self) -> str:
        by_kind = dict(zip(KINDS, self.levers, strict=True))
        return "+".join(f"{k.key_prefix}{by_kind[k.name].name}" for k in _KEY_ORDER
                        if k.always_in_key or not by_kind[k.name].plain)

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
        return " · ".join(lever.title for lever in self.levers if not lever.plain)

    def as_dict(self) -> dict[str, str]:
        return dict(self._names)

    @property
    def packages(self) -> tuple[KernelPackage, ...]:
        """The kernel packages this stage's levers import: what a probe for it must check."""
        return tuple(dict.fromkeys(p for lv in self.levers for p in lv.packages))

    def unavailable_reason(self, probe: Probe, device: str) -> str | None:
        for lever in self.levers:
            reason = lever.requires(probe, device, self)
            if reason:
                return reason
        return None

    def snippet(self) -> str:
        # torch's own norm or MLP is the model's architecture (a Llama's RMSNorm), not a change to write down
        changed = [lv for lv in self.levers if BASELINE_LEVERS[lv.kind] != lv.name
                   and not (isinstance(lv, PartLever) and lv.vendor is None and not lv.step)]
        if not changed:
            return ("# baseline: a plain PyTorch loop\n" + LEVERS[BASELINE_LEVERS["optimizer"]].snippet
                    + LEVERS[BASELINE_LEVERS["precision"]].snippet)
        place = {kind.name: kind.recipe_place for kind in KIND_SPECS}
        setup = "".join(lv.snippet for lv in sorted(changed, key=lambda lv: place[lv.kind]))
        return f"# {self.label}: the change to a plain PyTorch loop\n" + setup + self._step_lines(changed)

    def _step_lines(self, changed: list[Lever]) -> str:
        """The training step where a lever changes it: the head's forward, inside the precision's context."""
        if not any(lv.step for lv in changed):
            return ""
        forward = self.lever("head").step
        precision = self.lever("precision").step
        body = precision.replace(FORWARD, textwrap.indent(forward, "    ")) if precision else forward
        graphs = self.lever("compile").step
        if FORWARD in graphs:   # a graph captures the step once and replays it
            return graphs.replace(FORWARD, textwrap.indent(body, "    "))
        return "# each training step:\n" + body


def _key_names(kind: str) -> list[str]:
    """A kind's lever names as a key writes them (the GPU count as gpusN)."""
    return [f"gpus{n}" if kind == "gpus" else n for n in names_of(kind)]
