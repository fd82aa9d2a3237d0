"""Compile locale/*/LC_MESSAGES/*.po into the .mo files Django reads, with polib: no GNU gettext needed.

The .mo files are committed, so a fresh clone has them; run this (or `make messages`) after editing a .po
file. tests/agentchat/test_translations.py fails when a .mo file is older than its .po file's content.
"""

from __future__ import annotations

from pathlib import Path

import polib
from django.conf import settings
from django.core.management.base import BaseCommand


def catalogues() -> list[Path]:
    return sorted(path for root in settings.LOCALE_PATHS for path in Path(root).glob("*/LC_MESSAGES/*.po"))


class Command(BaseCommand):
    help = "Compile the project's .po catalogues into .mo files (pure Python, no msgfmt)."

    def handle(self, *args, **options) -> None:
        for po_path in catalogues():
            catalogue = polib.pofile(str(po_path))
            catalogue.save_as_mofile(str(po_path.with_suffix(".mo")))
            self.stdout.write(f"{po_path.with_suffix('.mo')}: {catalogue.percent_translated()}% translated")
