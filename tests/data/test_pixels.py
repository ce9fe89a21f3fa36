"""Every PIL mode gives the same 8-bit RGB pixels in all three data formats (image_folder,
memory, dali), per file format and mode, through each format's own code; the in-memory
cache keeps the bulk's size whatever a few large images."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import NEEDS_DALI, make_image_folder, run_entry, tiny_overrides
from PIL import Image

import mvssl_plugin.data.inmemory.cache as memory_cache
from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.data.inmemory.cache import decode_to_uint8, memory_bytes_needed
from mvssl_plugin.data.inmemory.pretrain import pretrain_memory_loader
from mvssl_plugin.data.pixels import dali_reads_as_is
from mvssl_plugin.data.pretrain_set import pretrain_dataset, pretrain_samples
from mvssl_plugin.errors import DataError

W, H = 13, 11
RNG = np.random.default_rng(0)
RGB = RNG.integers(0, 256, (H, W, 3), dtype=np.uint8)
GREY = RNG.integers(0, 256, (H, W), dtype=np.uint8)
ALPHA = RNG.integers(0, 256, (H, W), dtype=np.uint8)
U16 = RNG.integers(0, 65536, (H, W), dtype=np.uint16)
U16[0, :4] = (0, 127, 65407, 65535)  # the ends of the scale and a >> 8 vs / 257 case
RGB16 = RNG.integers(0, 65536, (H, W, 3), dtype=np.uint16)
I32 = RNG.integers(-5000, 80000, (H, W)).astype(np.int32)  # below 0 and above 16 bits
F32 = (RNG.random((H, W)) * 1.4 - 0.2).astype(np.float32)  # below 0 and above 1
F32[0, 0] = np.nan


def grey3(values: np.ndarray) -> np.ndarray:
    return np.repeat(values[..., None], 3, axis=2)


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def write_png16_rgb(path: Path) -> None:
    """A 16-bit RGB PNG (PIL writes none): PIL reads its high bytes, DALI rounds v / 257."""
    rows = b"".join(b"\x00" + RGB16[y].astype(">u2").tobytes() for y in range(H))
    header = png_chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 16, 2, 0, 0, 0))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + header + png_chunk(b"IDAT", zlib.compress(rows)) + png_chunk(b"IEND", b""))


def write_i16(path: Path) -> None:
    Image.frombytes("I;16", (W, H), U16.astype("<u2").tobytes()).save(path)


def palette() -> Image.Image:
    return Image.fromarray(RGB).quantize(16)


def pil_rgb(path: Path) -> np.ndarray:
    """solo-learn's own decode (torchvision's loader): right for modes of 8 bits or fewer."""
    return np.asarray(Image.open(path).convert("RGB"))


# (file name, writer, expected pixels: a function of the file). For 8-bit modes PIL's
# convert("RGB") is the reference (alpha dropped, palette looked up, PIL's CMYK); for
# 16-bit, 32-bit and float samples the rule of mvssl_plugin.data.pixels, from the samples.
CASES = {
    "1.png": (lambda p: Image.fromarray(GREY > 127).save(p), pil_rgb),
    "L.png": (lambda p: Image.fromarray(GREY).save(p), lambda p: grey3(GREY)),
    "P.png": (lambda p: palette().save(p), pil_rgb),
    "P_transparent.png": (lambda p: palette().save(p, transparency=bytes([0, 128] + [255] * 14)), pil_rgb),
    "RGB.png": (lambda p: Image.fromarray(RGB).save(p), lambda p: RGB),
    "RGBA.png": (lambda p: Image.fromarray(np.dstack([RGB, ALPHA])).save(p), lambda p: RGB),
    "LA.png": (lambda p: Image.fromarray(np.dstack([GREY, ALPHA]), "LA").save(p), lambda p: grey3(GREY)),
    "I16.png": (
        lambda p: Image.frombytes("I;16", (W, H), U16.astype("<u2").tobytes()).save(p),
        lambda p: grey3(U16 >> 8),
    ),
    "RGB16.png": (write_png16_rgb, lambda p: (RGB16 >> 8).astype(np.uint8)),
    "1.tif": (lambda p: Image.fromarray(GREY > 127).save(p), pil_rgb),
    "L.tif": (lambda p: Image.fromarray(GREY).save(p), lambda p: grey3(GREY)),
    "P.tif": (lambda p: palette().save(p), pil_rgb),
    "RGBA.tif": (lambda p: Image.fromarray(np.dstack([RGB, ALPHA])).save(p), lambda p: RGB),
    "LA.tif": (lambda p: Image.fromarray(np.dstack([GREY, ALPHA]), "LA").save(p), lambda p: grey3(GREY)),
    "CMYK.tif": (lambda p: Image.fromarray(RGB).convert("CMYK").save(p), pil_rgb),
    "I16.tif": (
        lambda p: Image.frombytes("I;16", (W, H), U16.astype("<u2").tobytes()).save(p),
        lambda p: grey3(U16 >> 8),
    ),
    "I.tif": (lambda p: Image.fromarray(I32).save(p), lambda p: grey3((np.clip(I32, 0, 65535) >> 8).astype(np.uint8))),
    "F.tif": (
        lambda p: Image.fromarray(F32).save(p),
        lambda p: grey3(np.rint(np.clip(np.nan_to_num(F32), 0, 1) * 255).astype(np.uint8)),
    ),
    # JPEG is lossy: the reference is PIL's decode of the file, and DALI's CPU decoder
    # (libjpeg-turbo, as PIL's) gives it exactly, so no tolerance here either
    "L.jpg": (lambda p: Image.fromarray(GREY).save(p, quality=90), pil_rgb),
    "RGB.jpg": (lambda p: Image.fromarray(RGB).save(p, quality=90), pil_rgb),
    "CMYK.jpg": (lambda p: Image.fromarray(RGB).convert("CMYK").save(p, quality=90), pil_rgb),
    "RGB_exif_rotated.jpg": (lambda p: Image.fromarray(RGB).save(p, exif=rotated_exif()), pil_rgb),
}
MODES = {  # the PIL mode each file opens in: the cases cover the modes they claim to
    "1.png": "1", "P_transparent.png": "P", "LA.png": "LA", "I16.png": "I;16", "RGB16.png": "RGB",
    "1.tif": "1", "P.tif": "P", "LA.tif": "LA", "CMYK.tif": "CMYK", "I16.tif": "I;16", "I.tif": "I",
    "F.tif": "F", "CMYK.jpg": "CMYK",
}  # fmt: skip


def rotated_exif() -> Image.Exif:
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees": ignored by torchvision's loader, so by every format
    return exif


@pytest.fixture(scope="module")
def mode_tree(tmp_path_factory) -> Path:
    """train/class_0 holds one file per case, test/class_0 one RGB image (solo-learn wants both)."""
    root = tmp_path_factory.mktemp("modes")
    folder = root / "train" / "class_0"
    folder.mkdir(parents=True)
    for name, (write, _) in CASES.items():
        write(folder / name)
    for name, mode in MODES.items():
        assert Image.open(folder / name).mode == mode, name
    make_image_folder(root / "test", classes=1, per_class=2, size=W)
    return root


def cfg_for(tree: Path, out: Path, data_format: str):
    data = {"train": str(tree / "train"), "test": str(tree / "test")}
    extra = {"data.format": data_format, "+memory.cache_dir": str(out / "cache")}
    return compose_recipe("mabt_cifar.yaml", "pretrain", tiny_overrides(data, out, **extra))


def expected(path: Path) -> np.ndarray:
    return CASES[path.name][1](path)


def test_image_folder_reads_every_mode_by_the_shared_decode(mode_tree, tmp_path):
    """solo-learn's ImageFolder dataset, as the image_folder format builds it, its loader ours."""
    dataset = pretrain_dataset(cfg_for(mode_tree, tmp_path, "image_folder"), None)
    assert len(dataset) == len(CASES)
    for index, (path, _) in enumerate(dataset.samples):
        _, image, _ = dataset[index]  # solo-learn's (index, image, label)
        assert image.mode == "RGB"
        np.testing.assert_array_equal(np.asarray(image), expected(Path(path)), err_msg=path)


