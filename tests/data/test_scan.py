"""The header scan of every data path's image files (data/scan.py): each kind of bad file named,
sizes checked where a batch needs them, skip_bad_files, and the stop before training."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import NEEDS_DALI, assert_one_line, pretrain_args, run_entry, tiny_overrides
from PIL import Image

from mvssl_plugin.data.scan import BadFile, inspect_file, odd_sized, scan_images, screen_files
from mvssl_plugin.errors import DataError
from mvssl_plugin.files import read_json
from mvssl_plugin.runs import RUN_LOG

FORMATS = ["image_folder", pytest.param("dali", marks=NEEDS_DALI), "memory"]


pytestmark = pytest.mark.usefixtures("one_thread")


def write_image(path: Path, size: tuple[int, int] = (32, 32), fmt: str = "JPEG") -> Path:
    pixels = np.random.default_rng(0).integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, format=fmt)
    return path


def truncated(path: Path) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def corrupt_png(path: Path) -> Path:
    """A PNG whose header and end marker are intact and whose pixel data is not: it passes
    the header scan and fails to decode."""
    write_image(path, fmt="PNG")
    data = bytearray(path.read_bytes())
    start = data.index(b"IDAT") + 8
    data[start : start + 32] = bytes(b ^ 0x5A for b in data[start : start + 32])
    path.write_bytes(bytes(data))
    return path


def bad_files(folder: Path) -> list[Path]:
    """A zero-byte .jpg, a text file named .jpg and a truncated JPEG in ``folder``."""
    empty = folder / "empty.jpg"
    empty.write_bytes(b"")
    text = folder / "notes.jpg"
    text.write_text("not an image")
    return [empty, text, truncated(write_image(folder / "cut.jpg"))]


def copy_tree(source: str, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def test_scan_names_each_kind_of_bad_file(tmp_path):
    good = write_image(tmp_path / "good.jpg")
    empty, text, cut = bad_files(tmp_path)
    cut_png = truncated(write_image(tmp_path / "cut.png", fmt="PNG"))
    assert inspect_file(str(good)) == ((32, 32), None)
    assert inspect_file(str(empty)) == (None, "empty file, 0 bytes")
    assert inspect_file(str(text)) == (None, "not an image PIL can read")
    assert inspect_file(str(cut))[1] == "truncated JPEG: no end-of-image marker"
    assert inspect_file(str(cut_png))[1] == "truncated PNG: no end-of-image marker"
    # pixel data broken behind a valid header: only a full decode sees it
    broken = corrupt_png(tmp_path / "broken.png")
    assert inspect_file(str(broken)) == ((32, 32), None)
    assert inspect_file(str(broken), decode=True)[1].startswith("cannot be decoded")
    scan = scan_images([good, empty, text, cut, cut_png, broken], threads=2, chunk=2)
    assert [b.path for b in scan.bad] == [str(p) for p in (empty, text, cut, cut_png)]


def test_sizes_checked_only_where_a_batch_needs_them(tmp_path):
    files = [write_image(tmp_path / f"{i}.jpg") for i in range(3)]
    tiny = write_image(tmp_path / "tiny.jpg", size=(1, 1))
    wide = write_image(tmp_path / "wide.jpg", size=(64, 32))
    scan = scan_images([*files, tiny, wide])
    assert scan.bad == [] and odd_sized(scan) == []
    assert [b.path for b in odd_sized(scan, same_size=True)] == [str(tiny), str(wide)]
    assert [b.path for b in odd_sized(scan, same_aspect=True)] == [str(wide)]


def test_screen_raises_or_skips(tmp_path):
    files = [str(write_image(tmp_path / f"{i}.jpg")) for i in range(3)]
    bad = [str(p) for p in bad_files(tmp_path)]
    with pytest.raises(DataError, match=r"data.train_path: 3 of 6 image files cannot be used: .*empty.jpg \(empty"):
        screen_files(files + bad, "data.train_path", skip_bad=False)
    said = []
    assert screen_files(files + bad, "data.train_path", skip_bad=True, notify=said.append) == files
    assert said[-1] == "data.skip_bad_files=true: left out 3 of 6 image files of data.train_path"
    with pytest.raises(DataError, match="no usable image is left"):
        screen_files(bad, "data.train_path", skip_bad=True)
    assert str(BadFile("a.jpg", "why")) == "a.jpg (why)"


@pytest.mark.slow
@pytest.mark.parametrize("data_format", FORMATS)
def test_bad_training_files_stop_the_run_before_training(data_format, tiny_cifar, tmp_path):
    train = copy_tree(tiny_cifar["train"], tmp_path / "train")
    bad = bad_files(train / "class_1")
    data = {"train": str(train), "test": tiny_cifar["test"]}
    result = run_entry(
        "main_pretrain.py", pretrain_args(data, tmp_path / "runs", **{"data.format": data_format}), tmp_path
    )
    line = assert_one_line(
        result, 4, "mvssl data error: data.train_path: 3 of 27 image files cannot be used: ", "skip_bad_files=true"
    )
    for path, why in zip(bad, ("empty file, 0 bytes", "not an image PIL can read", "truncated JPEG")):
        assert f"{path} ({why}" in line
    assert not (tmp_path / "runs").exists(), "found before any run folder is made"


@pytest.mark.slow
def test_skip_bad_files_nested_folders_and_unknown_keys_are_said_and_the_run_trains(tiny_cifar, tmp_path):
    train = copy_tree(tiny_cifar["train"], tmp_path / "train")
    bad_files(train / "class_0")
    nested = train / "class_2" / "more"
    nested.mkdir()
    for i in range(2):
        write_image(nested / f"n{i}.jpg")
    data = {"train": str(train), "test": tiny_cifar["test"]}
    extra = {"data.skip_bad_files": True, "++method_kwargs.lamda": 0.1, "++optimizer.lr_": 1}
    result = run_entry("main_pretrain.py", pretrain_args(data, tmp_path / "runs", **extra), tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    out = result.stdout
    assert "mvssl: data.skip_bad_files=true: left out 3 of 29 image files of data.train_path" in out
    assert "mvssl: data.train_path: class folder(s) class_2 hold images in sub-folders" in out
    assert "26 images of" in out  # 24 + 2 nested, the 3 bad ones left out
    assert "method_kwargs.lamda (did you mean method_kwargs.lamb?)" in out
    assert "optimizer.lr_ (did you mean optimizer.lr?)" in out


@pytest.mark.slow
def test_decode_failure_at_first_read_names_the_file(tiny_cifar, tmp_path):
    """A file whose header passes the scan fails in a loader worker: the worker's DataError
    comes back to the main process and is printed as its own one line (exit 4)."""
    train = copy_tree(tiny_cifar["train"], tmp_path / "train")
    broken = corrupt_png(train / "class_1" / "broken.png")
    data = {"train": str(train), "test": tiny_cifar["test"]}
    result = run_entry("main_pretrain.py", pretrain_args(data, tmp_path / "runs", **{"data.num_workers": 2}), tmp_path)
    assert_one_line(result, 4, f"mvssl data error: cannot read image {broken} (OSError", "delete or replace the file")
    (run_dir,) = (tmp_path / "runs" / "mabt").iterdir()
    assert read_json(run_dir / RUN_LOG)["launches"][0]["status"] == "failed: DataError"


@pytest.mark.slow
def test_unbatchable_validation_image(tiny_cifar, tmp_path):
    """CIFAR's validation transform does not resize: an image of another size is named."""
    test = copy_tree(tiny_cifar["test"], tmp_path / "test")
    tiny = write_image(test / "class_0" / "tiny.jpg", size=(1, 1))
    data = {"train": tiny_cifar["train"], "test": str(test)}
    result = run_entry("main_pretrain.py", pretrain_args(data, tmp_path / "runs"), tmp_path)
    why = "(1x1 px where the others are 32x32: unbatchable"
    assert_one_line(result, 4, f"data.val_path: 1 of 13 image files cannot be used: {tiny} {why}")


def linear_args(data: dict, out: Path, checkpoint: Path | str) -> list[str]:
    overrides = [o for o in tiny_overrides(data, out) if not o.startswith(("method_kwargs", "auto_resume"))]
    return ["--config-name", "linear_cifar.yaml", f"pretrained_feature_extractor={checkpoint}", *overrides]


@pytest.mark.slow
def test_linear_evaluation_scans_its_data(finished_tiny_run, tiny_cifar, tmp_path):
    train = copy_tree(tiny_cifar["train"], tmp_path / "train")
    (empty,) = bad_files(train / "class_2")[:1]
    data = {"train": str(train), "test": tiny_cifar["test"]}
    result = run_entry("main_linear.py", linear_args(data, tmp_path, finished_tiny_run), tmp_path)
    assert_one_line(
        result, 4, "data error: data.train_path: 3 of 27 image files cannot be used: ", f"{empty} (empty file"
    )
