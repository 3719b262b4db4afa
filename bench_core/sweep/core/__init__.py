"""A sweep's core: its spec and plan, the prediction and crossovers, the loop that runs it, its records and history."""
