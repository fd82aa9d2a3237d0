"""What a parser is given and what it gives back (plain data: it crosses from the child process)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import IO, Any

from .limits import Limits


@dataclass(frozen=True)
class Source:
    path: str
    name: str
    content: IO[bytes]  # where the parser writes the content file
    limits: Limits


@dataclass(frozen=True)
class Parsed:
    kind: str
    # What the model reads first, capped at Limits.text_chars.
    text: str
    # What people see: pages, sheets and their sizes, image dimensions…
    meta: dict[str, Any] = field(default_factory=dict)
    # Where the content file's parts start (content.ContentWriter.index()), or how to read it.
    index: dict[str, Any] = field(default_factory=dict)


class TextBuffer:
    """Text up to a limit; what does not fit is counted, not kept."""

    def __init__(self, limit: int):
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.dropped = 0

    def add(self, text: str) -> None:
        room = self.limit - self.size
        if room <= 0:
            self.dropped += len(text)
            return
        self.parts.append(text[:room])
        self.size += min(len(text), room)
        self.dropped += max(len(text) - room, 0)

    def text(self) -> str:
        body = "".join(self.parts)
        if self.dropped:
            body += f"\n[… {self.dropped:,} more characters are not kept here; the document tools read them.]"
        return body
