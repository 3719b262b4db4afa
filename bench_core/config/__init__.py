"""What a run asks for: the run configuration, its validation, and the server's caps."""
