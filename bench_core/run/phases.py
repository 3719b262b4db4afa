"""The phases of one training step, in the order the step runs them (run.step calls its `on_phase` hook at the end
of each): what a step's peak memory is read per phase by (sweep.timing.process), no torch."""
from __future__ import annotations

from enum import StrEnum


class StepPhase(StrEnum):
    FORWARD = "forward"        # zero_grad, the forward pass and the loss
    BACKWARD = "backward"
    OPTIMIZER = "optimizer"    # the optimizer's step (and the grad scaler's)
