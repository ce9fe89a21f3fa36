"""Every image decoded once into one uint8 tensor (N, 3, H, W), the array cached on disk for
the next run, and the check that the data set fits the device before any decoding."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import numpy as np
import torch
from PIL import Image

from mvssl_plugin.data.inmemory.devices import exact_device
from mvssl_plugin.data.pixels import load_rgb
from mvssl_plugin.errors import ConfigError, DataError
from mvssl_plugin.peak_ram_estimate import available_ram

log = logging.getLogger(__name__)

#: Largest square side the images are stored at when no size is shared by half of them and
#: ``memory.size`` is unset (:func:`_stored_shape`).
MIXED_SIZE_DEFAULT = 256
#: Share of the free memory the uint8 data set may take: the rest is the model's (GPU) or
#: the system's and the other processes' (RAM).
FREE_SHARE = {"cuda": 0.5, "cpu": 0.8}
CACHE_VERSION = 2  # 2: one decode for all formats (mvssl_plugin.data.pixels), the stored-shape rule


def memory_bytes_needed(num_images: int, height: int, width: int) -> int:
    """Bytes of the decoded data set: uint8 RGB, (N, 3, H, W)."""
    return int(num_images) * 3 * int(height) * int(width)


def _available_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    return available_ram()


def _gib(num_bytes: float) -> str:
    return f"{num_bytes / 2**30:.2f} GiB"


def check_fits(num_bytes: int, device: str | torch.device, copies: int = 1) -> None:
    """Raises :class:`ConfigError` when ``copies`` data sets of ``num_bytes`` would take
    more than :data:`FREE_SHARE` of the device's free memory (checked before decoding,
    so a run that cannot fit fails in seconds, not after an hour of decoding)."""
    device = exact_device(device)
    share = FREE_SHARE["cuda" if device.type == "cuda" else "cpu"]
    available = _available_bytes(device)
    needed = int(num_bytes) * int(copies)
    if needed > share * available:
        where = f"GPU {device}" if device.type == "cuda" else "RAM"
        times = f" ({copies} processes x {_gib(num_bytes)})" if copies > 1 else ""
        raise ConfigError(
            f"data.format=memory needs {_gib(needed)}{times} for the decoded images, more than "
            f"{share:.0%} of the {_gib(available)} free {where}: lower memory.size, or use data.format=dali "
            "or image_folder instead"
        )


def default_cache_dir(train_path: str | os.PathLike) -> Path:
    """``.mvssl_cache`` beside the training folder (not inside: ImageFolder would list it
    as a class), else ``~/.cache/mvssl`` where that folder is not writable."""
    parent = Path(train_path).resolve().parent
    candidate = parent / ".mvssl_cache"
    try:
        candidate.mkdir(exist_ok=True)
        if os.access(candidate, os.W_OK):
            return candidate
    except OSError:
        pass
    return Path.home() / ".cache" / "mvssl"


def _cache_key(files: Sequence[str], size: Optional[int]) -> str:
    """A hash of the sorted files with their modification times and byte sizes, and the
    stored size: any changed, added or removed file makes a new cache."""
    entries = []
    for path in sorted(files):
        try:
            stat = os.stat(path)
        except OSError as err:
            raise DataError(f"cannot read {path} ({err.strerror}): restore it or delete it from the data set") from None
        entries.append((os.path.abspath(path), stat.st_mtime_ns, stat.st_size))
    payload = json.dumps({"version": CACHE_VERSION, "size": size, "files": entries})
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def _undecodable(path: str, err: Exception) -> DataError:
    return DataError(f"PIL cannot decode {path} ({type(err).__name__}: {err}): delete or replace the file")


def _image_sizes(files: Sequence[str]) -> List[Tuple[int, int]]:
    """Each file's (width, height), from its header."""
    sizes = []
    for path in files:
        try:
            with Image.open(path) as image:
                sizes.append(image.size)
        except Exception as err:
            raise _undecodable(path, err) from None
    return sizes


