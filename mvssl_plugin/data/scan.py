"""Unusable image files, found before training by a cheap scan of every file's header.

Why: a zero-byte, non-image or truncated file otherwise stops a run at its first read,
minutes or hours in, and from a loader worker as a traceback. Opening each header with PIL
(size and mode, no pixel decode) and looking for the end-of-image marker in the last bytes
of JPEG and PNG files finds all three for a fraction of a full decode (figures:
``benchmarks/results/file_scan/README.md``; ``python -m mvssl_plugin.data.scan <folder>`` times it).
A file that passes and still fails to decode (pixel data broken behind a valid header) is
named at its first read instead (:class:`CheckedLoader`).

Sizes matter only where images are batched without a resize: solo-learn's CIFAR validation
transform has none, so one image of another size stops the validation at its batch; a
pipeline with ``rrc.enabled: false`` resizes the shorter side only, so images of another
aspect ratio cannot be batched. :func:`odd_sized` names those; elsewhere every size works
(random resized crops upsample small images: a 1 x 1 px training image trains, with the
torchvision pipeline and with DALI).

Standard library, PIL and numpy only (no torch): every data format (torchvision's, DALI, in-memory) calls it.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from PIL import Image, UnidentifiedImageError

from mvssl_plugin.data.imagefolder import duplicate_notice, first_of_each_file, images_under
from mvssl_plugin.data.pixels import to_rgb
from mvssl_plugin.errors import DataError

Size = Tuple[int, int]  # (width, height), PIL's order
#: how far from the end the end-of-image marker may sit (some writers pad a few bytes)
TAIL_BYTES = 64
END_MARKERS = {"JPEG": b"\xff\xd9", "PNG": b"IEND"}
#: files named in full in a message; the rest are counted (and listed through ``notify``)
NAMED_IN_MESSAGE = 5
SKIP_KEY = "data.skip_bad_files"


@dataclass(frozen=True)
class BadFile:
    """A file that cannot be used, and why."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path} ({self.reason})"


@dataclass
class ImageScan:
    """What a scan found: each file's (width, height), None where unreadable, and the bad files."""

    files: List[str]
    sizes: List[Optional[Size]]
    bad: List[BadFile]
    seconds: float


def inspect_file(path: str, decode: bool = False) -> Tuple[Optional[Size], Optional[str]]:
    """(size, None) for a usable image, (None, reason) for one that is not.

    Reads the header and the last :data:`TAIL_BYTES` bytes; ``decode`` decodes every pixel
    too (as the in-memory format does anyway), which finds corrupt data inside a file at
    3x (32 px JPEGs) to 30x (500 px) the cost.
    """
    try:
        length = os.path.getsize(path)
    except OSError as err:
        return None, f"cannot be read: {err.strerror}"
    if length == 0:
        return None, "empty file, 0 bytes"
    try:
        with Image.open(path) as image:
            size, fmt = image.size, image.format
            if size[0] < 1 or size[1] < 1:
                return None, f"{size[0]}x{size[1]} px"
            marker = END_MARKERS.get(fmt)
            if marker is not None:
                image.fp.seek(max(0, length - TAIL_BYTES))
                if marker not in image.fp.read():
                    return None, f"truncated {fmt}: no end-of-image marker"
                image.fp.seek(0)
            if decode:
                to_rgb(image)
    except UnidentifiedImageError:
        return None, "not an image PIL can read"
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        return None, f"cannot be decoded: {type(err).__name__}: {err}"
    return size, None


def _inspect_chunk(paths: Sequence[str], decode: bool) -> List[Tuple[Optional[Size], Optional[str]]]:
    return [inspect_file(path, decode) for path in paths]


def scan_images(files: Sequence[str], threads: int = 2, decode: bool = False, chunk: int = 512) -> ImageScan:
    """Inspects every file (:func:`inspect_file`) on ``threads`` threads.

    Threads rather than processes: the scan is short, mostly waits on the file system on a
    cold cache, and forking a process that holds torch is best avoided. On the 50,000 CIFAR
    JPEGs (warm cache, 2 cores) two threads took 1.05 to 1.22 s, one 1.20 to 1.31 s.
    """
    files = [str(f) for f in files]
    start = time.perf_counter()
    chunks = [files[i : i + chunk] for i in range(0, len(files), chunk)]
    if threads > 1 and len(chunks) > 1:
        with ThreadPoolExecutor(threads) as pool:
            results = [r for part in pool.map(lambda c: _inspect_chunk(c, decode), chunks) for r in part]
    else:
        results = _inspect_chunk(files, decode)
    sizes = [size for size, _ in results]
    bad = [BadFile(path, reason) for path, (_, reason) in zip(files, results) if reason is not None]
    return ImageScan(files, sizes, bad, time.perf_counter() - start)


