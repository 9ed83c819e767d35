# Quickstart: `make demo` runs the loop, `make test` runs the tests. Both install what they need.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test install clean

demo: install
	$(VENV)/bin/coworkenv demo

test: install
	$(PY) -m pytest

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	./scripts/system-deps.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

clean:
	rm -rf $(VENV) runs .pytest_cache
