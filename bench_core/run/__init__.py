"""Running stages: the worker process, its training step, the event protocol and the run loop."""
