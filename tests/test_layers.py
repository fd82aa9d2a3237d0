"""The packages keep their layers (.importlinter): arrows point down only, the engine imports no app."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_import_contracts_are_kept():
    # In a process of its own: the contracts are about the code as written, not what this process has imported.
    linted = subprocess.run(  # noqa: S603 - our own linter, our own config
        [Path(sys.executable).parent / "lint-imports", "--no-cache", "--config", ROOT / ".importlinter"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "3 kept, 0 broken" in linted.stdout
