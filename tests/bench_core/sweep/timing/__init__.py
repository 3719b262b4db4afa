"""Tests of bench_core/sweep/timing/."""
