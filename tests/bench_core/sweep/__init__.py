"""Tests of bench_core/sweep/, mirroring it: a package, so a test file may share its name with one elsewhere."""