def odd_sized(scan: ImageScan, same_size: bool = False, same_aspect: bool = False) -> List[BadFile]:
    """Images that cannot be batched with the others: with ``same_size``, those whose size
    differs from the most common one; with ``same_aspect``, those whose aspect ratio does."""
    readable = [(path, size) for path, size in zip(scan.files, scan.sizes) if size is not None]
    if not readable or not (same_size or same_aspect):
        return []
    if same_size:
        common = Counter(size for _, size in readable).most_common(1)[0][0]
        return [
            BadFile(path, f"{w}x{h} px where the others are {common[0]}x{common[1]}: unbatchable (no resize here)")
            for path, (w, h) in readable
            if (w, h) != common
        ]
    common_ratio = Counter(round(w / h, 2) for _, (w, h) in readable).most_common(1)[0][0]
    return [
        BadFile(path, f"{w}x{h} px, aspect {w / h:.2f} where the others have {common_ratio}: unbatchable with rrc off")
        for path, (w, h) in readable
        if round(w / h, 2) != common_ratio
    ]


def bad_files_message(key: str, bad: Sequence[BadFile], total: int, skip_key: Optional[str] = SKIP_KEY) -> str:
    """One line: how many files of ``key`` cannot be used, the first few by name, the fix."""
    named = "; ".join(map(str, bad[:NAMED_IN_MESSAGE]))
    more = f" and {len(bad) - NAMED_IN_MESSAGE} more (listed above)" if len(bad) > NAMED_IN_MESSAGE else ""
    fix = "delete or replace them" + (f", or set {skip_key}=true to go on without them" if skip_key else "")
    if len(bad) == total:
        fix = f"no usable image is left: check that {key} points at the right folder"
    return f"{key}: {len(bad)} of {total} image files cannot be used: {named}{more}: {fix}"


def screen_files(
    files: Sequence[str],
    key: str,
    skip_bad: bool,
    notify: Callable[[str], None] = print,
    same_size: bool = False,
    same_aspect: bool = False,
    threads: int = 2,
    skip_key: Optional[str] = SKIP_KEY,
) -> List[str]:
    """The files of ``key`` (data.train_path / data.val_path) that can be used, in order.

    Raises:
        DataError: naming the bad files and the fix (``skip_key``, the option that skips
            them, when the caller has one), unless ``skip_bad``, in which case they are
            dropped with a printed count (and, when all are bad, still raises).

    A file reached by several paths (a symlink loop, a linked file) is kept at its first
    path only, with one notice (:func:`~mvssl_plugin.data.imagefolder.first_of_each_file`).
    """
    unique, dropped = first_of_each_file([str(f) for f in files])
    if dropped:
        notify(duplicate_notice(key, dropped, len(files)))
    scan = scan_images(unique, threads=threads)
    bad = scan.bad + odd_sized(scan, same_size, same_aspect)
    if not bad:
        return list(scan.files)
    if len(bad) > NAMED_IN_MESSAGE or skip_bad:
        for entry in bad:
            notify(f"bad image file: {entry}")
    if not skip_bad or len(bad) == len(scan.files):
        raise DataError(bad_files_message(key, bad, len(scan.files), skip_key))
    dropped = {entry.path for entry in bad}
    notify(f"{skip_key}=true: left out {len(dropped)} of {len(scan.files)} image files of {key}")
    return [path for path in scan.files if path not in dropped]


class CheckedLoader:
    """An image loader (torchvision's ImageFolder ``loader``) that names the file it fails on.

    A DataLoader worker re-raises an exception in the main process as ``type(msg)`` with the
    worker's traceback as its text: :class:`DataError` takes its message only, so it comes
    back as a DataError (the entry points print its last line, the original message).
    Picklable, for worker processes.
    """

    def __init__(self, loader: Callable) -> None:
        self.loader = loader

    def __call__(self, path: str):
        try:
            return self.loader(path)
        except DataError:
            raise
        except Exception as err:
            raise DataError(
                f"cannot read image {path} ({type(err).__name__}: {err}): delete or replace the file "
                "(the scan before training missed it: its header is valid)"
            ) from None


def measure(root: str, repeats: int = 2, threads: Sequence[int] = (1, 2)) -> None:
    """Prints the scan's cost on an ImageFolder tree (``python -m mvssl_plugin.data.scan ROOT``)."""
    files = images_under(root)
    for n in threads:
        for run in range(repeats):
            scan = scan_images(files, threads=n)
            print(f"{len(files)} files, {n} thread(s), run {run + 1}: {scan.seconds:.2f} s, {len(scan.bad)} bad")
    scan = scan_images(files[:5000], threads=max(threads), decode=True)
    print(f"full decode of 5000 files, {max(threads)} thread(s): {scan.seconds:.2f} s")


if __name__ == "__main__":
    import sys

    measure(sys.argv[1])
