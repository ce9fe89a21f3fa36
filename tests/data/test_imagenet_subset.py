"""ImageNet-100 end to end: the builder on generated ImageNet-shaped trees (both validation
layouts, wrong trees refused in one line), then the ImageNet-100 recipes on the built tree
through the entry point, in each data format; and a two-node torchrun launch on loopback."""

from __future__ import annotations

import csv
import json
import os
import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import NEEDS_DALI, REPO, assert_one_line, run_entry

from mvssl_plugin.data.imagenet100_classes import IMAGENET100_CLASSES

#: every test here starts a subprocess (an entry point, solo-learn's script, DDP workers)
pytestmark = pytest.mark.slow

#: classes of ImageNet-1k outside ImageNet-100, in every generated tree
OTHER_CLASSES = ("n01440764", "n01443537", "n15075141")
SIZES = ((40, 32), (64, 48), (56, 72), (48, 48))


def write_imagenet(root: Path, val_layout: str = "folders", train_per_class: int = 2, seed: int = 0) -> Path:
    """An ImageNet-1k-shaped tree under ``root``: train/<wnid>/<wnid>_<i>.JPEG of several sizes
    for ImageNet-100's classes and a few others; val/ in class folders (``folders``) or flat,
    ILSVRC2012_val_<n>.JPEG, with LOC_val_solution.csv beside the root (``csv``) or a text
    file of wnids in file-name order (``txt``, root/val_labels.txt)."""
    from PIL import Image

    rng = random.Random(seed)
    colours = [tuple(rng.randrange(256) for _ in range(3)) for _ in range(7)]

    def jpeg(path: Path, k: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", SIZES[k % len(SIZES)], colours[k % len(colours)]).save(path, format="JPEG")

    classes = list(IMAGENET100_CLASSES) + list(OTHER_CLASSES)
    k = 0
    for wnid in classes:
        for i in range(train_per_class):
            jpeg(root / "train" / wnid / f"{wnid}_{i + 1}.JPEG", k)
            k += 1
    val_labels = []
    for number, wnid in enumerate(classes, start=1):
        name = f"ILSVRC2012_val_{number:08d}"
        if val_layout == "folders":
            jpeg(root / "val" / wnid / f"{name}.JPEG", k)
        else:
            jpeg(root / "val" / f"{name}.JPEG", k)
            val_labels.append((name, wnid))
        k += 1
    if val_layout == "csv":
        rng.shuffle(val_labels)
        with open(root / "LOC_val_solution.csv", "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["ImageId", "PredictionString"])
            for name, wnid in val_labels:
                writer.writerow([name, f"{wnid} 10 12 30 28 {wnid} 1 2 20 20 "])
    elif val_layout == "txt":
        (root / "val_labels.txt").write_text("".join(f"{wnid}\n" for _, wnid in sorted(val_labels)))
    return root


def build(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONWARNINGS="ignore", PYTHONPATH=path)
    return subprocess.run(
        [sys.executable, "-m", "mvssl_plugin.cli.imagenet100", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def imagenet_trees(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("imagenet")
    return {layout: write_imagenet(root / layout, layout) for layout in ("folders", "csv", "txt")}


def links_of(out: Path) -> dict:
    return {str(path.relative_to(out)): os.readlink(path) for path in sorted(out.glob("*/*/*")) if path.is_symlink()}


@pytest.mark.parametrize("layout", ["folders", "csv", "txt"])
def test_builds_imagenet100_as_links_from_either_validation_layout(layout, imagenet_trees, tmp_path):
    """The 100 classes and only those, every image a link to its original (upper-case .JPEG
    kept), flat validation images filed under the class their label file gives; a second
    run of the same command changes nothing and says so."""
    root = imagenet_trees[layout]
    extra = ["--val-labels", str(root / "val_labels.txt")] if layout == "txt" else []
    out = tmp_path / "imagenet-100"
    result = build("--imagenet", str(root), "--out", str(out), *extra, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"built {out} (100 classes)" in result.stdout
    assert "train 200 images, 2 per class" in result.stdout
    assert "val   100 images, 1 per class" in result.stdout
    assert f"data.train_path={out / 'train'} data.val_path={out / 'val'}" in result.stdout
    for split in ("train", "val"):
        assert sorted(p.name for p in (out / split).iterdir()) == sorted(IMAGENET100_CLASSES)
    links = links_of(out)
    assert len(links) == 300
    for rel, target in links.items():
        split, wnid, name = rel.split("/")
        assert name.endswith(".JPEG") and os.path.isabs(target) and Path(target).is_file()
        if split == "train":
            assert target == str(root / "train" / wnid / name)
        else:  # the generator gives image n of the class list the n-th id
            number = int(name[len("ILSVRC2012_val_") : -len(".JPEG")])
            assert IMAGENET100_CLASSES[number - 1] == wnid
    manifest = json.loads((out / "imagenet100.json").read_text())
    assert manifest["train_images"] == 200 and manifest["val_images"] == 100
    assert manifest["classes"] == list(IMAGENET100_CLASSES)

    again = build("--imagenet", str(root), "--out", str(out), *extra, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "already holds this build, nothing changed" in again.stdout
    assert links_of(out) == links


def test_another_build_is_not_overwritten_without_replace(imagenet_trees, tmp_path):
    out = tmp_path / "imagenet-100"
    assert build("--imagenet", str(imagenet_trees["folders"]), "--out", str(out), cwd=tmp_path).returncode == 0
    before = links_of(out)
    other = build("--imagenet", str(imagenet_trees["csv"]), "--out", str(out), cwd=tmp_path)
    assert_one_line(other, 2, "already holds another tree", "nothing was changed", "--replace")
    assert links_of(out) == before
    replaced = build("--imagenet", str(imagenet_trees["csv"]), "--out", str(out), "--replace", cwd=tmp_path)
    assert replaced.returncode == 0, replaced.stderr
    assert "300 added, 300 removed, 0 kept" in replaced.stdout
    assert all(target.startswith(str(imagenet_trees["csv"])) for target in links_of(out).values())
    # real files are never removed, with --replace either
    (out / "train" / IMAGENET100_CLASSES[0] / "mine.JPEG").write_bytes(b"not a link")
    kept = build("--imagenet", str(imagenet_trees["folders"]), "--out", str(out), "--replace", cwd=tmp_path)
    assert_one_line(kept, 2, "1 real file(s)", "mine.JPEG", "nothing was changed")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    busy = build("--imagenet", str(imagenet_trees["folders"]), "--out", str(tmp_path / "busy"), cwd=tmp_path)
    assert_one_line(busy, 2, "holds other things (notes.txt)")


def _drop_train_class(root: Path) -> None:
    import shutil

    shutil.rmtree(root / "train" / IMAGENET100_CLASSES[7])


def _empty_val_class(root: Path) -> None:
    for path in (root / "val" / IMAGENET100_CLASSES[3]).iterdir():
        path.unlink()


def _label(root: Path, label: str) -> None:
    lines = (root / "LOC_val_solution.csv").read_text().splitlines()
    name, rest = lines[5].split(",", 1)
    lines[5] = f"{name},{label} 1 1 5 5"
    (root / "LOC_val_solution.csv").write_text("\n".join(lines) + "\n")


def _numeric_labels(root: Path) -> None:
    count = len((root / "val_labels.txt").read_text().split())
    (root / "val_labels.txt").write_text("".join(f"{i % 1000 + 1}\n" for i in range(count)))


def _not_imagenet(root: Path) -> None:
    import shutil

    for split in ("train", "val"):
        shutil.rmtree(root / split)
        write_cifar_like(root / split)


def write_cifar_like(folder: Path) -> None:
    from helpers import write_image_folder

    write_image_folder(folder, classes=2, per_class=1, size=8)


WRONG_TREES = {
    "missing class": ("folders", _drop_train_class, [], ["lacks 1 of the 100 classes", IMAGENET100_CLASSES[7]]),
    "empty class": ("folders", _empty_val_class, [], ["hold no images", IMAGENET100_CLASSES[3]]),
    "unknown label": ("csv", lambda r: _label(r, "n09999999"), [], ["n09999999 is not a class of the train folder"]),
    "label not a wnid": ("csv", lambda r: _label(r, "goldfish"), [], ["'goldfish' is not a WordNet id"]),
    "numeric labels": ("txt", _numeric_labels, ["--val-labels", "val_labels.txt"], ["numeric label"]),
    "flat val, no labels": ("txt", lambda r: None, [], ["--val-labels"]),
    "not ImageNet": ("folders", _not_imagenet, [], ["no class folder named by a WordNet id"]),
}


@pytest.mark.parametrize("case", list(WRONG_TREES))
def test_a_wrong_tree_is_refused_in_one_line(case, tmp_path):
    layout, spoil, extra, fragments = WRONG_TREES[case]
    root = write_imagenet(tmp_path / "imagenet", layout, train_per_class=1)
    spoil(root)
    extra = [str(root / arg) if arg.endswith(".txt") else arg for arg in extra]
    out = tmp_path / "out"
    result = build("--imagenet", str(root), "--out", str(out), *extra, cwd=tmp_path)
    assert_one_line(result, 2, *fragments)
    assert not out.exists()


# ----------------------------------------------------------------------------------------
# The ImageNet-100 recipes on the built tree, through the entry point.


@pytest.fixture(scope="module")
def built_imagenet100(imagenet_trees, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("built") / "imagenet-100"
    result = build("--imagenet", str(imagenet_trees["csv"]), "--out", str(out), cwd=out.parent)
    assert result.returncode == 0, result.stderr
    return out


def imagenet100_overrides(data: Path, out_dir: Path, **extra) -> list:
    """The ImageNet-100 recipe shrunk to seconds: 64-px views, width 8, batch 8, one epoch, one CPU process."""
    overrides = {
        "data.train_path": data / "train",
        "data.val_path": data / "val",
        "data.num_workers": 0,
        "backbone.name": "narrow_resnet18",
        "+backbone.kwargs.width": 8,
        "method_kwargs.proj_output_dim": 16,
        "optimizer.batch_size": 8,
        "augmentations.0.crop_size": 64,
        "max_epochs": 1,
        "checkpoint.dir": out_dir,
        "auto_resume.enabled": False,
        "accelerator": "cpu",
        "devices": 1,
    }
    overrides.update(extra)
    return [f"{k}={v}" for k, v in overrides.items()]


@pytest.mark.parametrize(
    "recipe,data_format",
    [
        ("mabt_imagenet100.yaml", "image_folder"),
        ("mavicreg_imagenet100.yaml", "memory"),
        pytest.param("mabt_imagenet100.yaml", "dali", marks=NEEDS_DALI),
    ],
)
def test_imagenet100_recipe_trains_on_the_built_tree(recipe, data_format, built_imagenet100, tmp_path):
    overrides = imagenet100_overrides(built_imagenet100, tmp_path, **{"data.format": data_format})
    args = ["--config-name", recipe, *overrides]
    result = run_entry("main_pretrain.py", args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "4 x 64 px" in result.stdout
    assert f"200 images of {built_imagenet100 / 'train'}" in result.stdout
    method = recipe.split("_")[0]
    (run_dir,) = (tmp_path / method).iterdir()
    args_json = json.loads((run_dir / "args.json").read_text())
    assert args_json["data"]["num_classes"] == 100 and args_json["data"]["format"] == data_format
    assert len(list(run_dir.glob("*.ckpt"))) == 1
    assert "val_acc1" in (run_dir / "metrics.csv").read_text()


def test_memory_format_refuses_a_data_set_that_cannot_fit(built_imagenet100, tmp_path):
    """The decoded set is checked against the free RAM before any decoding: 200 images stored
    at 40,000 px a side would need 894 GiB (the full ImageNet-100 at the default 256 px is
    under 24 GiB; docs/data.md)."""
    extra = {"data.format": "memory", "memory.size": 40000, "memory.cache_dir": tmp_path / "cache"}
    args = ["--config-name", "mabt_imagenet100.yaml", *imagenet100_overrides(built_imagenet100, tmp_path, **extra)]
    result = run_entry("main_pretrain.py", args, cwd=tmp_path)
    assert_one_line(result, 2, "data.format=memory needs 894.07 GiB", "use data.format=dali or image_folder")
    assert not (tmp_path / "mabt").exists() and not (tmp_path / "cache").exists()


# ----------------------------------------------------------------------------------------
# Two nodes: torchrun on loopback.


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_torchrun_two_nodes_on_loopback(tiny_cifar, tmp_path):
    """What docs/many-machines.md's multi-node launch runs: one torchrun per node (--nnodes 2, its
    --node_rank, the master's address and port), each starting one process of the entry point
    with ++num_nodes=2 devices=1; two CPU processes of one run, one checkpoint."""
    from helpers import tiny_overrides

    port = free_port()
    overrides = tiny_overrides(tiny_cifar, tmp_path, strategy="ddp", devices=1, **{"++num_nodes": 2})
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_SERVICE", "WANDB_DIR")}
    env.update(PYTHONWARNINGS="ignore", WANDB_DIR=str(tmp_path), OMP_NUM_THREADS="1")
    launches = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes",
                "2",
                "--nproc_per_node",
                "1",
                "--node_rank",
                str(rank),
                "--master_addr",
                "127.0.0.1",
                "--master_port",
                str(port),
                str(REPO / "main_pretrain.py"),
                "--config-name",
                "mabt_cifar.yaml",
                *overrides,
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for rank in (0, 1)
    ]
    outputs = [launch.communicate(timeout=300)[0] for launch in launches]
    for launch, output in zip(launches, outputs):
        assert launch.returncode == 0, output[-3000:]
    assert "batch          8 per process x 2" in outputs[0]
    assert "cpu, 2 process(es)" in outputs[0]
    (run_dir,) = (tmp_path / "mabt").iterdir()
    args = json.loads((run_dir / "args.json").read_text())
    assert args["num_nodes"] == 2 and args["strategy"] == "ddp"
    # solo-learn's lr scale counts every process of every node: batch x 2 / 256
    assert args["optimizer"]["lr"] == pytest.approx(5e-4 * 8 * 2 / 256)
    (checkpoint,) = run_dir.glob("*.ckpt")
    import torch

    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    assert state["global_step"] == 1  # 24 images over 2 processes: 12 each, one batch of 8


def test_the_builder_imports_no_torch():
    code = (
        "import sys; import mvssl_plugin.cli.imagenet100, mvssl_plugin.data.imagenet_subset; "
        "assert not {'torch', 'solo', 'lightning'} & set(sys.modules), sorted(sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