def test_unlabelled_folders_read_by_the_shared_decode(mode_tree, tmp_path):
    """solo-learn's unlabelled folder dataset opens files itself: it is given our loader too."""
    cfg = cfg_for(mode_tree, tmp_path, "image_folder")
    cfg.data.update(dataset="custom", no_labels=True, train_path=str(mode_tree / "train" / "class_0"))
    dataset = pretrain_dataset(cfg, None)
    assert len(dataset) == len(CASES)
    for index, name in enumerate(dataset.images):
        position, image, label = dataset[index]
        assert position == index and label == -1
        np.testing.assert_array_equal(np.asarray(image), expected(dataset.root / name), err_msg=name)


def test_memory_reads_every_mode_by_the_shared_decode(mode_tree, tmp_path):
    cfg = cfg_for(mode_tree, tmp_path, "memory")
    files, targets = pretrain_samples(cfg)
    images = pretrain_memory_loader(cfg, files, targets).images
    assert tuple(images.shape) == (len(CASES), 3, H, W)
    for path, image in zip(files, images):
        np.testing.assert_array_equal(image.permute(1, 2, 0).numpy(), expected(Path(path)), err_msg=path)


def dali_decoded(files: list[str]) -> list[np.ndarray]:
    """The DALI loader's source and decode (``FileBatches`` + ``decode``), on the CPU."""
    from nvidia.dali import fn, pipeline_def

    from mvssl_plugin.data.dali import FileBatches, decode

    source = FileBatches(files, np.arange(len(files)), len(files), remember=1)

    @pipeline_def(batch_size=len(files), num_threads=1, device_id=None)
    def decoding():
        encoded, index = fn.external_source(source=source, num_outputs=2, batch=True)
        return decode(encoded, "cpu"), index

    pipeline = decoding()
    pipeline.build()
    out, _ = pipeline.run()
    return [np.array(out[k]) for k in range(len(files))]


