"""The model families, one readable model per file."""
