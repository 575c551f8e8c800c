# Two entry points for a fresh clone: `make demo` and `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint venv clean

$(BIN)/costgate: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(BIN)/costgate

venv: $(BIN)/costgate

demo: venv
	$(BIN)/costgate demo

lint: venv
	$(BIN)/ruff check .

test: venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -p no:cacheprovider

clean:
	rm -rf $(VENV) .state
