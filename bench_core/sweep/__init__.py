"""Where a lever starts to pay across model shapes: `timing` (the timing process), `core`, `views` (what is shown)."""
