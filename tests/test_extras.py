"""A missing optional library: the adapter module says which extra installs it."""

from __future__ import annotations

import importlib
import sys

import pytest

from compat_matrix._tck_run import optional_missing


@pytest.mark.parametrize(
    ("module", "library", "extra"),
    [
        ("reactive_streams.adapters.rx", "reactivex", "rx"),
        ("reactive_streams.adapters.aioreactive", "aioreactive", "aio"),
        ("spark", "pyspark", "spark"),
    ],
)
def test_a_missing_extra_is_named_with_its_pip_line(
    monkeypatch: pytest.MonkeyPatch, module: str, library: str, extra: str
) -> None:
    """Importing the module without its library raises ModuleNotFoundError naming the extra
    to install, and still naming the library (so the compat matrix marks the column
    unavailable instead of failing the run)."""
    monkeypatch.setitem(sys.modules, library, None)  # `import library` now fails
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ModuleNotFoundError) as failure:
        importlib.import_module(module)
    assert f"pip install 'reactive-streams-py[{extra}]'" in str(failure.value)
    assert failure.value.name == library and optional_missing(failure.value) == library
