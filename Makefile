# The two commands a newcomer needs: `make demo` runs the main job, `make test` the test suite.
# Each creates the virtual environment .venv at the repo root and installs the project into it
# (editable, with every extra) when pyproject.toml changed since the last install.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck matrix bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[all]'
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) -m spark $(ARGS)

test: $(STAMP)
	$(PY) -m ruff check rs_core adapters spark compat_matrix benchmarks tests
	$(PY) -m mypy rs_core adapters spark
	$(PY) -m pytest $(PYTEST_ARGS)

matrix: $(STAMP)
	$(PY) -m compat_matrix

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
