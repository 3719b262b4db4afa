"""What a measurement means: statistics, the time breakdown, kernel proof, rates and estimates."""
