"""The encoder taken away, through the commands as a user calls them: mvssl-export
(main_export.py), load_encoder in a process that cannot import solo-learn, Lightning or Hydra,
torchvision's own ResNet-18, mvssl-embed, mvssl-umap, and every bad input (one line, exit 2,
nothing written)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import assert_one_line, console_script, make_image_folder, run_entry, tiny_overrides

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

#: a fresh process in which solo-learn, Lightning, Hydra and OmegaConf cannot be imported
BLOCKED = (
    "import sys\nfor name in ('solo', 'lightning', 'pytorch_lightning', 'hydra', 'omegaconf'):\n"
    "    sys.modules[name] = None\n"
)


def _pretrain(data: dict, out: Path, backbone: str, extra: tuple = ()) -> Path:
    overrides = tiny_overrides(data, out) + list(extra)
    if backbone == "resnet18":  # torchvision's ResNet-18 takes no width
        overrides = [o for o in overrides if not o.startswith(("backbone.name", "+backbone.kwargs.width"))]
        overrides.append("backbone.name=resnet18")
    result = run_entry("main_pretrain.py", ["--config-name", "mabt_cifar.yaml", *overrides], cwd=out)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (folder,) = [p.parent for p in out.rglob("args.json")]
    return folder


def _export(tiny_cifar, tmp_path_factory, backbone: str, extra: tuple = ()) -> dict:
    """A tiny finished run of ``backbone`` (with the ``extra`` overrides), exported with main_export.py."""
    root = tmp_path_factory.mktemp(f"export_{backbone}")
    run = _pretrain(tiny_cifar, root, backbone, extra)
    out = root / "encoder"
    result = run_entry("main_export.py", [str(run), "--out", str(out)], cwd=root)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return {"run": run, "out": out, "backbone": backbone, "stdout": result.stdout}


@pytest.fixture(scope="module")
def narrow(tiny_cifar, tmp_path_factory) -> dict:
    return _export(tiny_cifar, tmp_path_factory, "narrow_resnet18")


@pytest.fixture(scope="module")
def standard(tiny_cifar, tmp_path_factory) -> dict:
    return _export(tiny_cifar, tmp_path_factory, "resnet18")


@pytest.fixture(scope="module")
def widened(tiny_cifar, tmp_path_factory) -> dict:
    """The narrow ResNet-18 of width 8 with a first stage of 16 channels."""
    return _export(tiny_cifar, tmp_path_factory, "narrow_resnet18", ("+backbone.kwargs.first_stage_width=16",))


@pytest.fixture(params=["narrow", "standard"])
def exported(request) -> dict:
    """Each backbone's export: the plugin's narrow ResNet-18 and torchvision's ResNet-18."""
    return request.getfixturevalue(request.param)


def _refused(main, argv: list, capsys, *fragments: str) -> None:
    """``main(argv)`` (an entry point's function, in this process) ends with exit status 2 and one
    ``mvssl ...`` line on stderr holding every fragment."""
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if line.startswith("mvssl ")]
    assert "Traceback" not in err and all(f in line for f in fragments), line


def _checkpoint_backbone(run: Path) -> torch.nn.Module:
    """The backbone inside the run's Lightning checkpoint, built the way solo-learn's linear
    evaluation builds it (not the export's code)."""
    from omegaconf import OmegaConf

    from mvssl_plugin.registry import register
    from mvssl_plugin.runs import newest_checkpoint
    from mvssl_plugin.train.linear import build_solo_backbone, load_backbone_weights

    register()
    args = json.loads((run / "args.json").read_text())
    cfg = OmegaConf.create(
        {"backbone": args["backbone"], "pretrain_method": args["method"], "data": {"dataset": args["data"]["dataset"]}}
    )
    backbone = build_solo_backbone(cfg)
    load_backbone_weights(backbone, str(newest_checkpoint(run)))
    return backbone.eval()


def test_export_writes_the_backbone_alone_with_its_config_and_card(exported):
    out = exported["out"]
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "model.safetensors"]
    from safetensors.torch import load_file

    weights = load_file(str(out / "model.safetensors"))
    assert all(t.dtype == torch.float32 for t in weights.values())
    assert not any(k.startswith(("projector", "classifier", "fc.")) for k in weights)
    config = json.loads((out / "config.json").read_text())
    arch, train = config["architecture"], config["training"]
    assert arch["name"] == exported["backbone"] and arch["cifar_stem"] is True
    assert arch["width"] == (8 if exported["backbone"] == "narrow_resnet18" else 64)
    assert arch["num_features"] == arch["width"] * 8
    assert config["preprocessing"]["crop"] == 32 and len(config["preprocessing"]["mean"]) == 3
    assert train["method"] == "mabt" and train["views"] == 4 and train["proj_output_dim"] == 16
    assert train["epochs_trained"] == 1 and train["views_seen"] == train["steps"] * 8 * 4 > 0
    assert train["views_trained"] == 4  # all of them: no hard_views
    assert train["lr_tail_epochs"] == 0  # the recipe's constant lr (scheduler.tail_epochs unset)
    assert train["beta"] > 0 and train["plugin_version"] == __import__("mvssl_plugin").__version__
    launches = json.loads((exported["run"] / "run.json").read_text())["launches"]
    assert launches[-1]["plugin_version"] == config["exported_by"]["plugin_version"] == train["plugin_version"]
    assert [a["metric"] for a in config["accuracy"]] == ["val_acc1"]  # the online classifier's
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "\n---\n" in card and "Sodhani" in card
    assert f"{arch['num_features']}]` features" in card


