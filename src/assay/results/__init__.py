"""Results: results.json, samples files and tables in lm-eval layout."""
