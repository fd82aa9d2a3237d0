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


def test_what_the_server_loaded_is_kept_out_of_the_collectors_full_passes():
    frozen = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gc, django; django.setup(); from agentchat import server; server.freeze_what_is_loaded(); "
            "print(gc.get_freeze_count())",
        ],
        cwd=BASE_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "agentchat.settings"},
        capture_output=True,
        text=True,
    )

    assert frozen.returncode == 0, frozen.stderr
    assert int(frozen.stdout) > 100_000  # the application and all it imports
