# The two commands a newcomer needs: `make demo` runs the main job, `make test` the test suite.
# Each creates the virtual environment .venv at the repo root and installs the project into it
# (editable, with every extra) when pyproject.toml changed since the last install.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

RX6 := .venv-rx6
RX6_STAMP := $(RX6)/.installed

.PHONY: demo test test-rx6 matrix bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[all]'
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) -m spark $(ARGS)

test: $(STAMP)
	$(PY) -m ruff check rs_core adapters spark compat_matrix benchmarks tests
	$(PY) -m mypy rs_core adapters spark compat_matrix benchmarks
	$(PY) -m pytest $(PYTEST_ARGS)
	$(MAKE) test-rx6

# The RxPY adapter also runs against the newest reactivex (6.x), which cannot share .venv
# with aioreactive (it caps reactivex below 5).
$(RX6_STAMP): pyproject.toml
	@test -x $(RX6)/bin/python || $(PYTHON) -m venv $(RX6)
	$(RX6)/bin/python -m pip install --quiet --upgrade pip
	$(RX6)/bin/python -m pip install --quiet -e . 'reactivex>=6,<7' pytest pytest-asyncio pytest-timeout
	@touch $(RX6_STAMP)

test-rx6: $(RX6_STAMP)
	$(RX6)/bin/python -m pytest -p no:cacheprovider tests/adapters/test_rx.py tests/tck/test_rx_tck.py tests/tck/test_iterables_tck.py

# The rx columns run in .venv-rx6 too (reactivex 6.x); the matrix shows both versions.
matrix: $(STAMP) $(RX6_STAMP)
	$(PY) -m compat_matrix $(ARGS)

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) $(RX6) .venv .venv-* .pytest_cache .mypy_cache .ruff_cache