def test_load_encoder_in_a_plain_torch_process_matches_the_checkpoint(exported, tmp_path):
    torch.manual_seed(0)
    batch = torch.randn(6, 3, 32, 32)
    torch.save(batch, tmp_path / "batch.pt")
    standard = ""
    if exported["backbone"] == "resnet18":  # torchvision's own model, as the card says
        standard = (
            "import torchvision\nfrom safetensors.torch import load_file\n"
            "tv = torchvision.models.resnet18(); tv.fc = torch.nn.Identity()\n"
            "tv.conv1 = torch.nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=2, bias=False)\n"
            "tv.maxpool = torch.nn.Identity()\n"
            f"tv.load_state_dict(load_file({str(exported['out'] / 'model.safetensors')!r}), strict=True)\n"
            f"torch.save(tv.eval()(batch), {str(tmp_path / 'tv.pt')!r})\n"
        )
    code = BLOCKED + (
        "import torch\nfrom mvssl_plugin import load_encoder\n"
        f"encoder = load_encoder({str(exported['out'])!r})\n"
        "assert not encoder.training\n"
        f"batch = torch.load({str(tmp_path / 'batch.pt')!r})\n"
        "with torch.no_grad():\n"
        f"    torch.save(encoder(batch), {str(tmp_path / 'features.pt')!r})\n"
        "    " + standard.replace("\n", "\n    ") + "\n"
        "assert not any(m in sys.modules and sys.modules[m] is not None for m in ('solo', 'lightning', 'hydra'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    with torch.no_grad():
        reference = _checkpoint_backbone(exported["run"])(batch)
    features = torch.load(tmp_path / "features.pt")
    assert features.shape == reference.shape
    assert (features - reference).abs().max() < 1e-4
    if standard:
        assert (torch.load(tmp_path / "tv.pt") - reference).abs().max() < 1e-4


def test_a_wider_first_stage_trains_exports_and_loads_as_trained(widened, narrow):
    config = json.loads((widened["out"] / "config.json").read_text())
    arch = config["architecture"]
    assert arch["width"] == 8 and arch["first_stage_width"] == 16 and arch["num_features"] == 64
    assert "first_stage_width" not in json.loads((narrow["out"] / "config.json").read_text())["architecture"]
    card = (widened["out"] / "README.md").read_text()
    assert "\n16, then 8 x (2, 4, 8): " in card and "first_stage_width=16)`" in card
    from mvssl_plugin import load_encoder

    encoder = load_encoder(str(widened["out"]))
    assert encoder.conv1.out_channels == 16 and encoder.layer2[0].conv1.in_channels == 16
    batch = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        assert (encoder(batch) - _checkpoint_backbone(widened["run"])(batch)).abs().max() < 1e-4


def test_embed_gives_one_row_per_image_with_labels_and_the_encoders_features(exported, tmp_path):
    from mvssl_plugin import load_encoder
    from mvssl_plugin.encoder.embed import _Files, find_images, transform_of

    images = make_image_folder(tmp_path / "images", per_class=3, seed=7)
    out = tmp_path / "features.npz"
    result = subprocess.run(
        [
            console_script("mvssl-embed"),
            str(exported["out"]),
            str(images),
            "--out",
            str(out),
            "--batch-size",
            "4",
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "embedding batches" in result.stderr
    saved = np.load(out)
    found = find_images(images)
    assert len(saved["features"]) == len(saved["paths"]) == len(saved["labels"]) == len(found.paths) == 9
    assert list(saved["classes"]) == sorted(p.name for p in Path(images).iterdir())
    assert [saved["classes"][y] for y in saved["labels"]] == [Path(p).parent.name for p in saved["paths"]]
    encoder = load_encoder(exported["out"])
    files = _Files(found.paths, transform_of(encoder.mvssl_config))
    with torch.no_grad():
        expected = encoder(torch.stack([files[i] for i in range(len(files))])).numpy()
    assert np.abs(saved["features"] - expected).max() < 1e-4


def test_umap_draws_train_and_val_on_the_cpu(narrow, tiny_cifar, tmp_path):
    pytest.importorskip("umap")
    out = tmp_path / "umap.png"
    result = subprocess.run(
        [console_script("mvssl-umap"), str(narrow["out"]), tiny_cifar["train"], "--val", tiny_cifar["test"],
         "--out", str(out), "--device", "cpu"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    from PIL import Image

    with Image.open(out) as picture:
        assert picture.size[0] > 1000  # two panels side by side


def test_export_refuses_bad_input_in_one_line_and_writes_nothing(narrow, tmp_path, capsys):
    from mvssl_plugin.cli.encoder import export_main

    run, ckpt = narrow["run"], next(narrow["run"].glob("*.ckpt"))
    # a truncated checkpoint in an otherwise whole run folder
    cut = tmp_path / "cut"
    shutil.copytree(run, cut)
    for c in cut.glob("*.ckpt"):
        c.write_bytes(c.read_bytes()[: c.stat().st_size // 2])
    # a linear-evaluation run: its args.json names the checkpoint it evaluated
    linear = tmp_path / "linear"
    shutil.copytree(run, linear)
    args = json.loads((linear / "args.json").read_text())
    (linear / "args.json").write_text(json.dumps({**args, "pretrained_feature_extractor": str(ckpt)}))
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    # as a user runs it: the script's exit status and its one line
    assert_one_line(
        run_entry("main_export.py", [str(tmp_path / "nowhere"), "--out", str(tmp_path / "o1")], tmp_path),
        2,
        "does not exist",
    )
    cases = [
        ([str(tmp_path), "--out", str(tmp_path / "o2")], "no complete .ckpt"),
        ([str(next(cut.glob("*.ckpt"))), "--out", str(tmp_path / "o3")], "not a complete checkpoint"),
        ([str(linear), "--out", str(tmp_path / "o4")], "linear-evaluation run", str(ckpt)),
        ([str(run), "--out", str(full)], "--force"),
    ]
    for argv, *fragments in cases:
        _refused(export_main, argv, capsys, *fragments)
    assert not any((tmp_path / f"o{i}").exists() for i in range(1, 5))
    assert [p.name for p in full.iterdir()] == ["notes.txt"]
    assert not list(tmp_path.glob(".*partial"))
    # --force replaces the folder whole
    export_main([str(run), "--out", str(full), "--force"])
    assert sorted(p.name for p in full.iterdir()) == ["README.md", "config.json", "model.safetensors"]


def test_embed_and_umap_refuse_bad_input_in_one_line(narrow, tmp_path, capsys):
    from mvssl_plugin.cli.encoder import embed_main, umap_main

    empty = tmp_path / "empty"
    (empty / "cats").mkdir(parents=True)
    (empty / "cats" / "notes.txt").write_text("no image")
    images = make_image_folder(tmp_path / "images", per_class=2)
    taken = tmp_path / "taken.npz"
    taken.write_bytes(b"mine")
    # as a user runs it: the console script's exit status and its one line
    result = subprocess.run(
        [console_script("mvssl-embed"), str(narrow["out"]), str(empty), "--out", str(tmp_path / "a.npz")],
        capture_output=True,
        text=True,
    )
    assert_one_line(result, 2, "holds no images")
    _refused(embed_main, [str(narrow["run"]), str(images), "--out", str(tmp_path / "b.npz")], capsys, "not an exported")
    _refused(embed_main, [str(narrow["out"]), str(images), "--out", str(taken)], capsys, "--force")
    _refused(embed_main, [str(narrow["out"]), str(images), "--out", str(tmp_path / "c.txt")], capsys, ".npz")
    _refused(umap_main, [str(narrow["out"]), str(images), "--out", str(tmp_path / "d.npz")], capsys, "picture")
    assert taken.read_bytes() == b"mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "images", "taken.npz"]


def test_an_export_is_shareable_its_files_as_the_umask_gives_and_no_absolute_path(narrow):
    out, mode = narrow["out"], 0o666 & ~_umask()
    assert {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()} == {
        "README.md": mode,
        "config.json": mode,
        "model.safetensors": mode,
    }
    for name in ("config.json", "README.md"):
        text = (out / name).read_text()
        assert str(narrow["run"].parents[2]) not in text and '"/' not in text, name
    config = json.loads((out / "config.json").read_text())
    assert config["source"]["checkpoint"].endswith(".ckpt") and "/" not in config["source"]["checkpoint"]
    assert (
        config["training"]["train_path"].startswith(".../") and "main_pretrain.py" in config["training"]["commands"][0]
    )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_an_encoder_folder_whose_files_disagree_ends_in_one_line(narrow, tmp_path, capsys):
    from mvssl_plugin import load_encoder
    from mvssl_plugin.cli.encoder import embed_main
    from mvssl_plugin.errors import ConfigError

    wrong = tmp_path / "wrong"
    shutil.copytree(narrow["out"], wrong)
    config = json.loads((wrong / "config.json").read_text())
    config["architecture"]["width"] = 16  # the weights are width 8's
    (wrong / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=r"model.safetensors does not fit config.json's architecture .*width 16.*"):
        load_encoder(wrong)
    images = make_image_folder(tmp_path / "images", per_class=2)
    _refused(embed_main, [str(wrong), str(images), "--out", str(tmp_path / "e.npz")], capsys, "does not fit", "shape")
