"""Bad data and bad runs (issue 12), through the entry points: every class of bad input is
named in one line with its fix and exit status, before work is wasted where it can be
found early, and nothing already written is lost."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import (
    NEEDS_DALI,
    REPO,
    assert_one_line,
    kill_in_second_epoch,
    make_image_folder,
    run_entry,
    tiny_overrides,
)
from PIL import Image

from mvssl_plugin.cli.config_name import compose_recipe, list_recipes
from mvssl_plugin.config.keys import PLUGIN_KEYS, check_keys, is_known, keys_in_source, known_keys
from mvssl_plugin.data.scan import BadFile, inspect_file, odd_sized, scan_images, screen_files
from mvssl_plugin.errors import ConfigError, DataError
from mvssl_plugin.peak_ram import GiB
from mvssl_plugin.runs import RUN_LOG, is_complete_checkpoint, read_json

FORMATS = ["image_folder", pytest.param("dali", marks=NEEDS_DALI), "memory"]


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    """The entry points run here with one torch thread: on a shared 2-core machine two
    OpenMP threads wait on each other, and a width-4 network's batch norm took 24 ms
    instead of 0.06 ms."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


# ------------------------------------------------------------------------------ bad files


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


def pretrain_args(data: dict, out: Path, **extra) -> list[str]:
    return ["--config-name", "mabt_cifar.yaml", *tiny_overrides(data, out, **extra)]


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


# ------------------------------------------------------------------------- a pretrained run


@pytest.fixture(scope="module")
def pretrained(tiny_cifar, tmp_path_factory) -> Path:
    """One finished 1-epoch tiny run (its folder is copied, never changed, by the tests)."""
    out = tmp_path_factory.mktemp("pretrained")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")
        result = run_entry("main_pretrain.py", pretrain_args(tiny_cifar, out), out)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (run_dir,) = (out / "mabt").iterdir()
    return run_dir


def linear_args(data: dict, out: Path, checkpoint: Path | str) -> list[str]:
    overrides = [o for o in tiny_overrides(data, out) if not o.startswith(("method_kwargs", "auto_resume"))]
    return ["--config-name", "linear_cifar.yaml", f"pretrained_feature_extractor={checkpoint}", *overrides]


@pytest.mark.slow
def test_linear_evaluation_scans_its_data(pretrained, tiny_cifar, tmp_path):
    train = copy_tree(tiny_cifar["train"], tmp_path / "train")
    (empty,) = bad_files(train / "class_2")[:1]
    data = {"train": str(train), "test": tiny_cifar["test"]}
    result = run_entry("main_linear.py", linear_args(data, tmp_path, pretrained), tmp_path)
    assert_one_line(
        result, 4, "data error: data.train_path: 3 of 27 image files cannot be used: ", f"{empty} (empty file"
    )


@pytest.mark.slow
def test_truncated_only_checkpoint_is_skipped_and_a_new_run_starts(pretrained, tiny_cifar, tmp_path):
    run_dir = shutil.copytree(pretrained, tmp_path / "mabt" / pretrained.name)
    (ckpt,) = run_dir.glob("*.ckpt")
    with open(ckpt, "r+b") as handle:
        handle.truncate(ckpt.stat().st_size // 2)
    assert not is_complete_checkpoint(ckpt)
    args = pretrain_args(tiny_cifar, tmp_path, **{"auto_resume.enabled": True})
    result = run_entry("main_pretrain.py", args, tmp_path)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert f"mvssl: skipped unreadable checkpoint {ckpt} (truncated or not a checkpoint); it is left in place" in (
        result.stdout
    )
    assert "mvssl: no complete checkpoint of a matching run: starting a new run" in result.stdout
    runs = sorted(p.name for p in (tmp_path / "mabt").iterdir())
    assert len(runs) == 2 and ckpt.exists(), runs  # a new run folder; the broken file left as it was
    (new_dir,) = [tmp_path / "mabt" / name for name in runs if name != run_dir.name]
    assert [is_complete_checkpoint(p) for p in new_dir.glob("*.ckpt")] == [True]


@pytest.mark.slow
def test_killed_launch_is_listed_as_running_and_the_resume_is_a_second_entry(tmp_path):
    root = tmp_path / "data"
    data = {
        "train": str(make_image_folder(root / "train", per_class=24)),
        "test": str(make_image_folder(root / "test")),
    }
    args = pretrain_args(data, tmp_path, max_epochs=3, **{"auto_resume.enabled": True})
    kill_in_second_epoch(args, tmp_path)
    (run_dir,) = (tmp_path / "mabt").iterdir()
    (launch,) = read_json(run_dir / RUN_LOG)["launches"]
    # killed after epoch 0's checkpoint: epoch 1 (or, on a fast machine, 2) was running
    assert launch["status"] == "running" and launch["epochs_completed"] in (1, 2) and not launch["finished"]

    second = run_entry("main_pretrain.py", args, tmp_path)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-3000:]
    killed, resumed = read_json(run_dir / RUN_LOG)["launches"]
    assert killed == launch  # the killed launch's entry is kept as it was
    assert resumed["status"] == "finished" and resumed["epochs_completed"] == 3
    assert [p.name.split("-ep=")[1] for p in run_dir.glob("*.ckpt")] == ["2.ckpt"]


