"""Tests of bench_core/sweep/views/."""