@NEEDS_DALI
def test_dali_reads_every_mode_as_the_shared_decode(mode_tree):
    files = sorted(str(p) for p in (mode_tree / "train" / "class_0").iterdir())
    for path, image in zip(files, dali_decoded(files), strict=True):
        np.testing.assert_array_equal(image, expected(Path(path)), err_msg=path)
    as_is = {Path(p).name for p in files if dali_reads_as_is(Path(p).read_bytes())}
    assert as_is == {n for n in CASES if n.endswith(".jpg")} | {n for n in CASES if n.endswith(".png")} - {
        "I16.png",
        "RGB16.png",
    }, "JPEGs and PNGs of <= 8 bits reach DALI as they are; the rest through the shared decode"


@NEEDS_DALI
def test_dali_names_a_file_the_shared_decode_cannot_read(mode_tree, tmp_path):
    """A TIFF broken behind a valid header (the scan reads headers only) stops at its first read."""
    from mvssl_plugin.data.dali import DaliMultiViewLoader, ViewRecipe

    good = str(mode_tree / "train" / "class_0" / "L.tif")
    broken = tmp_path / "broken.tif"
    Image.fromarray(RGB).save(broken)
    broken.write_bytes(broken.read_bytes()[:-100])  # the last strip bytes
    Image.open(broken)  # the header is whole
    cfg = cfg_for(mode_tree, tmp_path, "dali")
    recipes = [ViewRecipe.from_cfg(cfg.data.dataset, aug) for aug in cfg.augmentations]
    loader = DaliMultiViewLoader([good, str(broken)], [0, 0], recipes, batch_size=2)
    with pytest.raises(DataError, match=str(broken)):
        list(loader)


# ----------------------------------------------------------------------------------------
# The in-memory cache's stored size


