# The two commands a newcomer needs: `make demo` runs the main job, `make test` the test suite.
# Each creates the virtual environment .venv at the repo root and installs the project into it
# (editable, with every extra) when pyproject.toml changed, or a module was added or removed, since
# the last install. The install is setuptools' strict editable mode: build/__editable__.*/ holds
# the package `reactive_streams` as links onto rs_core/, adapters/ and spark/, which mypy can follow
# (it cannot follow the default mode's import hook); a new module needs a new install, which the
# folders' times below trigger.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SOURCES := pyproject.toml rs_core rs_core/publishers rs_core/subscribers rs_core/tck adapters spark spark/_partitions
STRICT := --config-settings editable_mode=strict

RX6 := .venv-rx6
RX6_STAMP := $(RX6)/.installed

.PHONY: demo test test-rx6 matrix bench clean

$(STAMP): $(SOURCES)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(STRICT) -e '.[all]'
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) -m reactive_streams.spark $(ARGS)

test: $(STAMP)
	$(PY) -m ruff check rs_core adapters spark compat_matrix benchmarks tests
	$(PY) -m mypy -p reactive_streams -p compat_matrix -p benchmarks
	$(PY) -m pytest $(PYTEST_ARGS)
	$(MAKE) test-rx6

# The RxPY adapter also runs against the newest reactivex (6.x), which cannot share .venv
# with aioreactive (it caps reactivex below 5).
$(RX6_STAMP): $(SOURCES)
	@test -x $(RX6)/bin/python || $(PYTHON) -m venv $(RX6)
	$(RX6)/bin/python -m pip install --quiet --upgrade pip
	$(RX6)/bin/python -m pip install --quiet $(STRICT) -e . 'reactivex>=6,<7' pytest pytest-asyncio pytest-timeout
	@touch $(RX6_STAMP)

test-rx6: $(RX6_STAMP)
	$(RX6)/bin/python -m pytest -p no:cacheprovider tests/adapters/test_rx_from.py tests/adapters/test_rx_to.py tests/adapters/test_rx_processor.py tests/tck/test_rx_tck.py tests/tck/test_iterables_tck.py tests/test_pipe.py tests/tck/test_pipe_tck.py

# The rx columns run in .venv-rx6 too (reactivex 6.x); the matrix shows both versions.
matrix: $(STAMP) $(RX6_STAMP)
	$(PY) -m compat_matrix $(ARGS)

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) $(RX6) .venv .venv-* .pytest_cache .mypy_cache .ruff_cache build
