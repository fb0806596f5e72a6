# The two commands of the README: `make demo` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_RELEASES ?= 1.0.0.post4 1.2.1 1.4.1 1.5.1 1.7.0.post2 1.9.1 2.0.0b1
DEMO_JOBS ?= 2
# runtimes: the same release on the Python and numpy users move to, and a build flavour beside its release
# (the Python 3.12 one only where Python 3.12 is found: make demo says so when it leaves it out)
DEMO_RUNTIMES ?= $(if $(shell scripts/find-python.sh 3.12 2>/dev/null),1.9.1+py3.12+numpy1.26.4) 1.7.0.post2+native
# the exits out of MXNet the demo shows; PyTorch's environment is over 5 GB, so only when asked:
# make demo DEMO_EXITS="onnx openvino torch"
DEMO_EXITS ?= onnx openvino
comma := ,
empty :=
space := $(empty) $(empty)

.PHONY: setup sysdeps browser demo test test-fast lint clean-envs nbstripout

setup: $(VENV)/.installed sysdeps nbstripout
	@# the host's bytecode of the kit (environments compile their own): no step recompiles it from source
	@$(BIN)/python -m compileall -q kit >/dev/null || true

$(VENV)/.installed: pyproject.toml
	py=$$(scripts/find-python.sh 3.11) && "$$py" -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

sysdeps:
	@bash scripts/install-system-deps.sh

# headless Chromium and chromedriver from Debian's packages, for the JupyterLab test
browser:
	@bash scripts/install-browser.sh

nbstripout: $(VENV)/.installed
	@git rev-parse --git-dir >/dev/null 2>&1 && $(BIN)/nbstripout --install || true

demo: setup
	@[ -n "$$(scripts/find-python.sh 3.12 2>/dev/null)" ] || \
	  echo "make demo: no Python 3.12 here: the runtime 1.9.1+py3.12+numpy1.26.4 is left out"
	$(BIN)/mxcompat env create $(DEMO_RELEASES) $(DEMO_RUNTIMES) $(DEMO_EXITS) --allow-fallback
	$(BIN)/mxcompat env list
	@# exit 1 is the kit's verdict "regressions found" (1.x LSTMs do not load in MXNet 2.0), not a broken demo
	$(BIN)/mxcompat run --save $(subst $(space),$(comma),$(strip $(DEMO_RELEASES))) \
	  --load $(subst $(space),$(comma),$(strip $(DEMO_RELEASES) $(DEMO_RUNTIMES) $(DEMO_EXITS))) --forward --jobs $(DEMO_JOBS); \
	rc=$$?; if [ $$rc -eq 1 ]; then echo "make demo: the run found regressions (exit 1); summary.md above lists them"; \
	elif [ $$rc -ne 0 ]; then exit $$rc; fi

# two workers, each taking whole files (a module's fixtures run once); each builds its own environments. A third
# was measured and is no faster (bench/README.md, "make test")
TEST_WORKERS ?= 2
test: setup browser
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-fast: setup
	$(BIN)/python -m pytest -m "not envs" $(PYTEST_ARGS)

# ruff (check and format), the import contracts in pyproject.toml, common+kernel parsed by Python 3.6, and every
# command, make target, link and path the docs show checked against the real CLI and tree
lint: setup
	$(BIN)/ruff check kit tests bench scripts
	$(BIN)/ruff format --check kit tests bench scripts
	$(BIN)/lint-imports
	py36=$$(scripts/find-python.sh 3.6) && "$$py36" scripts/check-py36.py
	$(BIN)/python scripts/check-docs.py

clean-envs:
	$(BIN)/mxcompat env remove --all
