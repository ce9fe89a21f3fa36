"""m-view pretraining data held in memory: every image decoded once, views cut in batches.

``data.format: memory`` decodes the whole training set once with PIL into one uint8 tensor
(N, 3, H, W), caches that array on disk for the next run, and keeps it on the training
device (the GPU when training on one, else in RAM). Each step gathers a batch and draws
every view of every image with its own random parameters, as a few batched tensor ops, in
torchvision's order: random resized crop, color jitter, grayscale, blur, solarization,
equalization, flip, normalization. Nothing is decoded or copied to the device per step,
so the data set must fit the device (checked before decoding: :func:`check_fits`).

Which code does what, and why:

* Crop: ours. The box is drawn as torchvision's ``RandomResizedCrop.get_params`` draws it
  (ten tries, area in ``scale``, log-uniform ratio in 3/4..4/3, centred fallback), then
  cut and resized as PIL does (integer crop, bicubic a = -0.5 with PIL's antialiasing
  support when shrinking, rows renormalized inside the crop, the horizontal pass rounded
  before the vertical one): two batched matmuls with per-image weight matrices, equal to
  PIL's pixels up to 1 grey level in < 0.1% of them. kornia's ``RandomResizedCrop`` was
  neither: its ``slice`` mode loops over the batch (11.4 ms for 256 32-px images, 2
  threads, against 1.2 ms here) and its ``resample`` mode maps crop pixel centres corner
  to corner, so a crop w px wide shows w - 1 px of content (a 10-px crop: 19% less area).
* Flip: folded into the horizontal weights (it commutes with every later step).
* Color jitter: :class:`ColorJitterPerImage`, kornia's torchvision-compatible
  ``kornia.enhance`` brightness/contrast/saturation and our :func:`shift_hue` (exactly
  torchvision's HSV shift, 1e-6). kornia's ``ColorJitter`` shares one order of the four
  steps across the batch (torchvision: one per image) and spends most of its time in its
  HSV round trip: 97 ms for 1,024 32-px images at p = 0.8 (1 thread) against 21 ms.
  kornia's ``ColorJiggle`` is not torchvision's jitter (additive brightness): pixel-value
  histogram distance to torchvision 0.12 for brightness alone, 0.10 for all four steps
  (``ColorJitter``: 0.004 and 0.010; noise floor 0.006 and 0.010; 2,000 views each).
* Grayscale, blur, solarization, equalization: ``kornia.augmentation`` modules
  (``RandomGrayscale``: ITU-R 601 luma as PIL; ``RandomGaussianBlur``: sigma 0.1..2.0 px
  as solo-learn's, 23 taps or the largest odd size the crop holds; ``RandomSolarize``
  with threshold 0.5 fixed: the pixels PIL's ``solarize(128)`` inverts; ``RandomEqualize``).
* Normalization: (x - mean) / std with the recipe's numbers (solo-learn's).

kornia draws from torch's global generator, the crop and jitter too: each step runs under
``torch.random.fork_rng`` seeded from (seed, epoch, rank, step), so the stream is
reproducible, a run resumed at an epoch boundary sees exactly the views the uninterrupted
run would, and the caller's random state (CPU and GPU) is left as it was.

Measured against solo-learn's torchvision pipeline on generated 32-px images, 10,000 views
each (``mabt_cifar.yaml``'s augmentation; tests/test_memory.py checks 400 views with
tolerances of about 3 standard errors):

=============================  ===========  ===========  ==========================
statistic                      torchvision  memory       torchvision, other seed
=============================  ===========  ===========  ==========================
crop area fraction, mean / sd  0.497 / .238 0.495 / .239 0.494 / .238
log aspect ratio, mean / sd    +.001 / .158 -.002 / .157 +.001 / .157
view brightness, mean / sd     0.463 / .091 0.468 / .091
view saturation, mean / sd     0.455 / .245 0.453 / .243
share of grey views            0.205        0.201
=============================  ===========  ===========  ==========================

Histogram distances (total variation) memory vs torchvision, with the distance between
two torchvision seeds in brackets: per-view brightness 0.022 (0.013), per-view
saturation 0.016 (0.019), pixel values 0.006 (0.004).

Known differences: the brightness is 0.005 (1.2 grey levels) higher on average, beyond
noise (3.5 standard errors): PIL's blends truncate to uint8 after each colour step (about
-0.5 level each), here all arithmetic is float. PIL also quantizes the hue shift to 1/256
turn and pivots contrast on the rounded grey mean. PIL's blur is three box blurs (edges
extended), kornia's a true Gaussian (edges reflected).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from mvssl_plugin.data.pixels import load_rgb
from mvssl_plugin.data.views import EpochShards, ViewRecipe, process_group, split_over
from mvssl_plugin.errors import ConfigError, DataError
from mvssl_plugin.memory_estimate import available_ram

log = logging.getLogger(__name__)

#: Largest square side the images are stored at when no size is shared by half of them and
#: ``memory.size`` is unset (:func:`_stored_shape`).
MIXED_SIZE_DEFAULT = 256
#: Share of the free memory the uint8 data set may take: the rest is the model's (GPU) or
#: the system's and the other processes' (RAM).
FREE_SHARE = {"cuda": 0.5, "cpu": 0.8}
CACHE_VERSION = 2  # 2: one decode for all formats (mvssl_plugin.data.pixels), the stored-shape rule

# ----------------------------------------------------------------------------------------
# Decoding once, and the cache on disk.


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
    device = _resolve_device(device)
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
    from PIL import Image

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
    from PIL import Image

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


# ----------------------------------------------------------------------------------------
# Batched augmentation.


def _pil_bicubic(t: torch.Tensor, a: float = -0.5) -> torch.Tensor:
    """PIL's bicubic filter (Keys, a = -0.5), support 2."""
    t = t.abs()
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return torch.where(t < 1, near, torch.where(t < 2, far, torch.zeros_like(t)))


