"""Tests of bench_core/sweep/core/."""