def write_pngs(folder: Path, sizes: list[tuple[int, int]]) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for k, (w, h) in enumerate(sizes):
        files.append(str(folder / f"{k:03d}.png"))
        Image.fromarray(np.random.default_rng(k).integers(0, 256, (h, w, 3), dtype=np.uint8)).save(files[-1])
    return files


def test_a_few_large_images_do_not_grow_the_cache(tmp_path):
    files = write_pngs(tmp_path / "images", [(32, 32)] * 20 + [(1200, 900), (40, 30)])
    notices, shapes = [], []
    cache = tmp_path / "cache"
    images = decode_to_uint8(files, None, cache, check=shapes.append, notify=notices.append)
    assert tuple(images.shape) == (22, 3, 32, 32)
    assert notices == [
        "data.format=memory: 2 of 22 images are resized to the stored 32x32 px (the size of 20 of them; "
        "shorter side to fit, bicubic, centre crop)"
    ]
    for k in (0, 19):  # the bulk: pixel for pixel as decoded
        assert torch.equal(images[k], torch.from_numpy(np.asarray(Image.open(files[k]))).permute(2, 0, 1))
    big = Image.open(files[20]).resize((43, 32), Image.Resampling.BICUBIC).crop((5, 0, 37, 32))
    assert torch.equal(images[20], torch.from_numpy(np.asarray(big)).permute(2, 0, 1))
    # the estimate the fit check sees is the array's size, and the cache file's less its header
    (estimate,) = [memory_bytes_needed(n, h, w) for n, _, h, w in shapes]
    (npy,) = cache.glob("*.npy")
    assert estimate == images.numel() == 22 * 3 * 32 * 32 and 0 < npy.stat().st_size - estimate <= 128


def test_without_a_shared_size_the_median_shorter_side_is_stored(tmp_path, monkeypatch):
    files = write_pngs(tmp_path, [(30, 20), (24, 40), (50, 22), (16, 16), (600, 400)])
    assert memory_cache._stored_shape(files, None)[:2] == ((22, 22), 5)
    monkeypatch.setattr(memory_cache, "MIXED_SIZE_DEFAULT", 18)
    assert memory_cache._stored_shape(files, None)[:2] == ((18, 18), 5)
    assert memory_cache._stored_shape(files, 16)[:2] == ((16, 16), 4)


@pytest.mark.slow
def test_memory_entry_point_stores_the_bulk_size(tmp_path):
    """CIFAR-sized images and one large one: the run says it resized one, the cache is 32 px."""
    train = make_image_folder(tmp_path / "data" / "train", per_class=8)
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (900, 1200, 3), dtype=np.uint8)).save(
        train / "class_1" / "large.jpg"
    )
    data = {"train": str(train), "test": str(make_image_folder(tmp_path / "data" / "test", per_class=2))}
    extra = {"data.format": "memory", "+backbone.kwargs.width": 8}
    args = ["--config-name", "mabt_cifar.yaml", *tiny_overrides(data, tmp_path / "runs", **extra)]
    result = run_entry("main_pretrain.py", args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "mvssl: data.format=memory: 1 of 25 images are resized to the stored 32x32 px" in result.stdout
    caches = {p.stat().st_size for p in (tmp_path / "data" / ".mvssl_cache").glob("*.npy")}
    assert len(caches) == 2  # training and validation sets
    assert max(caches) - memory_bytes_needed(25, 32, 32) in range(1, 129)


@pytest.mark.slow
@NEEDS_DALI
def test_dali_entry_point_trains_on_16_bit_and_tiff_images(mode_tree, tmp_path):
    args = tiny_overrides(
        {"train": str(mode_tree / "train"), "test": str(mode_tree / "test")},
        tmp_path / "runs",
        **{"data.format": "dali", "+backbone.kwargs.width": 8, "data.val_path": "null"},
    )
    result = run_entry("main_pretrain.py", ["--config-name", "mabt_cifar.yaml", *args], cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs" / "mabt").iterdir()
    assert json.loads((run_dir / "args.json").read_text())["data"]["format"] == "dali"
