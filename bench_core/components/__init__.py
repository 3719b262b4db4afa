"""The components view: one optimizer step and one norm alone, at the model's real shapes."""
