"""Which candidates fit the memory budget: each one's predicted peak (the timed prediction's, where it has one,
else the engine's own upper bound for the config, models.families.estimate_memory, made stage-aware where the
registry knows it: the optimizer lever's moment bytes and 16-bit activations under autocast) against --memory.
The default budget is the device's free memory less a margin, stated: the peak counted is memory allocated, and
the allocator reserves above it (blocks cut to size, a cache kept for reuse), the CUDA context and cuBLAS's
workspaces sit outside it."""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bench_core.config.bench_config import BenchConfig
from bench_core.levers.stage import Stage
from bench_core.models.families import estimate_memory
from bench_core.recommend.predict import Predicted, at_batch
from bench_core.recommend.space import Candidate

GIB = 2**30
MARGIN_FRACTION = 0.10   # reserved above allocated: the allocator's rounding and cache
MARGIN_MIN_GIB = 1.0     # a CUDA context and cuBLAS workspaces: about half a GiB on an H100, doubled


class PeakSource(StrEnum):
    PREDICTED = "predicted from the timed shallow steps"
    UPPER_BOUND = ("the engine's upper bound for the config (models.families.estimate_memory), with the stage's "
                   "optimizer moments (its lever's moment bytes) and 16-bit activations under autocast")


@dataclass(frozen=True)
class MemoryBudget:
    gib: float
    why: str        # given by --memory, or the free memory less the margin, with both figures

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def default_budget(free_bytes: int | None, device: str) -> MemoryBudget | None:
    """The free memory less max(MARGIN_FRACTION of it, MARGIN_MIN_GIB); None where free memory is unknown."""
    if free_bytes is None:
        return None
    free = free_bytes / GIB
    margin = max(free * MARGIN_FRACTION, MARGIN_MIN_GIB)
    return MemoryBudget(max(free - margin, 0.0),
                        f"{free:.1f} GiB free on {device} less a {margin:.1f} GiB margin (the larger of "
                        f"{MARGIN_FRACTION:.0%} and {MARGIN_MIN_GIB:.0f} GiB: the allocator reserves above the peak "
                        f"allocated, and the CUDA context and cuBLAS workspaces sit outside it)")


@dataclass(frozen=True)
class Fit:
    candidate: Candidate
    peak_gib: float
    source: PeakSource
    fits: bool


def stage_estimate_bytes(cfg: BenchConfig, stage: Stage) -> float:
    """estimate_memory's fp32-Adam bound with what the registry knows of the stage: its optimizer's two moments at
    the lever's own bytes (an 8-bit AdamW's are a quarter of fp32's), and the blocks' saved activations at half
    where the precision autocasts to 16 bits (the estimate's own 16-bit figure). The logits stay fp32."""
    need = estimate_memory(cfg)
    params = need["params"]
    fp32_moments = 8 * params
    moments = 2 * stage.optimizer_lever.moment_bytes(params)
    blocks = cfg.depth * 68 * cfg.tokens_per_step * cfg.width
    halved = blocks / 2 if stage.precision_lever.plan.autocast_dtype is not None else 0
    return need["total_bytes"] - fp32_moments + moments - halved


def peak_of(cfg: BenchConfig, candidate: Candidate, predicted: Predicted | None) -> tuple[float, PeakSource]:
    if predicted is not None and predicted.peak_mib is not None:
        return predicted.peak_mib / 1024, PeakSource.PREDICTED
    return stage_estimate_bytes(at_batch(cfg, candidate.batch_size), candidate.stage) / GIB, PeakSource.UPPER_BOUND


def memory_fit(cfg: BenchConfig, candidates: tuple[Candidate, ...], predicted: dict[Candidate, Predicted],
               budget: MemoryBudget | None) -> tuple[Fit, ...]:
    """Each candidate's peak against the budget; with no budget (free memory unknown) every one fits."""
    fits = []
    for c in candidates:
        peak, source = peak_of(cfg, c, predicted.get(c))
        fits.append(Fit(c, peak, source, budget is None or peak <= budget.gib))
    return tuple(fits)