def _stored_shape(files: Sequence[str], size: Optional[int]) -> Tuple[Tuple[int, int], int, str]:
    """((H, W) every image is stored at, how many images are resized to it, why that shape).

    The shape follows the bulk of the data, never its outliers: ``size`` x ``size`` when
    asked for; else the images' shape when they all share one, or when at least half of
    them do (CIFAR with a few large photos stays 32 x 32); else a square of their median
    shorter side, at most :data:`MIXED_SIZE_DEFAULT`. Images of the stored shape are kept
    pixel for pixel, so their views are exactly what they would be without the others; a
    resized image's views are cut from its stored copy (shorter side scaled to fit, the
    longer side centre-cropped to the stored aspect): no sharper than the stored
    resolution, and missing only the cropped margins. The cache therefore takes
    N x 3 x H x W bytes (:func:`memory_bytes_needed`) whatever a few files' sizes.
    """
    sizes = _image_sizes(files)
    (common, count), *_ = Counter(sizes).most_common(1) or [((size or 1, size or 1), 0)]
    if size is not None:
        shape, why = (int(size), int(size)), "memory.size"
    elif 2 * count >= len(sizes):
        shape, why = (common[1], common[0]), f"the size of {count} of them"
    else:
        side = min(MIXED_SIZE_DEFAULT, int(np.median([min(w, h) for w, h in sizes])))
        shape, why = (side, side), f"no size is shared by half: the median shorter side, at most {MIXED_SIZE_DEFAULT}"
    return shape, sum((h, w) != shape for w, h in sizes), why


def _decode_one(path: str, height: int, width: int) -> np.ndarray:
    """(3, H, W) uint8 (:func:`mvssl_plugin.data.pixels.load_rgb`, every format's decode);
    other sizes are resized (shorter side, bicubic) and centre-cropped, so objects keep
    their aspect ratio."""
    try:
        image = load_rgb(path)
        if image.size != (width, height):
            scale = max(width / image.width, height / image.height)
            resized = (max(width, round(image.width * scale)), max(height, round(image.height * scale)))
            image = image.resize(resized, Image.Resampling.BICUBIC)
            left, top = (resized[0] - width) // 2, (resized[1] - height) // 2
            image = image.crop((left, top, left + width, top + height))
        return np.asarray(image, dtype=np.uint8).transpose(2, 0, 1)
    except DataError:
        raise
    except Exception as err:
        raise _undecodable(path, err) from None


def _save_atomically(array: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            np.save(handle, array)
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        log.warning("could not write the decoded-image cache %s (%s); the next run decodes again", path, err)


def decode_to_uint8(
    files: Sequence[str],
    size: Optional[int],
    cache_dir: Optional[Path],
    *,
    check: Optional[Callable[[Tuple[int, int, int, int]], None]] = None,
    threads: Optional[int] = None,
    notify: Optional[Callable[[str], None]] = None,
) -> torch.Tensor:
    """Every image of ``files`` decoded once, in the given order -> (N, 3, H, W) uint8.

    Images are stored at :func:`_stored_shape`'s shape (the images' own when they share
    one, ``size`` x ``size`` when given); the others are resized to it, and ``notify``
    (when given) is told how many. With ``cache_dir`` the array is kept there
    (``<hash>.npy``, written atomically) and read back by the next call on the same files
    (same paths, modification times and sizes) instead of decoding. ``check`` sees the
    shape before any decoding (e.g. :func:`check_fits`). Raises :class:`DataError` naming
    a file PIL cannot decode.
    """
    files = list(files)
    order = sorted(range(len(files)), key=lambda i: files[i])  # the cache holds the sorted files
    cached = None
    if cache_dir is not None:
        cached = Path(cache_dir) / f"{_cache_key(files, size)}.npy"
        if cached.is_file():
            try:
                array = np.load(cached, mmap_mode="r")
            except (OSError, ValueError) as err:
                log.warning("ignoring the unreadable cache %s (%s)", cached, err)
            else:
                if check is not None:
                    check(tuple(array.shape))
                log.info("decoded images read from %s", cached)
                back = np.empty(len(files), dtype=np.int64)
                back[order] = np.arange(len(files))
                return torch.from_numpy(np.ascontiguousarray(array[back]))
    (height, width), resized, why = _stored_shape(files, size)
    if check is not None:
        check((len(files), 3, height, width))
    if resized and notify is not None:
        notify(
            f"data.format=memory: {resized} of {len(files)} images are resized to the stored {width}x{height} px "
            f"({why}; shorter side to fit, bicubic, centre crop)"
        )
    array = np.empty((len(files), 3, height, width), dtype=np.uint8)

    def decode_into(slot: int) -> None:
        array[slot] = _decode_one(files[order[slot]], height, width)

    log.info("decoding %d images once (%d x %d)", len(files), height, width)
    with ThreadPoolExecutor(max_workers=threads or min(8, os.cpu_count() or 1)) as pool:
        for _ in pool.map(decode_into, range(len(files)), chunksize=256):
            pass
    if cached is not None:
        _save_atomically(array, cached)
    back = np.empty(len(files), dtype=np.int64)
    back[order] = np.arange(len(files))
    return torch.from_numpy(array[back] if order != list(range(len(files))) else array)
