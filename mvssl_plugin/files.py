"""Files written whole or not at all, and read back with one-line errors.

Every module that writes a run's records, an export or a report writes through here: a
``.part`` file renamed into place (atomic on POSIX), so a process killed mid-write leaves the
previous complete file, never half of one; a failed write is one line naming the file and the
errno; a file cut short or edited is one line naming it. Standard library only.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from mvssl_plugin.errors import ConfigError, WriteError

PARTIAL_SUFFIX = ".part"  # a file being written; renamed into place once complete


def write_error(path: str | Path, err: OSError) -> WriteError:
    """One line naming the file and the errno (``ENOSPC``, ``EFBIG``...) of a failed write."""
    code = errno.errorcode.get(err.errno, str(err.errno)) if err.errno else "no errno"
    reason = err.strerror or str(err)
    return WriteError(f"could not write {path}: {reason} ({code}); the files written before it are intact")


def check_writable_folder(path: str | Path, setting: str) -> None:
    """That ``path`` is a folder this process may write into, or one it can create: checked
    before any work, so that a run does not end in a traceback at its first write (solo-learn's
    checkpointer after the model is built, a checkpoint after an epoch). Creates nothing.

    Raises:
        ConfigError: one line naming ``setting`` (what the user sets: ``checkpoint.dir=...``,
            ``--out ...``) and the part of ``path`` in the way.
    """
    target = Path(os.path.abspath(path))
    existing = target
    while not existing.exists() and existing.parent != existing:  # below a file, exists() is False
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{setting}: {existing} is a file, so no folder can be made there; choose another folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        verb = "is" if existing == target else f"cannot be created: {existing} is"
        raise ConfigError(
            f"{setting}: {target} {verb} not writable (permissions or a read-only disk); choose another folder"
        )


@contextmanager
def writing(path: str | Path, partial: Optional[str | Path] = None) -> Iterator[None]:
    """Turns an OSError raised while writing ``path`` into a :class:`WriteError` naming it,
    removing the half-written ``partial`` file so that only complete files are left."""
    try:
        yield
    except OSError as err:
        if partial is not None:
            try:
                os.remove(partial)
            except OSError:
                pass
        raise write_error(path, err) from err


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Writes ``text`` to ``path`` through a temporary file renamed into place."""
    path = Path(path)
    partial = path.with_name(path.name + PARTIAL_SUFFIX)
    with writing(path, partial):
        partial.write_text(text)
        os.replace(partial, path)
    return path


def write_json(path: str | Path, data: Any) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2))


def read_json(path: str | Path, default: Any = None) -> Any:
    """The JSON at ``path``, or ``default`` when the file is missing.

    Raises:
        ConfigError: naming the file, when it is not valid JSON (truncated, edited).
    """
    path = Path(path)
    if not path.is_file():
        return default
    try:
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"{path} is not readable JSON ({err}): it was cut short or edited; restore it or remove the run folder"
        ) from err


def write_csv(path: str | Path, rows: List[Dict[str, object]]) -> Path:
    """Writes rows (columns: every key, in first-seen order) atomically."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return atomic_write_text(path, buffer.getvalue())


def read_csv(path: str | Path) -> List[Dict[str, str]]:
    """Rows of a CSV file; none when it is missing."""
    path = Path(path)
    if not path.is_file():
        return []
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))
