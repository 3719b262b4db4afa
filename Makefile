# Two entry points: `make app` and `make test`. Both create .venv and install what they need.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8501
# One torch for the app and the tests where there is no GPU. Without an NVIDIA driver (no nvidia-smi) it is the CPU
# build: PyPI's Linux wheel of the same version pulls about 15 CUDA wheels (a 6 GB venv); PyTorch's CPU index serves
# it as 2.13.0+cpu, which outranks PyPI's 2.13.0 for this pin. With a driver, the app keeps requirements.txt's range
# (PyPI's CUDA build).
TORCH_PIN := torch==2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
NVIDIA_DRIVER := $(shell command -v nvidia-smi >/dev/null 2>&1 && echo yes)
# torch alone from that index, then its dependencies from PyPI (the pin is met by the +cpu build already there).
# TORCH_CPU_INDEX= (empty) leaves the index to pip's own configuration (a machine whose wheel cache holds the +cpu build).
CPU_TORCH = $(NO_COMPILE) --no-deps $(TORCH_PIN) $(if $(TORCH_CPU_INDEX),--extra-index-url $(TORCH_CPU_INDEX)) && \
	$(BIN)/pip install -q $(NO_COMPILE) $(TORCH_PIN)
# The app's packages are installed without byte-compiling every module ahead (about 310 MB of __pycache__, most of it
# for modules the app never imports); Python compiles each module it imports once, on first use.
torch-app deps-app: NO_COMPILE := --no-compile

.PHONY: app apex test lint venv deps-app deps-test browser torch-app torch-test

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch before the requirements, so their torch>=2.4 is already met and pip pulls no other build.
torch-app: $(BIN)/python
ifeq ($(NVIDIA_DRIVER),yes)
	$(BIN)/pip install -q $(NO_COMPILE) "torch>=2.4" -r requirements-gpu.txt
else
	$(BIN)/pip install -q $(CPU_TORCH)
endif

torch-test: $(BIN)/python
ifeq ($(NVIDIA_DRIVER),yes)
	$(BIN)/pip install -q $(TORCH_PIN)
else
	$(BIN)/pip install -q $(CPU_TORCH)
endif

# The project itself is installed editable with --no-deps: its runtime deps are requirements.txt (see pyproject.toml).
deps-app: torch-app
	$(BIN)/pip install -q $(NO_COMPILE) -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .

# The pinned torch (the CPU build without a driver, as `make app` installs it), then the test requirements.
deps-test: torch-test
	$(BIN)/pip install -q -r requirements-dev.txt
	$(BIN)/pip install -q --no-deps -e .

# Debian's Chromium for the browser tests (Playwright's own browser download is not used).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null; }

app: deps-app
	$(BIN)/streamlit run app.py --server.port $(PORT)

# NVIDIA Apex from source, only the extensions the benchmark loads, for this GPU (python -m bench_core apex build
# --help). APEX_SRC=/path/to/apex uses that checkout; without it, NVIDIA/apex is cloned at a pinned commit.
apex: deps-app
	APEX_SRC="$(APEX_SRC)" $(BIN)/python -m bench_core apex build

# ruff over the whole repo, mypy over the engine, the dashboard and its pages (both configured in pyproject.toml).
lint: deps-test
	$(BIN)/ruff check .
	$(BIN)/mypy

test: deps-test browser lint
	$(BIN)/python -m pytest -q --timeout 600
