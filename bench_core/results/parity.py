"""Loss parity: does each stage's loss stay within rounding of the baseline's, at the same training step?

The bound comes from the precision, never from observed runs. Two stages of one run start from the same seed, train
on the same fixed synthetic batch with the same update rule, and differ only in how their arithmetic rounds. Then:

* Each value a step computes carries two roundings. Where it is stored, a relative error of at most u, the
  precision's unit roundoff (FP32 2^-24; TF32 and FP16 2^-11; BF16 2^-8; FP8 stages compute around BF16, so they
  get BF16's u and the verdict says whether FP8 keeps BF16's parity). And while it is summed: every precision
  accumulates in an FP32 register, rounding once per term, so a sum of K terms in an order the kernel chooses
  carries about sqrt(K)·2^-24 (Higham & Mary's probabilistic bound). K is the step's longest reduction: the loss's
  softmax over the vocabulary, the weight gradients' sum over batch × sequence tokens, the MLP's inner width.
  Under BF16 the store dominates (2^-8 against sqrt(50304)·2^-24 = 1.3e-5 for gpt2-small); in FP32 the sum does,
  and it is what two FP32 stages that only order their float operations differently (foreach against fused Adam,
  another kernel's reduction tree) differ by. Without it the FP32 bound was 3.7e-7 of the loss for gpt2-small, and
  the H200's own FP32 Adam/FusedAdam pairs differed by 1e-6 to 1.3e-5 after 22 steps
  (docs/data/h200_2026-12-03_call12_*.json): the bound was tighter than rounding itself.
* A step rounds about 2·depth + 2 values in series (each block's attention and MLP outputs, the embedding and the
  head). Independent roundings add in quadrature (Higham & Mary's probabilistic error analysis), so a step's
  update carries a relative error of at most g·u', with g = sqrt(2·depth + 2) and u' = u + sqrt(K)·2^-24.
* To first order, a relative error e in an update changes that step's loss decrease ΔL_k by at most e·|ΔL_k|.
  Summed over the steps so far, and adding the rounding of the loss's own evaluation at step t:
      |L_t - L'_t| <= g·u' · (Σ_k |ΔL_k| + L_t).
  Σ_k |ΔL_k| is the distance the loss travelled. The timed steps are recorded; the warm-up steps are not, but they
  start from the untrained loss ln(vocab) (a near-uniform softmax), so their part is at most ln(vocab) - L_first.
The bound is relative to the reference's loss at that step. It assumes no chaotic amplification: a stage outside it
either computes differently (other numerics) or trains on an unstable path, and the verdict says so.

Warm-up is time-based, so stages reach timed step 1 after different numbers of updates. Only the same training
step (warm-up included) is compared, on each stage's first process (later processes warm up again).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from bench_core.config.bench_config import BenchConfig
from bench_core.models.families import mlp_hidden
from bench_core.results.summary import RunSummary, StageSummary

# unit roundoff of each compute precision, keyed by the datasheet peak a stage counts against (FP8: bf16)
UNIT_ROUNDOFF = {"fp32": 2.0 ** -24, "tf32": 2.0 ** -11, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
ACCUMULATOR_ROUNDOFF = 2.0 ** -24   # every precision sums in FP32 registers


class Parity(StrEnum):
    WITHIN = "within"
    OUTSIDE = "outside"
    NOT_COMPARABLE = "not comparable"


@dataclass(frozen=True)
class LossParity:
    key: str
    reference_key: str
    parity: Parity
    precision: str = ""               # whose bound applies: the coarser of the two stages' precisions
    step: int | None = None           # the training step compared, warm-up included
    difference: float | None = None   # |L - L_ref| / L_ref
    bound: float | None = None        # relative, derived in the module docstring
    reason: str = ""                  # why there is no comparison

    @property
    def text(self) -> str:
        if self.parity == Parity.NOT_COMPARABLE:
            return f"{self.key}: loss not compared with {self.reference_key}: {self.reason}"
        if self.parity == Parity.WITHIN:
            return (f"{self.key}: at training step {self.step}, loss within {_pct(self.difference)} of "
                    f"{self.reference_key} (bound {_pct(self.bound)} for {self.precision})")
        return (f"{self.key}: at training step {self.step}, loss differs by {_pct(self.difference)} from "
                f"{self.reference_key}, beyond the bound {_pct(self.bound)} for {self.precision}: other numerics")


def _pct(x: float | None) -> str:
    return f"{100 * (x or 0):.2g}%"


def first_round_losses(stage: StageSummary) -> tuple[float, ...]:
    """The timed losses of the stage's first process: the one whose warm-up steps are recorded."""
    result = stage.result
    return result.losses[:result.rounds[0]] if result.rounds else result.losses


def longest_reduction(cfg: BenchConfig) -> int:
    """K, the most terms one sum of a step adds: the softmax over the vocabulary, the weight gradients over the
    batch's tokens, or the MLP's inner width."""
    return max(cfg.vocab_size, cfg.batch_size * cfg.seq_len, mlp_hidden(cfg))


def rounding_bound(precision: str, depth: int, vocab_size: int, losses: tuple[float, ...], at: int,
                   reduction: int) -> float:
    """Absolute bound on the loss difference at timed index `at`, for sums of up to `reduction` terms (see the
    module docstring)."""
    g = math.sqrt(2 * depth + 2)
    unit = UNIT_ROUNDOFF[precision] + math.sqrt(reduction) * ACCUMULATOR_ROUNDOFF
    warmup_path = max(0.0, math.log(vocab_size) - losses[0])
    timed_path = sum(abs(b - a) for a, b in zip(losses[:at], losses[1:at + 1], strict=True))
    return g * unit * (warmup_path + timed_path + losses[at])


def compare(stage: StageSummary, reference: StageSummary, cfg: BenchConfig) -> LossParity:
    def no(reason: str) -> LossParity:
        return LossParity(stage.key, reference.key, Parity.NOT_COMPARABLE, reason=reason)

    a, b = first_round_losses(stage), first_round_losses(reference)
    if not a or not b:
        return no("no timed losses")
    wa, wb = stage.result.warmup_steps, reference.result.warmup_steps
    if wa is None or wb is None:
        return no("warm-up steps not recorded, so the same training step cannot be found")
    last = min(wa + len(a), wb + len(b))
    if last <= max(wa, wb):
        return no(f"no training step in common (warm-up {wa} and {wb} steps)")
    units = [p for p in (stage.mfu_peak, reference.mfu_peak) if p in UNIT_ROUNDOFF]
    if len(units) < 2:
        return no(f"no rounding unit known for {stage.mfu_peak} or {reference.mfu_peak}")
    precision = max(units, key=UNIT_ROUNDOFF.__getitem__)
    ia, ib = last - wa - 1, last - wb - 1
    ref = b[ib]
    k = longest_reduction(cfg)
    bound = max(rounding_bound(precision, cfg.depth, cfg.vocab_size, a, ia, k),
                rounding_bound(precision, cfg.depth, cfg.vocab_size, b, ib, k)) / ref
    diff = abs(a[ia] - ref) / ref
    return LossParity(stage.key, reference.key, Parity.WITHIN if diff <= bound else Parity.OUTSIDE, precision,
                      last, diff, bound)


def loss_parity(summary: RunSummary) -> tuple[LossParity, ...]:
    """Each ok stage with losses against the baseline stage (the first), at their last common training step."""
    stages = [s for s in summary.stages if s.ok and first_round_losses(s)]
    if not stages or stages[0].index != 0:
        return ()
    return tuple(compare(s, stages[0], summary.run.config) for s in stages[1:])
