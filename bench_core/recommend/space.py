"""The search space: every combination of the levers this machine has that the registry allows together, times the
batch sizes asked for. Nothing here is a table of its own: availability and conflicts are the levers' own
requirements (levers.registry), the family's part rules are the stage's (Stage.for_family / family_conflict), and
each combination left out keeps the reason the registry gave."""
from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from bench_core.levers.registry import BASELINE_LEVERS, KINDS, LEVERS, names_of
from bench_core.levers.stage import Stage
from bench_core.machine.probe import Probe

# One GPU: a recommendation is for the user's model on this GPU; the GPU count is the run's, not a lever to search.
SEARCHED_KINDS = tuple(kind for kind in KINDS if kind != "gpus")
NOT_SEARCHED_KINDS = {"gpus": "the GPU count is the training job's choice: the search is on one GPU"}


@dataclass(frozen=True)
class Candidate:
    stage: Stage
    batch_size: int

    @property
    def key(self) -> str:
        return f"{self.stage.key}@b{self.batch_size}"


@dataclass(frozen=True)
class Exclusion:
    """Combinations left out for one reason: how many, and one of them as an example."""
    reason: str
    count: int
    example: str

    @property
    def text(self) -> str:
        more = f" (and {self.count - 1} more)" if self.count > 1 else ""
        return f"{self.example}{more}: {self.reason}"

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, data: dict) -> Exclusion:
        return cls(str(data["reason"]), int(data["count"]), str(data["example"]))


@dataclass(frozen=True)
class SearchSpace:
    stages: tuple[Stage, ...]
    batch_sizes: tuple[int, ...]
    excluded: tuple[Exclusion, ...]     # combinations not searched, grouped by reason

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        return tuple(Candidate(s, b) for b in self.batch_sizes for s in self.stages)


def _group(reasons: Iterable[tuple[str, str]]) -> tuple[Exclusion, ...]:
    grouped: dict[str, list[str]] = {}
    for key, reason in reasons:
        grouped.setdefault(reason, []).append(key)
    return tuple(Exclusion(reason, len(keys), keys[0]) for reason, keys in grouped.items())


def excluded_by_user(stage: Stage, left_out: frozenset[str]) -> str | None:
    named = sorted(lever.name for lever in stage.levers if lever.name in left_out)
    return f"left out by --exclude ({', '.join(named)})" if named else None


def _no_twin(stage: Stage, family: str) -> str:
    """Why the family cannot run this stage: the first part that has no twin of the family's type."""
    for lever in stage.part_levers:
        alone = Stage(**{lever.kind: lever.name})
        conflict = alone.family_conflict(family) if alone.for_family(family) is None else None
        if conflict:
            return conflict[1]
    return f"cannot train a {family} model"


def search_space(probe: Probe, device: str, family: str, batch_sizes: Iterable[int],
                 left_out: Iterable[str] = ()) -> SearchSpace:
    """Every one-GPU stage of the registry's levers for `family` that can run on `device`, and why each other
    combination cannot. A family that builds a part its own way (llama's SwiGLU for a plain GELU) folds two
    combinations into one stage, which is searched once."""
    skip = frozenset(left_out)
    kept: dict[Stage, None] = {}
    reasons: dict[str, str] = {}
    for names in itertools.product(*(names_of(kind) for kind in SEARCHED_KINDS)):
        stage = Stage(**dict(zip(SEARCHED_KINDS, names, strict=True)), gpus=BASELINE_LEVERS["gpus"])
        own = stage.for_family(family)
        if own is None:   # a part of another family's type with no twin of this family's type
            reasons.setdefault(stage.key, _no_twin(stage, family))
            continue
        if own in kept or own.key in reasons:
            continue
        reason = own.unavailable_reason(probe, device) or excluded_by_user(own, skip)
        if reason:
            reasons[own.key] = reason
        else:
            kept[own] = None
    for kind, why in NOT_SEARCHED_KINDS.items():
        reasons[f"{kind}: {', '.join(n for n in names_of(kind) if n != BASELINE_LEVERS[kind])}"] = why
    return SearchSpace(tuple(kept), tuple(dict.fromkeys(batch_sizes)), _group(reasons.items()))

def lever_names() -> frozenset[str]:
    """Every lever a user may leave out by name (--exclude)."""
    return frozenset(name for name, lever in LEVERS.items() if lever.kind in SEARCHED_KINDS)
