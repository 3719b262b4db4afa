"""Everything the recommender takes from the sweep, in one place: the sweep is being split into sub-packages, and
these few names are all that must follow it."""
from __future__ import annotations

from bench_core.sweep.predict import MissingTiming, StagePrediction, predict_stage
from bench_core.sweep.spec import parse_budget
from bench_core.sweep.timings import PointTimings

__all__ = ["MissingTiming", "PointTimings", "StagePrediction", "parse_budget", "predict_stage"]
