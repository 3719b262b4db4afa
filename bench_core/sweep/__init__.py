"""Crossover maps: one lever comparison across model shapes, predicted from kernel timings and measured."""