# ------------------------------------------------------------------ evaluation entry points


@pytest.mark.slow
@pytest.mark.parametrize("what", ["file", "empty folder"])
def test_evaluations_on_a_non_checkpoint_say_so_in_one_line(what, tiny_cifar, tmp_path):
    if what == "file":
        target = tmp_path / "notes.ckpt"
        target.write_text("not a checkpoint")
    else:
        target = tmp_path / "empty_run"
        target.mkdir()
    linear = run_entry("main_linear.py", linear_args(tiny_cifar, tmp_path, target), tmp_path)
    assert_one_line(linear, 2, f"pretrained_feature_extractor={str(target)!r}")
    knn_args = ["--pretrained_checkpoint_dir", str(target), "--dataset", "cifar10"]
    knn_args += ["--train_data_path", tiny_cifar["train"], "--val_data_path", tiny_cifar["test"], "--num_workers", "0"]
    knn = run_entry("main_knn.py", knn_args, tmp_path)
    assert_one_line(knn, 2, repr(str(target)))
    assert not (tmp_path / "linear").exists()


# ------------------------------------------------------------------------------- memory


@pytest.mark.slow
def test_memory_check_names_the_batch_and_views_that_fit(tiny_cifar, tmp_path):
    args = pretrain_args(tiny_cifar, tmp_path / "runs", **{"optimizer.batch_size": 100_000})
    line = assert_one_line(run_entry("main_pretrain.py", args, tmp_path), 2, "optimizer.batch_size=100000 with")
    assert re.search(
        r"needs about [\d.]+ GiB .* the largest that fits is optimizer.batch_size=\d+ with data.num_views=4", line
    )
    args = pretrain_args(tiny_cifar, tmp_path / "runs", **{"data.num_views": 100_000})
    line = assert_one_line(run_entry("main_pretrain.py", args, tmp_path), 2, "data.num_views=100000 (100000 x 32 px)")
    assert re.search(r"the largest that fits is data.num_views=\d+ with optimizer.batch_size=8$", line)
    assert not (tmp_path / "runs").exists()


def checked_config(recipe: str, on: str, **overrides):
    from mvssl_plugin.config import set_crop_counts

    cfg = compose_recipe(recipe, "pretrain", [f"{k}={v}" for k, v in overrides.items()])
    cfg.accelerator = on
    cfg.devices = list(range(cfg.devices)) if isinstance(cfg.devices, int) else list(cfg.devices)
    if on == "cpu":
        cfg.precision = "32"
    set_crop_counts(cfg)
    return cfg


@pytest.mark.parametrize("recipe", list_recipes("pretrain"))
def test_every_recipe_fits_an_80_gib_gpu(recipe):
    from mvssl_plugin.train.peak_ram_check import check_peak_ram

    assert check_peak_ram(checked_config(recipe, "gpu"), available=78 * GiB) == []


def test_cpu_recipes_fit_this_machine_and_absurd_ones_do_not():
    from mvssl_plugin.train.peak_ram_check import check_peak_ram

    for recipe in ("mabt_cifar_cpu.yaml", "mavicreg_cifar_cpu.yaml"):
        check_peak_ram(checked_config(recipe, "cpu"), available=16 * GiB)  # 24 GiB machine, some of it taken
    # the tiny test recipes fit in 1.5 GiB
    check_peak_ram(checked_config("mabt_cifar.yaml", "cpu", **dict(o.split("=", 1) for o in TINY)), available=1.5 * GiB)
    with pytest.raises(ConfigError, match=r"data.num_views=64 .* the largest that fits is optimizer.batch_size=\d+"):
        check_peak_ram(checked_config("mabt_cifar.yaml", "cpu", **{"data.num_views": 64}), available=20 * GiB)


TINY = ["backbone.name=narrow_resnet18", "+backbone.kwargs.width=8", "optimizer.batch_size=8"]


