"""The Russian catalogues: complete, compiled, and covering every string of the pages and the script.

msgfmt is not on a fresh machine, so the compiled .mo files are committed; these tests fail when one of
them no longer matches its .po file (run `make messages` or `manage.py compile_catalogues`).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import polib
import pytest
from django.conf import settings
from django.test import Client
from django.utils import translation
from django.utils.translation.template import templatize

LOCALE = Path(settings.BASE_DIR) / "locale" / "ru" / "LC_MESSAGES"
TEMPLATES = Path(settings.BASE_DIR) / "templates"
SCRIPTS = Path(settings.BASE_DIR) / "static" / "js"
PAGES_PY = [Path(settings.BASE_DIR) / "conversations" / "views.py"]
DOMAINS = ["django", "djangojs"]


def entries(catalogue) -> dict[tuple[str | None, str], object]:
    found = {}
    for entry in catalogue:
        if entry.obsolete or "fuzzy" in entry.flags:
            continue
        value = tuple(sorted(entry.msgstr_plural.items())) if entry.msgid_plural else entry.msgstr
        found[(entry.msgctxt, entry.msgid)] = value
    return found


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_entry_is_translated(domain):
    catalogue = polib.pofile(str(LOCALE / f"{domain}.po"))
    assert not catalogue.metadata_is_fuzzy
    assert catalogue.untranslated_entries() == []
    assert catalogue.fuzzy_entries() == []
    for entry in catalogue.translated_entries():
        if entry.msgid_plural:
            assert len(entry.msgstr_plural) == 4, entry.msgid  # Russian has four plural forms in Django
            assert all(entry.msgstr_plural.values()), entry.msgid


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_compiled_catalogue_matches_its_source(domain):
    source = polib.pofile(str(LOCALE / f"{domain}.po"))
    compiled = polib.mofile(str(LOCALE / f"{domain}.mo"))
    assert entries(compiled) == entries(source), "run `make messages` (manage.py compile_catalogues)"
    assert compiled.metadata.get("Plural-Forms") == source.metadata.get("Plural-Forms")


def template_strings() -> set[str]:
    found = set()
    for path in TEMPLATES.rglob("*.html"):
        code = templatize(path.read_text(), origin=str(path))
        for call in re.finditer(r"\b(?:gettext|ngettext|_)\((u?(['\"]).*?(?<!\\)\2)", code):
            found.add(ast.literal_eval(call.group(1).removeprefix("u")))
    return found


def script_strings() -> set[str]:
    found = set()
    for path in SCRIPTS.rglob("*.js"):
        text = path.read_text()
        for call in re.finditer(r"\bgettext\((\"(?:[^\"\\]|\\.)*\")\)", text):
            found.add(ast.literal_eval(call.group(1)))
        for call in re.finditer(r"\bngettext\((\"(?:[^\"\\]|\\.)*\"),", text):
            found.add(ast.literal_eval(call.group(1)))
    return found


def python_strings() -> set[str]:
    found = set()
    for path in PAGES_PY:
        for node in ast.walk(ast.parse(path.read_text())):
            translated = isinstance(node, ast.Call) and getattr(node.func, "id", "") in {"_", "gettext", "gettext_lazy"}
            if translated and node.args and isinstance(node.args[0], ast.Constant):
                found.add(node.args[0].value)
    return found


def test_every_string_of_the_templates_and_pages_is_in_the_catalogue():
    strings = template_strings() | python_strings()
    assert len(strings) > 50
    known = {msgid for _, msgid in entries(polib.pofile(str(LOCALE / "django.po")))}
    assert sorted(strings - known) == []


def test_every_string_of_the_script_is_in_the_javascript_catalogue():
    strings = script_strings()
    assert len(strings) > 40
    known = {msgid for _, msgid in entries(polib.pofile(str(LOCALE / "djangojs.po")))}
    assert sorted(strings - known) == []


def test_django_reads_the_catalogues():
    with translation.override("ru"):
        assert translation.gettext("Sign out") == "Выйти"
        assert translation.ngettext("%(counter)s question", "%(counter)s questions", 5) % {"counter": 5} == (
            "5 вопросов"
        )
        assert translation.ngettext("%(counter)s question", "%(counter)s questions", 22) % {"counter": 22} == (
            "22 вопроса"
        )


@pytest.mark.django_db
def test_the_javascript_catalogue_is_served_in_the_chosen_language():
    client = Client()
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "ru"
    body = client.get("/jsi18n/").content.decode()
    assert json.dumps("Соединение потеряно.") in body  # the catalogue is JSON, with \u escapes
    english = Client().get("/jsi18n/").content.decode()
    assert json.dumps("Соединение потеряно.") not in english
