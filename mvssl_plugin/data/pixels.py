"""One decode for every data format: an image file -> 8-bit RGB pixels (PIL and numpy only).

torchvision's loader (``Image.open(path).convert("RGB")``) clips 16-bit, 32-bit and float
samples to 0..255 (a 16-bit PNG comes out near-white), while DALI scales them. Here every
PIL mode has one rule, used by the ``image_folder`` datasets (as their ``loader``), the
in-memory format, and DALI for the files DALI would decode otherwise:

* ``1``, ``L``, ``P``, ``RGB``, ``CMYK``, ``YCbCr``, ...: PIL's ``convert("RGB")``;
  ``RGBA``, ``LA``, ``PA`` and palette/tRNS transparency: the alpha is dropped, colours
  kept as stored (PIL's convert; DALI does the same).
* ``I;16`` (16-bit grey PNG/TIFF): ``v >> 8``, the high byte, which is what PIL already
  gives for 16-bit colour PNGs (DALI rounds ``v / 257`` instead: at most 1 level apart).
* ``I`` (32-bit integer; Pillow's mode for 16-bit PGM and signed 16-bit TIFF too):
  clipped to 0..65535, then ``>> 8``, i.e. read as 16-bit samples.
* ``F`` (32-bit float TIFF): read as 0..1 (torchvision's convention for float images):
  ``round(255 * clip(x, 0, 1))``, NaN as 0.

EXIF orientation is ignored, as torchvision's loader ignores it (DALI is told to, too).

DALI (:func:`dali_reads_as_is`) decodes the original bytes only of JPEGs and of PNGs of
at most 8 bits a sample, where its CPU decoder gives these very pixels (tested per mode
in tests/test_image_modes.py). Every other file (TIFF: DALI fails on modes 1 and I, reads
F and LA wrong and P off by one; 16-bit PNG: rounded instead of shifted; PNM, BMP, WebP,
...) is decoded here and handed to DALI as an uncompressed 8-bit RGB PNG
(:func:`rgb_png_bytes`), which it decodes exactly.
"""

from __future__ import annotations

import io
import os

import numpy as np
from PIL import Image

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_SIGNATURE = b"\xff\xd8\xff"


def to_rgb(image: Image.Image) -> Image.Image:
    """``image`` as 8-bit RGB, by the rules of this module's docstring."""
    mode = image.mode
    if mode.startswith("I;16"):
        grey = (np.asarray(image).astype(np.uint16) >> 8).astype(np.uint8)
    elif mode == "I":
        grey = (np.clip(np.asarray(image), 0, 65535) >> 8).astype(np.uint8)
    elif mode == "F":
        values = np.nan_to_num(np.asarray(image, dtype=np.float32), nan=0.0)
        grey = np.rint(np.clip(values, 0.0, 1.0) * 255.0).astype(np.uint8)
    else:
        return image.convert("RGB")
    return Image.fromarray(grey, "L").convert("RGB")


def load_rgb(path: str | os.PathLike) -> Image.Image:
    """The file at ``path`` as an 8-bit RGB PIL image: the ImageFolder ``loader`` of every format."""
    with open(path, "rb") as handle:  # as torchvision's pil_loader: the result is a new image
        return to_rgb(Image.open(handle))


def dali_reads_as_is(head: bytes | np.ndarray) -> bool:
    """True when DALI's decoder gives :func:`load_rgb`'s pixels for a file starting with
    ``head`` (its first 26 bytes at least): a JPEG, or a PNG of at most 8 bits a sample
    (the bit depth is byte 24, in the IHDR chunk that must come first)."""
    head = bytes(head[:26])
    if head.startswith(JPEG_SIGNATURE):
        return True
    return head.startswith(PNG_SIGNATURE) and len(head) >= 25 and head[24] <= 8


def rgb_png_bytes(path: str | os.PathLike) -> bytes:
    """:func:`load_rgb`'s pixels as an uncompressed 8-bit RGB PNG (lossless, cheap to write)."""
    out = io.BytesIO()
    load_rgb(path).save(out, format="PNG", compress_level=0)
    return out.getvalue()