@pytest.mark.slow
def test_estimate_is_close_to_a_measured_peak(tiny_cifar, tmp_path):
    """Peak RSS of two training steps in a child process (os.wait4) against the estimate
    (calibrated within -6%..+5% on 11 settings: benchmarks/bench_peak_ram.py)."""
    from mvssl_plugin.peak_ram import estimate_peak
    from mvssl_plugin.train.peak_ram_check import run_shape

    train = make_image_folder(tmp_path / "train", classes=4, per_class=40)
    extra = {"data.val_path": "null", "optimizer.batch_size": 64, "+backbone.kwargs.width": 16}
    extra.update({"checkpoint.enabled": False, "+limit_train_batches": 2, "+num_sanity_val_steps": 0})
    args = pretrain_args({"train": str(train), "test": tiny_cifar["test"]}, tmp_path, **extra)
    shape = run_shape(checked_config("mabt_cifar.yaml", "cpu", **dict(a.split("=", 1) for a in args[2:])))
    child = subprocess.Popen(
        [sys.executable, str(REPO / "main_pretrain.py"), *args],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONWARNINGS="ignore"),
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.returncode == 0
    measured, estimated = usage.ru_maxrss * 1024, estimate_peak(shape).total
    assert 0.85 < estimated / measured < 1.15, (measured / GiB, estimated / GiB)


# ------------------------------------------------------------------------------ unknown keys


def test_shipped_recipes_hold_no_unknown_key():
    from mvssl_plugin.registry import register

    methods = register()
    for kind in ("pretrain", "linear"):
        for recipe in list_recipes(kind):
            cfg = compose_recipe(recipe, kind)
            method = methods.get(cfg.get("method")) if kind == "pretrain" else None
            assert check_keys(cfg, kind, method) == [], recipe


def test_every_key_the_plugin_reads_is_known():
    """Keys the plugin reads by name (``select(cfg, "a.b")``, ``cfg.a.b``) are known, so no
    optional key of ours is ever reported: add a new one to PLUGIN_KEYS."""
    from mvssl_plugin.registry import register

    methods = register()
    known = known_keys("pretrain", methods["mabt"]) | known_keys("pretrain", methods["mavicreg"]) | known_keys("linear")
    read = set()
    for path in (REPO / "mvssl_plugin").rglob("*.py"):
        read |= keys_in_source(path.read_text())
    assert sorted(key for key in read if not is_known(key, known)) == []
    assert set(PLUGIN_KEYS) <= known


@pytest.mark.slow
def test_typos_warn_with_the_nearest_key_and_strict_keys_stops(tiny_cifar, tmp_path):
    from mvssl_plugin.registry import register

    cfg = compose_recipe(
        "mabt_cifar.yaml", "pretrain", ["++method_kwargs.lamda=0.1", "++optimizer.lr_=1", "+foo.bar=2"]
    )
    warnings = check_keys(cfg, "pretrain", register()["mabt"])
    assert [w.split(" is read")[0] for w in warnings] == [
        "warning: foo",
        "warning: method_kwargs.lamda (did you mean method_kwargs.lamb?)",
        "warning: optimizer.lr_ (did you mean optimizer.lr?)",
    ]
    # solo-learn's own methods read their kwargs their own way: those are not checked
    cfg = compose_recipe("mabt_cifar.yaml", "pretrain", ["method=barlow_twins", "+method_kwargs.anything=1"])
    assert check_keys(cfg, "pretrain", register()["barlow_twins"], plugin_method=False) == []
    args = pretrain_args(tiny_cifar, tmp_path / "runs", **{"++optimizer.lr_": 1, "+strict_keys": True})
    assert_one_line(
        run_entry("main_pretrain.py", args, tmp_path),
        2,
        "mvssl config error: optimizer.lr_ (did you mean optimizer.lr?)",
    )


def test_a_worker_traceback_is_printed_as_its_original_line(capsys):
    from mvssl_plugin.cli.report import report_errors

    def failing_in_a_worker(_):
        text = (
            "Caught DataError in DataLoader worker process 0.\nOriginal Traceback (most recent call last):\n"
            '  File "x.py", line 1, in f\nmvssl_plugin.errors.DataError: cannot read image a.jpg (OSError: x): fix'
        )
        raise DataError(text)

    with pytest.raises(SystemExit) as stop:
        report_errors(failing_in_a_worker)(None)
    assert stop.value.code == 4
    assert capsys.readouterr().err == "mvssl data error: cannot read image a.jpg (OSError: x): fix\n"


@pytest.mark.slow
def test_run_json_is_written_at_start(pretrained):
    (launch,) = json.loads((pretrained / RUN_LOG).read_text())["launches"]
    assert launch["status"] == "finished" and launch["command"]
