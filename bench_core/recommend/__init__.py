"""What to switch on: the levers and batch sizes that fit, predicted, measured end to end, and the answer."""
