"""Detect and parse one file: what runs inside the child process (see `sandbox`)."""

from __future__ import annotations

from . import csvfile, image, jsonfile, pdf, xlsx
from .detect import detect
from .exceptions import Unreadable
from .limits import DEFAULT_LIMITS, Limits
from .parsed import Parsed, Source
from .sandbox import OutOfTime, processor_time


def parse_file(path: str, content_path: str, name: str, limits: Limits = DEFAULT_LIMITS) -> Parsed:
    """The file at `path` read whole; what the document tools need later is written to `content_path`."""
    kind = detect(path, name)
    with open(content_path, "wb") as content:
        source = Source(path=path, name=name, content=content, limits=limits)
        if kind == "pdf":
            return pdf.parse(source)  # keeps to its budget page by page, and keeps what it read in time
        seconds = limits.cpu_seconds[kind]
        try:
            with processor_time(seconds):
                if kind == "xlsx":
                    return xlsx.parse(source)
                if kind == "csv":
                    return csvfile.parse(source)
                if kind == "json":
                    return jsonfile.parse(source)
                return image.parse(source, kind)
        except OutOfTime:
            raise Unreadable(
                f"Reading this {kind.upper()} file took more than {seconds:g} seconds of processor time, "
                "so it was stopped."
            ) from None
