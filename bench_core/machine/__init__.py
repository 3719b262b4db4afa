"""What this machine is and can do: the probe, its cache, GPU ceilings, telemetry and timer."""
