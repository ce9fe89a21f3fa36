"""The one helper that writes a benchmark's generated table into a page: the lines between two
marker lines of a README or a docs page are replaced, the rest kept byte for byte."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence


def replace_between(text: str, start: str, end: str, block: Sequence[str]) -> str:
    """``text`` with the lines between the marker lines ``start`` and ``end`` replaced by ``block``."""
    if start not in text or end not in text:
        raise SystemExit(f"no markers {start!r} ... {end!r} to write the table between")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return head + start + "\n" + "\n".join(block) + "\n" + end + tail


def write_table(table: str, path: Path, pages: Sequence[Path], start: str, end: str) -> None:
    """A report's markdown ``table`` into its own file ``path`` and between ``start`` and ``end``
    of each page in ``pages``."""
    path.write_text(table)
    for page in pages:
        page.write_text(replace_between(page.read_text(), start, end, table.rstrip("\n").split("\n")))
