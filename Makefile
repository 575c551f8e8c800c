# Two entry points for a fresh clone: `make demo` and `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-deps lint venv bytecode clean

$(BIN)/costgate: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(BIN)/costgate

venv: $(BIN)/costgate

# the project's own bytecode, written once: with PYTHONDONTWRITEBYTECODE set (as on these
# machines) an editable install has none, and every process (each Ray replica, each CLI
# call) compiled ~150 of our modules again, 0.05-0.15 s of CPU each. Up to date: 0.1 s
bytecode: venv
	$(BIN)/python -m compileall -q gateway db dashboard > /dev/null

demo: venv bytecode
	$(BIN)/costgate demo

# ruff, the import rules between sub-packages ([tool.importlinter] in pyproject.toml), mypy
lint: venv
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# chromium and promtool from Debian, when missing (the browser and metrics tests)
test-deps:
	bash .ci/test-deps

# ruff and the import rules first (a second); mypy (45 s of one core on a fresh clone)
# beside the suite rather than before it, its report printed after the suite's; the
# suite on three workers, each shared Ray stack on one of them (tests/runner/scheduling.py),
# the slowest 20 tests listed at the end (docs/TESTING.md). Fails if any of them fails
test: venv test-deps bytecode
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	@$(BIN)/mypy > .mypy.log 2>&1 & types=$$!; \
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 3 --dist loadgroup --durations=20; \
	suite=$$?; wait $$types; typed=$$?; echo "mypy:"; cat .mypy.log; rm -f .mypy.log; \
	[ $$suite -eq 0 ] && [ $$typed -eq 0 ]

clean:
	rm -rf $(VENV) .state
