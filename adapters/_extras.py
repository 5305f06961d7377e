"""The error an adapter module raises when the optional library it wraps is missing."""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(exc: ModuleNotFoundError, module: str, extra: str) -> ModuleNotFoundError:
    """``exc`` reworded for a user: which module needs what, and the ``pip`` line that
    installs it. Still a ``ModuleNotFoundError`` carrying the missing library's ``name``, so
    ``python -m compat_matrix`` tells a missing extra from a broken import."""
    return ModuleNotFoundError(
        f"{module} needs {exc.name} ({exc}); install it with: "
        f"pip install 'reactive-streams-py[{extra}]'",
        name=exc.name,
    )
