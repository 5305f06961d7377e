"""TCK cases, one module per adapter: each defines ``CASES = [(column, Verification), ...]``."""
