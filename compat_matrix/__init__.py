"""``python -m compat_matrix``: the TCK run over every adapter, and the source x sink grid.

Case modules live in ``compat_matrix/cases/``; results are written to ``docs/``.
"""
