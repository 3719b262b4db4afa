"""Everything the recommender takes from the sweep, in one place: the few names that
must follow the sweep when it moves."""
from __future__ import annotations

from bench_core.sweep.core.predict import MissingTiming, StagePrediction, predict_stage
from bench_core.sweep.core.runner import time_in_process
from bench_core.sweep.core.spec import parse_budget
from bench_core.sweep.timing.ahead import MOST_PROCESSES
from bench_core.sweep.timing.timings import PointTimings

__all__ = ["MOST_PROCESSES", "MissingTiming", "PointTimings", "StagePrediction", "parse_budget", "predict_stage",
           "time_in_process"]
