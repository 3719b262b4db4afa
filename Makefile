# Two entry points: `make app` and `make test`. Both create .venv and install what they need.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8501

.PHONY: app apex test lint venv deps-app deps-test browser

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The project itself is installed editable with --no-deps: its runtime deps are requirements.txt (see pyproject.toml).
deps-app: $(BIN)/python
	$(BIN)/pip install -q -r requirements.txt
	$(BIN)/pip install -q --no-deps -e .

# CPU torch first, so the requirements' torch>=2.4 is already met and no CUDA build is pulled.
deps-test: $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
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
