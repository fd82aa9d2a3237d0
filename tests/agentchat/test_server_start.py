"""`python -m agentchat.server`, as `make run` starts it: its imports run before Django's settings are loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]


def test_the_server_module_imports_before_the_settings_are_loaded():
    env = {name: value for name, value in os.environ.items() if name != "DJANGO_SETTINGS_MODULE"}

    started = subprocess.run(
        [sys.executable, "-c", "import agentchat.server"], cwd=BASE_DIR, env=env, capture_output=True, text=True
    )

    assert started.returncode == 0, started.stderr


def test_what_the_server_loaded_is_kept_out_of_the_collectors_passes_and_the_young_are_collected_less_often():
    tuned = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gc, django; django.setup(); from agentchat import server; server.tune_the_collector(); "
            "print(gc.get_freeze_count(), *gc.get_threshold())",
        ],
        cwd=BASE_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "agentchat.settings"},
        capture_output=True,
        text=True,
    )

    assert tuned.returncode == 0, tuned.stderr
    frozen, *thresholds = map(int, tuned.stdout.split())
    assert frozen > 100_000  # the application and all it imports
    assert thresholds == [20_000, 10, 10]


def test_the_log_reaches_standard_error_when_logging_was_set_up_while_llama_cpp_silenced_it():
    # As when the local model loads in the background while the server imports its application, which sets the
    # logging up again: llama.cpp points sys.stderr (and the descriptor) at /dev/null for the while.
    script = (
        "import logging, django\n"
        "from llama_cpp._utils import suppress_stdout_stderr\n"
        "with suppress_stdout_stderr(disable=False):\n"
        "    django.setup()\n"
        "logging.getLogger('conversations').error('heard once the model has loaded')\n"
    )

    done = subprocess.run(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", script],
        cwd=BASE_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "agentchat.settings"},
        capture_output=True,
        text=True,
    )

    assert done.returncode == 0, done.stderr
    assert "ERROR conversations: heard once the model has loaded" in done.stderr