def resize_matrix(start: torch.Tensor, length: torch.Tensor, in_size: int, out_size: int, crop: bool) -> torch.Tensor:
    """(B, out_size, in_size) weights resizing the pixels ``[start, start + length)`` of an
    axis to ``out_size`` samples, as PIL's bicubic resize of a cropped image does: output
    pixel i is centred on ``start + (i + 0.5) * length / out_size``, the filter is widened
    by the scale when shrinking (antialiasing), and each row is renormalized over the
    pixels it may use (the crop when ``crop``, as PIL crops first; else the whole axis).

    start, length: (B,) float, in pixels.
    """
    device = start.device
    scale = (length / out_size).unsqueeze(1)  # (B, 1)
    stretch = scale.clamp(min=1.0).unsqueeze(2)  # (B, 1, 1)
    centres = start.unsqueeze(1) + (torch.arange(out_size, device=device, dtype=scale.dtype) + 0.5) * scale
    pixels = torch.arange(in_size, device=device, dtype=scale.dtype) + 0.5  # (in,)
    weights = _pil_bicubic((pixels.view(1, 1, -1) - centres.unsqueeze(2)) / stretch)  # (B, out, in)
    if crop:
        inside = (pixels.view(1, -1) >= start.unsqueeze(1)) & (pixels.view(1, -1) < (start + length).unsqueeze(1))
        weights = weights * inside.unsqueeze(1)
    return weights / weights.sum(dim=2, keepdim=True)


#: Largest table of precomputed crop matrices (bytes) :class:`CropMatrices` keeps per axis.
TABLE_BYTES = 64 * 2**20


