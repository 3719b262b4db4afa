"""The timing process side of a sweep: what is timed at a point, the process that times it, what it reports."""
