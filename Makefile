# Two entry points for a fresh clone: `make demo` and `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-deps lint venv clean

$(BIN)/costgate: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(BIN)/costgate

venv: $(BIN)/costgate

demo: venv
	$(BIN)/costgate demo

# ruff, the import rules between sub-packages ([tool.importlinter] in pyproject.toml), mypy
lint: venv
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# chromium and promtool from Debian, when missing (the browser and metrics tests)
test-deps:
	bash .ci/test-deps

# two workers, each shared Ray stack on one of them (tests/runner/scheduling.py); the
# slowest 20 tests listed at the end (docs/TESTING.md)
test: lint test-deps
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup --durations=20

clean:
	rm -rf $(VENV) .state