class CropMatrices:
    """The resize matrices of every integer crop (start, length) of an axis, computed once
    when they fit :data:`TABLE_BYTES` (CIFAR's 32 -> 32: 4 MiB), so a batch's matrices are
    one gather instead of ~25 elementwise ops over (B, out, in); else computed per batch."""

    def __init__(self, in_size: int, out_size: int, device: torch.device) -> None:
        self.in_size, self.out_size = in_size, out_size
        self.table: Optional[torch.Tensor] = None
        if in_size * (in_size + 1) * out_size * in_size * 4 <= TABLE_BYTES:
            start, length = torch.meshgrid(torch.arange(in_size), torch.arange(in_size + 1), indexing="ij")
            start, length = start.reshape(-1).double(), length.reshape(-1).clamp(min=1).double()
            table = resize_matrix(start, length, in_size, out_size, crop=True)  # (in * (in + 1), out, in)
            self.table = table.float().to(device)

    def __call__(self, start: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        """(B, out, in) for integer-valued (B,) ``start`` and ``length``."""
        if self.table is None:
            return resize_matrix(start, length, self.in_size, self.out_size, crop=True)
        return self.table.index_select(0, (start * (self.in_size + 1) + length).long())


def random_resized_boxes(
    batch: int, height: int, width: int, scale: Tuple[float, float], device: torch.device, tries: int = 10
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """torchvision's ``RandomResizedCrop.get_params`` for a batch: (top, left, h, w), each
    (B,) float holding integers. Ratio log-uniform in 3/4..4/3, the first of ``tries``
    draws that fits, else the centred fallback clamped to the ratio range."""
    area = height * width
    ratio = (3.0 / 4.0, 4.0 / 3.0)
    target = area * (scale[0] + (scale[1] - scale[0]) * torch.rand(batch, tries))
    log_ratio = math.log(ratio[0]) + (math.log(ratio[1]) - math.log(ratio[0])) * torch.rand(batch, tries)
    aspect = torch.exp(log_ratio)
    w = torch.round(torch.sqrt(target * aspect))
    h = torch.round(torch.sqrt(target / aspect))
    fits = (w > 0) & (w <= width) & (h > 0) & (h <= height)
    first = fits.to(torch.int8).argmax(dim=1, keepdim=True)
    found = fits.any(dim=1)
    w, h = w.gather(1, first).squeeze(1), h.gather(1, first).squeeze(1)
    top = torch.floor(torch.rand(batch) * (height - h + 1))
    left = torch.floor(torch.rand(batch) * (width - w + 1))
    in_ratio = width / height
    if in_ratio < ratio[0]:
        fw, fh = width, round(width / ratio[0])
    elif in_ratio > ratio[1]:
        fw, fh = round(height * ratio[1]), height
    else:
        fw, fh = width, height
    h, w = torch.where(found, h, float(fh)), torch.where(found, w, float(fw))
    top = torch.where(found, top, float((height - fh) // 2))
    left = torch.where(found, left, float((width - fw) // 2))
    return tuple(v.to(device) for v in (top, left, h, w))  # type: ignore[return-value]


def _blur_kernel(crop_size: int) -> int:
    """23 taps (BYOL's 10% of 224 px, > 5 sigma at solo-learn's largest sigma 2 px), or the
    largest odd size the crop holds. Not scaled with the crop: solo-learn's sigma is in
    pixels whatever the image size."""
    return min(23, crop_size if crop_size % 2 else crop_size - 1)


def shift_hue(images: torch.Tensor, turns: torch.Tensor) -> torch.Tensor:
    """torchvision's ``adjust_hue`` for a batch, one shift per image: (B, 3, H, W) in [0, 1],
    ``turns`` (B,) in [-0.5, 0.5]. The same HSV hexcone as torchvision's (and kornia's), in
    closed form: the hue h in sextants [0, 6) is shifted, value and chroma C are kept, and
    the channels are ``min + C * clamp(|h - 3| - 1, 2 - |h - 2|, 2 - |h - 4|; 0, 1)``:
    about 15 tensor ops instead of an HSV tensor round trip (3x faster on the CPU)."""
    high, low = images.amax(dim=1), images.amin(dim=1)  # (B, H, W)
    chroma = high - low
    red, green, blue = images.unbind(dim=1)
    # as torchvision's hr + hg + hb: the first maximal channel names the sextant. Selected
    # by lerp with 0/1 weights: torch.where on a random mask is ~10x slower on the CPU
    # (a mispredicted branch per pixel)
    red_first, green_first = (red == high).to(images.dtype), (green == high).to(images.dtype)
    sextant = torch.lerp(
        torch.lerp(4 * chroma + red - green, 2 * chroma + blue - red, green_first), green - blue, red_first
    )
    sextant = sextant / chroma.clamp(min=1e-12) + 6 * turns.view(-1, 1, 1).to(images.dtype)
    sextant = torch.remainder(sextant, 6.0).unsqueeze(1)  # (B, 1, H, W)
    centre, sign, offset = (v.to(images.device, images.dtype) for v in _HUE_PROFILE)
    weight = (sextant - centre).abs_().mul_(sign).add_(offset).clamp_(0.0, 1.0)  # (B, 3, H, W)
    return weight.mul_(chroma.unsqueeze(1)).add_(low.unsqueeze(1))


#: per channel (R, G, B): |h - centre| * sign + offset, the hexcone's piecewise-linear profile
_HUE_PROFILE = tuple(torch.tensor(v).view(1, 3, 1, 1) for v in ([3.0, 2.0, 4.0], [1.0, -1.0, -1.0], [-1.0, 2.0, 2.0]))


class ColorJitterPerImage:
    """torchvision's ``RandomApply([ColorJitter(b, c, s, h)], p)`` for a batch: each image
    with probability ``p`` gets its own factors and its own order of the four steps (kornia's
    ``ColorJitter`` shares one order across the batch). Brightness, contrast and saturation
    are kornia's torchvision-compatible ``kornia.enhance`` functions; hue is
    :func:`shift_hue`. Each step runs once per (stage, step) on the images due for it."""

    def __init__(self, brightness: float, contrast: float, saturation: float, hue: float, p: float) -> None:
        from kornia import enhance

        around_one = [(max(0.0, 1.0 - v), 1.0 + v) for v in (brightness, contrast, saturation)]
        self.ranges = around_one + [(-hue, hue)]
        self.low = torch.tensor([low for low, _ in self.ranges])
        self.spread = torch.tensor([high - low for low, high in self.ranges])
        self.steps: List[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = [
            enhance.adjust_brightness_accumulative,
            enhance.adjust_contrast_with_mean_subtraction,
            enhance.adjust_saturation_with_gray_subtraction,
            shift_hue,
        ]
        self.active = [k for k, (low, high) in enumerate(self.ranges) if low != high]  # torchvision skips the rest
        self.p = p

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        batch, device = images.shape[0], images.device
        factors = (self.low + self.spread * torch.rand(batch, 4)).to(device)  # (B, 4)
        order = torch.rand(batch, 4).argsort(dim=1).to(device)  # (B, 4): a uniform permutation per image
        chosen = (torch.rand(batch) < self.p).to(device)
        out = images.clone()
        for stage in range(4):
            for step in self.active:
                which = torch.nonzero(chosen & (order[:, stage] == step)).squeeze(1)
                if which.numel():  # index_select/index_copy_: far cheaper than x[which] on the CPU
                    changed = self.steps[step](out.index_select(0, which), factors[which, step]).clamp_(0.0, 1.0)
                    out.index_copy_(0, which, changed)
        return out


class BatchAugment:
    """One view of every image of a batch following one :class:`ViewRecipe`, each image
    with its own random parameters. Randomness comes from torch's global generator (CPU):
    seed it, under ``torch.random.fork_rng``, for a reproducible stream."""

    def __init__(self, recipe: ViewRecipe) -> None:
        import kornia.augmentation as K

        self.recipe = recipe
        steps: List[Callable[[torch.Tensor], torch.Tensor]] = []
        if recipe.jitter_prob > 0:
            steps.append(
                ColorJitterPerImage(
                    recipe.brightness, recipe.contrast, recipe.saturation, recipe.hue, recipe.jitter_prob
                )
            )
        if recipe.grayscale_prob > 0:
            steps.append(K.RandomGrayscale(p=recipe.grayscale_prob))
        if recipe.blur_prob > 0:
            kernel = _blur_kernel(recipe.crop_size)
            steps.append(K.RandomGaussianBlur((kernel, kernel), (0.1, 2.0), p=recipe.blur_prob))
        if recipe.solarization_prob > 0:
            steps.append(K.RandomSolarize(thresholds=0.0, additions=0.0, p=recipe.solarization_prob))
        if recipe.equalization_prob > 0:
            steps.append(K.RandomEqualize(p=recipe.equalization_prob))
        self.colour_steps = steps
        self._norm: dict = {}
        self._crops: dict = {}

    def _crop_matrices(self, in_size: int, device: torch.device) -> CropMatrices:
        key = (in_size, device)
        if key not in self._crops:
            self._crops[key] = CropMatrices(in_size, self.recipe.crop_size, device)
        return self._crops[key]

    def _normalization(self, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
        if device not in self._norm:
            mean = torch.tensor(self.recipe.mean, device=device).view(1, 3, 1, 1)
            std = torch.tensor(self.recipe.std, device=device).view(1, 3, 1, 1)
            self._norm[device] = (mean, std)
        return self._norm[device]

    def _resize_then_centre_crop(self, batch: int, axis: int, resized: int, device: torch.device) -> torch.Tensor:
        """(B, S, axis) weights of PIL's resize of the whole axis to ``resized`` (torchvision's
        ``int()`` of the longer side), then torchvision's centred crop of S of them."""
        key = (axis, resized, device)
        if key not in self._crops:
            scale = axis / resized
            offset = round((resized - self.recipe.crop_size) / 2)
            start = torch.tensor([offset * scale], dtype=torch.float64)
            length = torch.tensor([self.recipe.crop_size * scale], dtype=torch.float64)
            self._crops[key] = resize_matrix(start, length, axis, self.recipe.crop_size, crop=False).float().to(device)
        return self._crops[key].expand(batch, -1, -1)

    def crop_and_flip(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) uint8 -> (B, 3, S, S) float in [0, 1]: random resized crop (or
        resize + centre crop), then the horizontal flip, as two batched matmuls. Like PIL,
        the horizontal pass is rounded to uint8 values before the vertical one, so the crop
        is PIL's to the grey level (fixed-point rounding aside)."""
        batch, _, height, width = images.shape
        size, device = self.recipe.crop_size, images.device
        if self.recipe.rrc:
            top, left, h, w = random_resized_boxes(batch, height, width, self.recipe.scale, device)
            wy = self._crop_matrices(height, device)(top, h)
            wx = self._crop_matrices(width, device)(left, w)
        else:  # torchvision's Resize(crop_size) keeps the aspect ratio; a centre crop makes views stackable
            short = min(height, width)
            wy, wx = (
                self._resize_then_centre_crop(batch, axis, int(size * axis / short), device) for axis in (height, width)
            )
        if self.recipe.flip_prob > 0:
            flip = (torch.rand(batch) < self.recipe.flip_prob).to(device)
            wx = torch.where(flip.view(-1, 1, 1), wx.flip(1), wx)
        channels = 3 * batch
        x = torch.bmm(images.float().reshape(batch, 3 * height, width), wx.transpose(1, 2))  # (B, 3H, S)
        x = x.clamp_(0.0, 255.0).round_().view(channels, height, size)
        wy = wy.unsqueeze(1).expand(batch, 3, size, height).reshape(channels, size, height)
        x = torch.bmm(wy, x).view(batch, 3, size, size)  # contiguous, unlike einsum's
        return x.clamp_(0.0, 255.0).round_().div_(255.0)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) uint8 on any device -> (B, 3, S, S) float32, normalized."""
        x = self.crop_and_flip(images)
        for step in self.colour_steps:
            x = step(x)
        mean, std = self._normalization(x.device)
        return x.sub_(mean).div_(std)


def step_seed(seed: int, epoch: int, rank: int, step: int) -> int:
    """A well-mixed 63-bit seed for one step's augmentations."""
    return int(
        np.random.SeedSequence([int(seed), int(epoch), int(rank), int(step)]).generate_state(2, np.uint64)[0] >> 1
    )


#: Largest float batch (bytes) one augmentation call works on: the views of one recipe go
#: through together (B x views images) up to this size, so each of the ~50 tensor ops runs
#: once per recipe instead of once per view.
CALL_BYTES = 256 * 2**20


def seeded_views(augments: Sequence[Tuple[BatchAugment, int]], images: torch.Tensor, seed: int) -> List[torch.Tensor]:
    """Every view of ``images`` (B, 3, H, W) uint8: each ``BatchAugment`` ``num_crops``
    times -> list of (B, 3, S, S) float. Drawn from torch's generators seeded with ``seed``
    inside ``fork_rng``: reproducible, and the caller's global random state (CPU and the
    images' GPU) is left as it was."""
    devices = [images.device.index or 0] if images.device.type == "cuda" else []
    batch, _, height, width = images.shape
    views: List[torch.Tensor] = []
    with torch.random.fork_rng(devices=devices):
        # seed only the generators in play (torch.manual_seed would reseed every GPU, and
        # fork_rng restores the forked ones only)
        torch.default_generator.manual_seed(seed)
        for index in devices:
            torch.cuda.default_generators[index].manual_seed(seed)
        for augment, crops in augments:
            per_view = batch * 3 * max(height * width, augment.recipe.crop_size**2) * 4
            together = max(1, min(crops, CALL_BYTES // per_view))
            for first in range(0, crops, together):
                count = min(together, crops - first)
                stacked = images if count == 1 else images.repeat(count, 1, 1, 1)  # (count x B, 3, H, W)
                views.extend(augment(stacked).split(batch))
    return views


# ----------------------------------------------------------------------------------------
# The Lightning-facing loader.


def _resolve_device(device: str | torch.device) -> torch.device:
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def _moved(images: torch.Tensor, device: str | torch.device) -> torch.Tensor:
    """``images`` on ``device`` (a bare ``cuda``: the process's current GPU), copied only if elsewhere."""
    target = _resolve_device(device)
    return images if images.device == target else images.to(target)


class MemoryMultiViewLoader:
    """An iterable Lightning trains from like a DataLoader: batches are solo-learn's
    ``[indexes (B,) long, [view_1 (B, 3, S, S) float, ..., view_m], targets (B,) long]``,
    ``drop_last`` as its loader; views on ``device``, indexes and targets on the CPU.

    Args:
        images: (N, 3, H, W) uint8, the decoded data set (:func:`decode_to_uint8`).
        targets: (N,) class indexes (-1 without labels).
        recipes: the augmentation pipelines, in the order the views are returned.
        batch_size: images per process and step.
        device: where the images live and views are computed; a bare ``cuda`` means the
            process's current GPU when iterating (Lightning sets it per rank by then).
        seed: base seed of the image order and the augmentations.
        shard: split the images over processes (false in view-parallel runs, where every
            process holds the same images).
        world_size: the processes the run is configured for (for ``len`` before the
            process group exists; checked against it when iterating).
        rank: this process's rank, for tests; None reads it from torch.distributed.
    """

    def __init__(
        self,
        images: torch.Tensor,
        targets: Sequence[int] | torch.Tensor,
        recipes: Sequence[ViewRecipe],
        batch_size: int,
        device: str | torch.device = "cpu",
        seed: int = 0,
        shard: bool = True,
        world_size: int = 1,
        rank: Optional[int] = None,
    ) -> None:
        if images.dtype != torch.uint8 or images.dim() != 4 or images.shape[1] != 3:
            raise ValueError(f"images must be (N, 3, H, W) uint8, got {tuple(images.shape)} {images.dtype}")
        self.targets = torch.as_tensor(targets, dtype=torch.long).cpu()
        if len(self.targets) != len(images):
            raise ValueError(f"{len(images)} images but {len(self.targets)} targets")
        self.images = images
        self.device = device
        self.recipes = list(recipes)
        self.augments = [(BatchAugment(recipe), recipe.num_crops) for recipe in self.recipes]
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.shard = shard
        self.world_size = world_size if shard else 1
        self.rank = rank
        self.sampler = EpochShards(len(images), self.seed)
        torch_device = torch.device(device)
        if torch_device.type == "cpu" or torch_device.index is not None:
            self._place()

    def _place(self) -> torch.Tensor:
        """The images on the device, moved there once."""
        self.images = _moved(self.images, self.device)
        return self.images

    def __len__(self) -> int:
        return self.sampler.shard_size(self.world_size) // self.batch_size

    def _rank_and_world(self) -> Tuple[int, int]:
        group = process_group() if self.rank is None else (self.rank, self.world_size)
        return split_over(group, self.shard, self.world_size, "memory loader")

    def __iter__(self) -> Iterator[List[Any]]:
        images = self._place()
        rank, world = self._rank_and_world()
        epoch = self.sampler.epoch
        order = torch.from_numpy(self.sampler.indices(rank if self.shard else 0, world))
        for step in range(len(self)):
            index = order[step * self.batch_size : (step + 1) * self.batch_size]
            batch = images.index_select(0, index.to(images.device))
            views = seeded_views(self.augments, batch, step_seed(self.seed, epoch, rank, step))
            yield [index, views, self.targets[index]]


# ----------------------------------------------------------------------------------------
# From a composed config.


def _training_device(cfg: DictConfig) -> str:
    accelerator = str(OmegaConf.select(cfg, "accelerator", default="cpu"))
    return "cuda" if accelerator in ("gpu", "cuda", "auto") and torch.cuda.is_available() else "cpu"


def pretrain_memory_loader(cfg: DictConfig, files: Sequence[str], targets: Sequence[int]) -> MemoryMultiViewLoader:
    """The in-memory loader a composed pretraining config asks for: decodes (or reads the
    cache of) ``files`` after checking the data set fits the training device.

    Optional keys: ``memory.size`` (store every image at size x size), ``memory.cache_dir``
    (default :func:`default_cache_dir` of ``data.train_path``).
    """
    from mvssl_plugin.config import world_size

    device = _training_device(cfg)
    world = world_size(cfg)
    view_parallel = bool(cfg.method_kwargs.get("view_parallel", False))
    size = OmegaConf.select(cfg, "memory.size", default=None)
    cache_dir = OmegaConf.select(cfg, "memory.cache_dir", default=None)
    cache = Path(cache_dir) if cache_dir else default_cache_dir(cfg.data.train_path)
    # CPU: every process of this node holds its copy in the same RAM; GPU: one per device
    nodes = int(OmegaConf.select(cfg, "num_nodes", default=1) or 1)
    copies = 1 if device == "cuda" else max(1, world // nodes)

    def fits(shape: Tuple[int, int, int, int]) -> None:
        check_fits(memory_bytes_needed(shape[0], shape[2], shape[3]), device, copies)

    images = decode_to_uint8(
        files, None if size is None else int(size), cache, check=fits, notify=lambda text: print(f"mvssl: {text}")
    )
    return MemoryMultiViewLoader(
        images,
        targets,
        [ViewRecipe.from_cfg(cfg.data.dataset, aug) for aug in cfg.augmentations],
        batch_size=int(cfg.optimizer.batch_size),
        device=device,
        seed=int(cfg.seed),
        shard=not view_parallel,
        world_size=world,
    )


# ----------------------------------------------------------------------------------------
# The fast probe's feature pass.


def eval_recipe(dataset: str) -> Optional[Tuple[ViewRecipe, int]]:
    """(augmented recipe, image size) of solo-learn's linear-evaluation transforms for
    ``dataset``, read off the transform objects solo-learn builds (its train transform:
    random resized crop + flip + normalize; its val transform: normalize, at most a resize
    to the same square size); None where the val transform does more (the ImageNet
    pipeline's resize of the shorter side + centre crop), which the in-memory format does
    not serve."""
    from solo.data.classification_dataloader import prepare_transforms
    from torchvision import transforms as T

    t_train, t_val = prepare_transforms(dataset)
    train_steps = {type(step): step for step in t_train.transforms}
    rrc, norm = train_steps.get(T.RandomResizedCrop), train_steps.get(T.Normalize)
    size = int(rrc.size[0]) if rrc is not None else None
    square = ((size, size), [size, size])
    plain_ok = all(
        isinstance(step, (T.ToTensor, T.Normalize)) or (isinstance(step, T.Resize) and step.size in square)
        for step in t_val.transforms
    )
    known = {T.RandomResizedCrop, T.RandomHorizontalFlip, T.ToTensor, T.Normalize}
    if rrc is None or norm is None or not plain_ok or set(train_steps) - known:
        return None
    flip = train_steps.get(T.RandomHorizontalFlip)
    recipe = ViewRecipe(
        crop_size=size,
        num_crops=1,
        rrc=True,
        scale=(float(rrc.scale[0]), float(rrc.scale[1])),
        jitter_prob=0.0,
        brightness=0.0,
        contrast=0.0,
        saturation=0.0,
        hue=0.0,
        grayscale_prob=0.0,
        blur_prob=0.0,
        solarization_prob=0.0,
        equalization_prob=0.0,
        flip_prob=float(flip.p) if flip is not None else 0.0,
        mean=tuple(float(v) for v in norm.mean),
        std=tuple(float(v) for v in norm.std),
    )
    return recipe, size


def probe_recipes(dataset: str) -> Tuple[ViewRecipe, int]:
    """:func:`eval_recipe`, or a ConfigError naming the fix where the format does not serve ``dataset``."""
    found = eval_recipe(dataset)
    if found is None:
        raise ConfigError(
            f"data.format=memory in the fast probe: solo-learn's {dataset} evaluation transforms resize or crop "
            "the test images; the in-memory probe serves cifar10, cifar100 and stl10: use data.format=image_folder"
        )
    return found


class MemoryEvalLoader:
    """``(images (B, 3, S, S) float, labels (B,))`` batches of a decoded labelled set, in
    its order: each image as solo-learn's linear-evaluation train transform makes it
    (``augment=True``: random resized crop + flip + normalize, new draws on every pass) or
    as its val transform does (normalized only).

    Pass ``p`` draws from seed (seed, p, 0, batch) (:func:`step_seed`), so a probe is
    reproducible and its passes differ. ``device``: where the images move before the first
    batch (a bare ``cuda``: the process's current GPU then), None to keep them where they
    are. ``shard``: each process of a torch.distributed job takes every world-th image from
    its rank on (pretraining's online validation under DDP)."""

    def __init__(
        self,
        images: torch.Tensor,
        labels: Sequence[int] | torch.Tensor,
        recipe: ViewRecipe,
        augment: bool,
        batch_size: int = 256,
        seed: int = 0,
        device: Optional[str | torch.device] = None,
        shard: bool = False,
    ) -> None:
        if images.shape[-2:] != (recipe.crop_size, recipe.crop_size):
            raise ValueError(f"images are {tuple(images.shape[-2:])}, the recipe wants {recipe.crop_size} px")
        self.images = images
        self.labels = torch.as_tensor(labels, dtype=torch.long).cpu()
        if len(self.labels) != len(images):
            raise ValueError(f"{len(images)} images but {len(self.labels)} labels")
        self.augment = BatchAugment(recipe) if augment else None
        self.recipe = recipe
        self.batch_size = int(batch_size)
        self.seed = int(seed)
        self.device = device
        self.shard = shard
        self.passes = 0

    def _rows(self) -> slice:
        rank, world = process_group() if self.shard else (0, 1)
        return slice(rank, None, world)

    def __len__(self) -> int:
        return -(-len(self.labels[self._rows()]) // self.batch_size)

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        if self.device is not None:
            self.images = _moved(self.images, self.device)
        rows = self._rows()
        images, labels = self.images[rows], self.labels[rows]
        mean = torch.tensor(self.recipe.mean, device=images.device).view(1, 3, 1, 1)
        std = torch.tensor(self.recipe.std, device=images.device).view(1, 3, 1, 1)
        this_pass, self.passes = self.passes, self.passes + 1
        for step, first in enumerate(range(0, len(images), self.batch_size)):
            batch = images[first : first + self.batch_size]
            if self.augment is None:
                x = batch.float().div_(255.0).sub_(mean).div_(std)
            else:
                (x,) = seeded_views([(self.augment, 1)], batch, step_seed(self.seed, this_pass, 0, step))
            yield x, labels[first : first + self.batch_size]


def _decoded_labelled_set(cfg: DictConfig, key: str, dataset, size: int, device: str | torch.device):
    """(uint8 images, labels) of an ImageFolder dataset of solo-learn's, decoded at ``size``
    (cached beside the data path ``key`` names, or in ``memory.cache_dir``) after checking
    they fit ``device``."""
    from mvssl_plugin.data.folders import dataset_files, dataset_labels

    files, labels = dataset_files(dataset), dataset_labels(dataset)
    if files is None or labels is None:
        raise ConfigError(f"{key}: data.format=memory reads ImageFolder trees: use data.format=image_folder")
    cache_dir = OmegaConf.select(cfg, "memory.cache_dir", default=None)
    cache = Path(cache_dir) if cache_dir else default_cache_dir(OmegaConf.select(cfg, key))

    def fits(shape: Tuple[int, int, int, int]) -> None:
        check_fits(memory_bytes_needed(shape[0], shape[2], shape[3]), device)

    notify = lambda text: print(f"mvssl: {key}: {text}")  # noqa: E731
    return decode_to_uint8(files, size, cache, check=fits, notify=notify), labels


def probe_memory_loaders(
    cfg: DictConfig, train_set, test_set, device: torch.device
) -> Tuple[MemoryEvalLoader, MemoryEvalLoader, MemoryEvalLoader]:
    """(augmented train, plain test, augmented test) loaders of the fast probe with
    ``data.format: memory``: the files of solo-learn's datasets (the same fraction and
    screened files as the image_folder path), decoded once at the evaluation size (cached
    beside each data path, or in ``memory.cache_dir``) and placed on ``device``."""
    recipe, size = probe_recipes(str(cfg.data.dataset))
    train_x, train_y = _decoded_labelled_set(cfg, "data.train_path", train_set, size, device)
    test_x, test_y = _decoded_labelled_set(cfg, "data.val_path", test_set, size, device)
    train_x, test_x = train_x.to(device), test_x.to(device)
    seed = int(cfg.seed)
    return (
        MemoryEvalLoader(train_x, train_y, recipe, augment=True, seed=seed),
        MemoryEvalLoader(test_x, test_y, recipe, augment=False, seed=seed),
        MemoryEvalLoader(test_x, test_y, recipe, augment=True, seed=seed + 1),
    )


def val_memory_loader(cfg: DictConfig, val_set) -> Optional[MemoryEvalLoader]:
    """Pretraining's online validation with ``data.format: memory``: ``val_set`` (solo-learn's,
    screened; a ``Subset`` of it with ``data.val_fraction``) decoded once and normalized on
    the training device, as solo-learn's val transform would; under DDP each process
    validates its share. None where :func:`eval_recipe` does not serve the dataset."""
    from torch.utils.data import Subset

    found = eval_recipe(str(cfg.data.dataset))
    if found is None:
        return None
    recipe, size = found
    rows = None
    if isinstance(val_set, Subset):
        val_set, rows = val_set.dataset, list(val_set.indices)
    device = _training_device(cfg)
    images, labels = _decoded_labelled_set(cfg, "data.val_path", val_set, size, device)
    if rows is not None:
        images, labels = images[torch.as_tensor(rows)], [labels[i] for i in rows]
    return MemoryEvalLoader(
        images, labels, recipe, augment=False, batch_size=int(cfg.optimizer.batch_size), device=device, shard=True
    )
