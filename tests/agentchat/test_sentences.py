"""agentchat.sentences: the English sentences the engine, the file readers and the runs write are said in the
reader's language. Every such sentence in the code must be one of its templates: these tests read the code for them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import translation

from agentchat.agent.providers.openai_compatible import HALFWAY, UNREADABLE
from agentchat.sentences import translate
from conversations.runs.manager import STOPPED
from conversations.selectors import SERVER_STOPPED
from tools.documents.detect import CLAIMED, NAMES

BASE = Path(settings.BASE_DIR)
# Where the sentences are written, and the errors (and child-process results) that carry them.
SOURCES = [
    *sorted((BASE / "agentchat" / "agent").rglob("*.py")),
    *sorted((BASE / "tools" / "documents").glob("*.py")),
    BASE / "conversations" / "services" / "attachments.py",
    BASE / "conversations" / "api" / "uploads.py",
]
CARRIERS = {
    "ProviderError",
    "ProviderNotConfigured",
    "DocumentError",
    "Unreadable",
    "because",
    "FileTooLarge",
    "ReadersBusy",
    "TooManyReads",
}


def _sample(node: ast.expr) -> str | None:
    """The sentence a literal or an f-string writes, with "7" for each value; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "7" for part in node.values)
    return None


def written_sentences() -> list[tuple[str, str]]:
    """(where, sentence) for each sentence given to a carrier, returned by `_death`, or sent back by a reader."""
    found = []
    for path in SOURCES:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and node.args:
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                candidates = [node.args[0]] if name in CARRIERS else []
            elif isinstance(node, ast.Tuple) and len(node.elts) == 3:
                first = node.elts[0]
                candidates = [node.elts[1]] if isinstance(first, ast.Constant) and first.value == "Unreadable" else []
            elif isinstance(node, ast.FunctionDef) and node.name == "_death":
                candidates = [item.value for item in ast.walk(node) if isinstance(item, ast.Return) and item.value]
            else:
                continue
            for candidate in candidates:
                if (sentence := _sample(candidate)) is not None:
                    found.append((f"{path.relative_to(BASE)}:{candidate.lineno}", sentence))
    return found


SENTENCES = written_sentences()
NAMED = [HALFWAY, UNREADABLE, STOPPED, SERVER_STOPPED, *NAMES.values(), *CLAIMED.values()]


def test_the_code_is_read_for_its_sentences():
    assert len(SENTENCES) > 60


@pytest.mark.parametrize(("where", "sentence"), SENTENCES, ids=[where for where, _ in SENTENCES])
def test_every_sentence_written_in_the_code_is_said_in_russian(where, sentence):
    with translation.override("ru"):
        assert translate(sentence) != sentence, f"{where}: add it to agentchat/sentences.py and translate it"


@pytest.mark.parametrize("sentence", NAMED)
def test_every_named_sentence_is_said_in_russian(sentence):
    with translation.override("ru"):
        assert translate(sentence) != sentence


def test_a_sentence_keeps_its_values_and_says_the_ones_it_knows():
    sentence = "report.pdf claims to be a PDF but is a Windows program (EXE). Supported: PDF, XLSX."
    with translation.override("ru"):
        assert translate(sentence) == (
            "report.pdf выдаёт себя за другой формат: по имени это PDF-файл, а на деле — программа Windows (EXE). "
            "Поддерживаются: PDF, XLSX."
        )
    with translation.override("en"):
        assert translate(sentence) == sentence


@pytest.mark.parametrize("text", ["", "The provider's own words.", "Error code 7"])
def test_what_it_does_not_know_is_shown_as_written(text):
    with translation.override("ru"):
        assert translate(text) == text
