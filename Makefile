PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: setup run test eval lint format bench chromium messages

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# llama-cpp-python is built from source for this machine's CPU, and only what its bindings load (libllama, libggml):
# LLAVA_BUILD=OFF drops libmtmd, and deploy/llama.cmake turns off llama.cpp's common library and AMX. --no-cache-dir:
# pip would otherwise keep the built wheel and hand it to the next install whatever its CPU and build settings.
# -v shows the build's [n/83] steps; SKBUILD_CMAKE_VERBOSE=false keeps each to one short line, and LLAMA_ALL_WARNINGS=OFF
# drops -Wall and co., whose ~15,000 lines of false alarms from GCC's AVX-512 headers would bury them.
PIP_INSTALL = CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) SKBUILD_CMAKE_VERBOSE=false \
	CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_ALL_WARNINGS=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$(abspath deploy/llama.cmake)" \
	$(BIN)/pip install --disable-pip-version-check --no-cache-dir -v --no-deps

# Built again whenever its build settings change; the rest re-installs only when requirements.txt changed.
$(VENV)/.llama: deploy/llama.cmake | $(BIN)/python
	@echo "Building llama.cpp from source: about 2 minutes on 2 free cores, 4 when another job shares them."
	$(PIP_INSTALL) --force-reinstall $$(grep '^llama-cpp-python==' requirements.txt)
	touch $@

$(VENV)/.installed: requirements.txt $(VENV)/.llama
	$(PIP_INSTALL) -r requirements.txt
	touch $@

setup: $(VENV)/.installed
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py load_demo --url http://$(HOST):$(PORT)/

# daphne serves; the worker that runs slow tools as background jobs runs beside it and stops with it.
run: setup
	@$(BIN)/python manage.py db_worker --queue-name tools --interval 0.5 --no-reload & worker=$$!; \
	trap 'kill $$worker 2>/dev/null' EXIT; \
	$(BIN)/python -m agentchat.server -b $(HOST) -p $(PORT) agentchat.asgi:application

# Three test processes (pytest-xdist), each with its own SQLite file and in-memory layer: many tests wait on a server,
# a browser or a worker, so a third fills two cores better (5 min against 6); a fourth gains nothing. One with
# REDIS_URL, as the processes would share its keys (rate limits and upload slots per user, live sign-out groups).
# A process that runs out of tests takes some of another's (worksteal): the embedded model's tests take up to half a
# minute each, and handed out in fixed shares they left one process running alone at the end (4:40 against 4:00).
TEST_WORKERS = $(if $(REDIS_URL),0,3)

# The browser tests drive Debian's headless Chromium (Playwright downloads no browser); it is installed when missing.
# The page's pure JavaScript (static/js/chat/) has node's own unit tests, run first when node is there.
# Bytecode is kept even where the environment says not to (PYTHONDONTWRITEBYTECODE): otherwise every test process
# compiles the project and rewrites the tests' asserts again (collecting took 12 s instead of 5.5 s), and every server
# a test starts compiles the project again.
test: $(VENV)/.installed chromium
	@if command -v node >/dev/null; then node --test tests/js/; else echo "node is not installed: the JS unit tests (tests/js/) were skipped"; fi
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal

# How well the embedded model routes requests to tools, over fixed request sets (minutes); kept out of `make test`.
eval: $(VENV)/.installed
	$(BIN)/pytest tests/eval --eval -q

chromium:
	@command -v chromium-headless-shell >/dev/null \
		|| { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium-headless-shell; } \
		|| { echo "Could not install Debian's chromium-headless-shell (run as root, or install it yourself)"; exit 1; }

# Translations: extract the strings (Django's makemessages needs GNU gettext, installed when missing), translate
# locale/ru/LC_MESSAGES/*.po, then compile the committed .mo files with polib (no msgfmt needed).
MESSAGES_IGNORE := --ignore='tests/*' --ignore='bench/*' --ignore='var/*' --ignore='test-artifacts/*'
messages: $(VENV)/.installed
	@command -v xgettext >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y gettext; }
	$(BIN)/python manage.py makemessages -l ru --no-obsolete $(MESSAGES_IGNORE)
	$(BIN)/python manage.py makemessages -d djangojs -l ru --no-obsolete $(MESSAGES_IGNORE)
	$(BIN)/python manage.py compile_catalogues

# The benchmarks (docs/benchmarks.md); BENCH_ARGS passes options, e.g. BENCH_ARGS="--levels 50 --profile".
bench: $(VENV)/.installed
	$(BIN)/python -m bench $(BENCH_ARGS)

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(VENV)/.installed
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
