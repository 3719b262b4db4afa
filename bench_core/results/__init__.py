"""What was measured and everything derived from it: records, summary, files, figures, history."""
