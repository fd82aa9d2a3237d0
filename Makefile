PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: setup run test lint format

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-installs only when requirements.txt changed since the last install.
$(VENV)/.installed: requirements.txt | $(BIN)/python
	$(BIN)/pip install --disable-pip-version-check -q --no-deps -r requirements.txt
	touch $@

setup: $(VENV)/.installed
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py load_demo

run: setup
	$(BIN)/daphne -b $(HOST) -p $(PORT) agentchat.asgi:application

test: $(VENV)/.installed
	$(BIN)/pytest

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(VENV)/.installed
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
