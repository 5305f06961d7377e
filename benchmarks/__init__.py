"""``python -m benchmarks``: speed and memory beside baselines measured in the same run."""
