"""The plugin as solo-learn's own scripts see it once installed: the autoregister hook
(mvssl_plugin_autoregister.py, via mvssl_plugin_autoregister.pth), the recipes in
solo-learn's layout (mvssl-recipes install-solo) and a wheel that runs without the checkout."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO, make_image_folder, run_entry, tiny_overrides
from omegaconf import OmegaConf

from mvssl_plugin.config.views import HIDDEN_CROPS, hide_crop_counts, restore_crop_counts, views_to_crops

SOLO = REPO.parent / "shared" / "solo-learn"
PTH = REPO / "mvssl_plugin_autoregister.pth"
NEEDS_SOLO_TREE = pytest.mark.skipif(not (SOLO / "main_pretrain.py").is_file(), reason=f"no solo-learn tree at {SOLO}")
#: solo-learn's main_pretrain.py on the CPU, shrunk to seconds (its own keys only)
SOLO_TINY = [
    "accelerator=cpu",
    "devices='1'",
    "precision=32",
    "strategy=auto",
    "sync_batchnorm=false",
    "wandb.enabled=false",
    "data.num_workers=0",
    "optimizer.batch_size=8",
    "max_epochs=1",
    "backbone.name=narrow_resnet18",
    "+backbone.kwargs.width=8",
    "auto_resume.enabled=false",
]
#: runs a script with the .pth's folder as a site dir, as an installed plugin would have it
WITH_SITE = (
    "import runpy, site, sys; site.addsitedir(sys.argv[1]); script = sys.argv[2]; "
    "sys.argv = sys.argv[2:]; runpy.run_path(script, run_name='__main__')"
)


@pytest.fixture(scope="module")
def solo_tree(tmp_path_factory):
    """A copy of solo-learn's tree (scripts, main_*.py, solo/), tiny data, and a site dir with the .pth."""
    root = tmp_path_factory.mktemp("solo_native")
    tree = root / "solo-learn"
    shutil.copytree(
        SOLO, tree, ignore=shutil.ignore_patterns("build", "*.egg-info", ".git", "downstream", "__pycache__")
    )
    site_dir = root / "site"
    site_dir.mkdir()
    shutil.copy(PTH, site_dir / PTH.name)
    make_image_folder(root / "data" / "train", classes=5, per_class=8)  # 5: solo-learn reports top-5
    make_image_folder(root / "data" / "val", classes=5, per_class=4, seed=1)
    return root


def run_solo(root: Path, script: str, args: list, hook: bool = True, prelude: str = "") -> subprocess.CompletedProcess:
    """``python <solo tree>/<script> args`` from the tree, the worktree's plugin first on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_SERVICE", "WANDB_DIR")}
    env.update(
        PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore", WANDB_MODE="offline", WANDB_DIR=str(root), OMP_NUM_THREADS="1"
    )
    env["MVSSL_PLUGIN_AUTOREGISTER"] = "1" if hook else "0"
    tree = root / "solo-learn"
    command = [sys.executable, "-c", prelude + WITH_SITE, str(root / "site"), str(tree / script), *args]
    return subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=300)


def data_args(root: Path, out: str) -> list:
    data = root / "data"
    return [
        "data.dataset=custom",
        f"data.train_path={data / 'train'}",
        f"data.val_path={data / 'val'}",
        f"checkpoint.dir={root / out}",
    ]


def args_json(root: Path, out: str) -> dict:
    import json

    (path,) = sorted((root / out).rglob("args.json"))
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def solo_mabt_run(solo_tree) -> Path:
    """solo-learn's barlow.yaml with only ``method: mabt`` changed (and its lamb/scale as given),
    3 views from its own augmentation list via num_crops, through its own main_pretrain.py."""
    cifar = solo_tree / "solo-learn" / "scripts" / "pretrain" / "cifar"
    text = (cifar / "barlow.yaml").read_text().replace('method: "barlow_twins"', 'method: "mabt"')
    (cifar / "barlow_mabt.yaml").write_text(text)
    args = ["--config-path", "scripts/pretrain/cifar/", "--config-name", "barlow_mabt.yaml", *SOLO_TINY]
    args += [*data_args(solo_tree, "runs_barlow"), "augmentations.0.num_crops=2", "+method_kwargs.lamb=auto"]
    result = run_solo(solo_tree, "main_pretrain.py", args)
    assert result.returncode == 0, result.stderr[-3000:]
    (args_file,) = sorted((solo_tree / "runs_barlow").rglob("args.json"))
    return args_file.parent


@pytest.mark.slow
@NEEDS_SOLO_TREE
def test_solo_main_pretrain_runs_mabt_from_its_own_barlow_yaml(solo_tree, solo_mabt_run):
    """lamb: auto resolved by our method; the crop counts as trained, no bookkeeping key left."""
    saved = args_json(solo_tree, "runs_barlow")
    assert saved["method"] == "mabt" and saved["data"]["num_large_crops"] == 3
    assert isinstance(saved["method_kwargs"]["lamb"], float) and HIDDEN_CROPS not in saved["data"]


@pytest.mark.slow
@NEEDS_SOLO_TREE
@pytest.mark.parametrize("hook", [True, False])
def test_solo_main_knn_finds_mabt_through_the_hook(solo_tree, solo_mabt_run, hook):
    """solo-learn's main_knn.py looks the run's method up in its METHODS and loads the checkpoint;
    it then moves images to CUDA (.cuda(), no CPU path), so on this machine it must get that far
    with the hook, and stop at the look-up without it."""
    data = solo_tree / "data"
    args = ["--pretrained_checkpoint_dir", str(solo_mabt_run), "--dataset", "custom", "--batch_size", "8"]
    args += ["--train_data_path", str(data / "train"), "--val_data_path", str(data / "val"), "--num_workers", "0"]
    args += ["--k", "3", "--temperature", "0.1", "--distance_function", "cosine", "--feature_type", "backbone"]
    result = run_solo(solo_tree, "main_knn.py", args, hook=hook)
    assert result.returncode != 0  # no GPU here
    if hook:
        assert "KeyError" not in result.stderr and ".cuda(" in result.stderr, result.stderr[-3000:]
    else:
        assert "KeyError: 'mabt'" in result.stderr, result.stderr[-3000:]


@pytest.mark.slow
@NEEDS_SOLO_TREE
def test_solo_main_linear_evaluates_an_mabt_run_on_the_cpu(solo_tree, solo_mabt_run):
    """solo-learn's own linear evaluation (its imagenet-100 barlow.yaml, CPU keys) on the run's
    checkpoint: the plugin's backbone is found through the hook and the weights load."""
    (ckpt,) = solo_mabt_run.glob("*.ckpt")
    data = solo_tree / "data"
    args = ["--config-path", "scripts/linear/imagenet-100/", "--config-name", "barlow.yaml"]
    args += [a for a in SOLO_TINY if not a.startswith("auto_resume")] + ["auto_resume.enabled=false"]
    args += [
        f"pretrained_feature_extractor='{ckpt}'",
        "pretrain_method=mabt",
        "data.dataset=custom",
        f"data.train_path={data / 'train'}",
        f"data.val_path={data / 'val'}",
        "+data.num_classes=5",
        f"checkpoint.dir={solo_tree / 'runs_linear'}",
        "scheduler.lr_decay_steps=[1]",
    ]
    result = run_solo(solo_tree, "main_linear.py", args)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert list((solo_tree / "runs_linear").rglob("*.ckpt")), "no linear checkpoint"


@pytest.mark.slow
@NEEDS_SOLO_TREE
def test_solo_main_linear_takes_the_stem_and_width_from_a_cifar_run(solo_tree, tiny_cifar):
    """A CIFAR run (3x3 stem, width 8) under solo-learn's imagenet-100 linear YAML with
    data.dataset=custom and no width given: solo-learn alone would build a 7x7 stem of its
    default width and fail on conv1.weight's size; through the hook the run's args.json decides."""
    out = solo_tree / "cifar_run"
    out.mkdir()
    result = run_entry("main_pretrain.py", ["--config-name", "mabt_cifar.yaml", *tiny_overrides(tiny_cifar, out)], out)
    assert result.returncode == 0, result.stderr[-3000:]
    (ckpt,) = out.rglob("*.ckpt")
    data = solo_tree / "data"
    args = ["--config-path", "scripts/linear/imagenet-100/", "--config-name", "barlow.yaml"]
    args += [a for a in SOLO_TINY if not a.startswith(("auto_resume", "+backbone.kwargs.width"))]
    args += [
        "auto_resume.enabled=false",
        f"pretrained_feature_extractor='{ckpt}'",
        "pretrain_method=mabt",
        "data.dataset=custom",
        f"data.train_path={data / 'train'}",
        f"data.val_path={data / 'val'}",
        "+data.num_classes=5",
        f"checkpoint.dir={solo_tree / 'runs_linear_cifar'}",
        "scheduler.lr_decay_steps=[1]",
    ]
    result = run_solo(solo_tree, "main_linear.py", args)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "backbone.kwargs.small_input=True from the pretraining run's args.json" in result.stdout
    assert "backbone.kwargs.width=8" in result.stdout
    # a backbone other than the run's stops in one line naming the value to set
    result = run_solo(solo_tree, "main_linear.py", [*args[:-2], "backbone.name=resnet18", args[-1]])
    assert result.returncode == 2 and "set backbone.name=narrow_resnet18" in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr


@pytest.mark.slow
@NEEDS_SOLO_TREE
def test_with_the_hook_off_solo_learn_does_not_know_the_method(solo_tree):
    cifar = solo_tree / "solo-learn" / "scripts" / "pretrain" / "cifar"
    text = (cifar / "barlow.yaml").read_text().replace('method: "barlow_twins"', 'method: "mabt"')
    (cifar / "barlow_off.yaml").write_text(text)
    args = ["--config-path", "scripts/pretrain/cifar/", "--config-name", "barlow_off.yaml", *SOLO_TINY]
    result = run_solo(solo_tree, "main_pretrain.py", [*args, *data_args(solo_tree, "runs_off")], hook=False)
    assert result.returncode != 0 and "Choose from" in result.stderr and "'mabt'" not in result.stderr


@pytest.mark.slow
@NEEDS_SOLO_TREE
def test_install_solo_recipes_run_under_solo_main_pretrain(solo_tree):
    """mvssl-recipes install-solo, then solo-learn's own script on a copied recipe (m = 4)."""
    from mvssl_plugin.cli.recipes import main

    main(["install-solo", str(solo_tree / "solo-learn")])
    installed = solo_tree / "solo-learn" / "scripts" / "pretrain"
    for folder, names in (("cifar", 8), ("imagenet-100", 4), ("stl10", 4)):
        assert len([*(installed / folder).glob("mabt*.yaml"), *(installed / folder).glob("mavicreg*.yaml")]) == names
    args = ["--config-path", "scripts/pretrain/cifar/", "--config-name", "mavicreg.yaml", *SOLO_TINY]
    result = run_solo(solo_tree, "main_pretrain.py", [*args, *data_args(solo_tree, "runs_recipe")])
    assert result.returncode == 0, result.stderr[-3000:]
    saved = args_json(solo_tree, "runs_recipe")
    assert saved["method"] == "mavicreg" and saved["data"]["num_large_crops"] == 4
    assert [p["num_crops"] for p in saved["augmentations"]] == [2, 2]
    assert isinstance(saved["method_kwargs"]["cov_loss_weight"], float)


@NEEDS_SOLO_TREE
def test_the_plugins_recipes_and_commands_work_from_solo_learns_tree(solo_tree):
    """From inside a solo-learn checkout, whose own scripts/pretrain/ comes first: the plugin's
    --config-name still finds its recipes, and mvssl-recipes lists both and shows the plugin's."""
    from mvssl_plugin.config.recipe_files import PACKAGE_RECIPES

    tree = solo_tree / "solo-learn"
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    recipes = [sys.executable, "-m", "mvssl_plugin.cli.recipes"]
    listing = subprocess.run(recipes, cwd=tree, env=env, capture_output=True, text=True)
    assert listing.returncode == 0, listing.stderr[-2000:]
    assert (
        f"pretrain recipes in {tree / 'scripts' / 'pretrain'}:" in listing.stdout
        and "cifar/barlow.yaml" in listing.stdout
    )
    assert f"pretrain recipes in {PACKAGE_RECIPES / 'pretrain'}:" in listing.stdout
    shown = subprocess.run([*recipes, "show", "mabt_cifar"], cwd=tree, env=env, capture_output=True, text=True)
    assert shown.stdout.strip() == str(PACKAGE_RECIPES / "pretrain" / "cifar10" / "mabt_cifar.yaml"), shown.stderr
    job = run_entry("main_pretrain.py", ["--config-name", "mabt_cifar.yaml", "--cfg", "job"], cwd=tree)
    assert job.returncode == 0 and "method: mabt" in job.stdout, job.stderr[-2000:]


def fake_solo_checkout(root: Path) -> Path:
    """The files ``install-solo`` checks a solo-learn checkout by, nothing else."""
    for folder in ("solo/methods", "scripts/pretrain/cifar", "scripts/pretrain/imagenet-100"):
        (root / folder).mkdir(parents=True)
    (root / "main_pretrain.py").write_text("")
    (root / "solo" / "methods" / "__init__.py").write_text("")
    return root


def write_stl10_binary(root: Path, seed: int = 0) -> Path:
    """torchvision's STL-10 files (stl10_binary/*.bin: uint8 images stored column-major, labels
    1..10), a few images each, as solo-learn's ``dataset: stl10`` reads them."""
    rng = np.random.default_rng(seed)
    folder = root / "stl10_binary"
    folder.mkdir(parents=True)
    for split, count in (("train", 20), ("unlabeled", 12), ("test", 10)):
        rng.integers(0, 256, (count, 3, 96, 96), dtype=np.uint8).tofile(folder / f"{split}_X.bin")
        if split != "unlabeled":
            (np.arange(count) % 10 + 1).astype(np.uint8).tofile(folder / f"{split}_y.bin")
    return root


@pytest.mark.slow
@NEEDS_SOLO_TREE
def test_installed_stl10_recipe_runs_under_solo_main_pretrain(solo_tree):
    """solo-learn has no STL-10 folder: ours ships whole (its 96-px augmentations/ and wandb/), and
    solo-learn's main_pretrain.py trains on it with its own ``dataset: stl10`` loader (torchvision's
    STL-10 files, generated here; their checksum check is the one thing bypassed)."""
    from mvssl_plugin.cli.recipes import main

    main(["install-solo", str(solo_tree / "solo-learn")])
    data = write_stl10_binary(solo_tree / "stl10_data")
    args = ["--config-path", "scripts/pretrain/stl10/", "--config-name", "mabt.yaml", *SOLO_TINY]
    args += [f"data.train_path={data}", f"data.val_path={data}", f"checkpoint.dir={solo_tree / 'runs_stl10'}"]
    bypass = "import torchvision.datasets as d; d.STL10._check_integrity = lambda self: True; "
    result = run_solo(solo_tree, "main_pretrain.py", args, prelude=bypass)
    assert result.returncode == 0, result.stderr[-3000:]
    saved = args_json(solo_tree, "runs_stl10")
    assert (saved["method"], saved["data"]["dataset"], saved["data"]["num_large_crops"]) == ("mabt", "stl10", 4)
    assert [(p["crop_size"], p["num_crops"]) for p in saved["augmentations"]] == [(96, 4)]


def test_solo_layout_stl10_views_are_the_plugins_own():
    """The STL-10 augmentation shipped for solo-learn's layout is the plugin's own, pipeline for pipeline."""
    from mvssl_plugin.config.recipe_files import PACKAGE_RECIPES, SOLO_RECIPES

    ours = OmegaConf.load(PACKAGE_RECIPES / "pretrain" / "augmentations" / "stl10.yaml")
    solo = OmegaConf.load(SOLO_RECIPES / "pretrain" / "stl10" / "augmentations" / "symmetric.yaml")
    strip = lambda pipelines: [{k: v for k, v in p.items() if k != "num_crops"} for p in pipelines]  # noqa: E731
    assert strip(OmegaConf.to_container(ours)) == strip(OmegaConf.to_container(solo))


@pytest.mark.slow
def test_install_solo_refuses_a_folder_that_is_not_solo_learn(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mvssl_plugin.cli.recipes", "install-solo", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0 and "is not a solo-learn checkout" in result.stderr


@pytest.mark.slow
def test_the_pth_imports_neither_torch_solo_nor_the_package_and_switches_off(tmp_path):
    shutil.copy(PTH, tmp_path / PTH.name)
    code = (
        f"import site, sys; site.addsitedir({str(tmp_path)!r}); "
        "heavy = {'torch', 'solo', 'omegaconf', 'hydra', 'mvssl_plugin'}; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy), "
        "[type(f).__name__ for f in sys.meta_path].count('SoloFinder'))"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    on = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    off = subprocess.run(
        [sys.executable, "-c", code], env=dict(env, MVSSL_PLUGIN_AUTOREGISTER="0"), capture_output=True, text=True
    )
    assert on.stdout.split() == ["[]", "1"], on.stderr
    assert off.stdout.split() == ["[]", "0"], off.stderr


@pytest.mark.slow
def test_the_pth_is_silent_once_the_package_is_gone(tmp_path):
    """An editable checkout deleted (or the package removed) leaves the .pth behind: every
    Python start in the environment must still start cleanly, without a traceback."""
    shutil.copy(PTH, tmp_path / PTH.name)
    code = f"import site; site.addsitedir({str(tmp_path)!r}); print('started')"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-S", "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, "started\n", "")


@pytest.mark.slow
def test_importing_the_plugins_methods_first_registers_them_without_a_hang(tmp_path):
    """main_compare.py imports the plugin's methods, which import solo-learn half-way through:
    the hook waits until they are loaded, then registers (it once looped here forever)."""
    shutil.copy(PTH, tmp_path / PTH.name)
    code = (
        f"import site; site.addsitedir({str(tmp_path)!r}); import mvssl_plugin.methods, solo.methods; "
        "print(sorted(set(solo.methods.METHODS) & {'mabt', 'mavicreg', 'mmcr'}))"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONWARNINGS="ignore")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.stdout.split("\n")[-2] == "['mabt', 'mavicreg', 'mmcr']", result.stderr[-2000:]


def test_views_spread_over_solo_pipelines_and_crop_counts_round_trip():
    pipelines = [
        {"crop_size": 32, "num_crops": 1},
        {"crop_size": 32, "num_crops": 1},
        {"crop_size": 16, "num_crops": 2},
    ]
    cfg = OmegaConf.create({"data": {"num_views": 5}, "augmentations": pipelines})
    views_to_crops(cfg)  # m = 5 counts the small pipeline's 2: 3 large views over 2 pipelines
    assert [p.num_crops for p in cfg.augmentations] == [2, 1, 2]
    cfg.data.num_small_views = 3
    views_to_crops(cfg)
    assert [p.num_crops for p in cfg.augmentations] == [1, 1, 3]
    cfg.data.num_large_crops, cfg.data.num_small_crops = 5, 2
    hide_crop_counts(cfg)
    assert cfg.data.num_large_crops == 2
    restore_crop_counts(cfg)
    assert (cfg.data.num_large_crops, cfg.data.num_small_crops) == (5, 2) and HIDDEN_CROPS not in cfg.data


def importable_site_dirs() -> list:
    """The site-packages folders this interpreter imports from: an outer virtualenv's own (which
    ``venv --system-site-packages`` would not see: it reaches the base interpreter's), and the base
    interpreter's or the user's where this environment includes them."""
    return [
        p
        for p in dict.fromkeys(sys.path)
        if p and Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()
    ]


def editable_solo_dir() -> list:
    """solo-learn's checkout where this interpreter has it installed editable (``pip install -e``,
    as its developers do): no site-packages folder holds it, and the inner venv reads none of
    the outer ``.pth`` files or finders that point to it. Empty for a regular install."""
    root = Path(importlib.util.find_spec("solo").origin).resolve().parents[1]
    return [] if root.name in ("site-packages", "dist-packages") else [str(root)]


def venv_seeing_this_interpreters_packages(venv: Path) -> Path:
    """A fresh venv whose own site-packages comes first, then :func:`importable_site_dirs` and
    :func:`editable_solo_dir` (one ``.pth`` of plain paths: their own .pth files, an editable
    checkout's finder among them, stay unread). Returns its python."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    outer = importable_site_dirs() + editable_solo_dir()
    (Path(own) / "outer_site_packages.pth").write_text("".join(f"{p}\n" for p in outer))
    return python


@pytest.mark.slow
def test_the_inner_venv_imports_what_this_interpreter_imports(tmp_path):
    """Inside a virtualenv (how most people install) the wheel test's venv must still import the
    dependencies: once it was made with --system-site-packages and lacked omegaconf there."""
    python = venv_seeing_this_interpreters_packages(tmp_path / "venv")
    code = "import omegaconf, torch, solo, sys; print(sys.prefix)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([str(python), "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == str(tmp_path / "venv")


def built_distribution(kind: str, tmp_path: Path) -> Path:
    """The plugin as a wheel, or as an sdist made from a copy of the checkout's tracked files
    (what a release holds; the sdist's own setup.py then builds the wheel that gets installed)."""
    out = tmp_path / "dist"
    if kind == "wheel":
        command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(REPO), "-w"]
        build = subprocess.run([*command, str(out)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        shutil.rmtree(REPO / "build", ignore_errors=True)
    else:
        tree = tmp_path / "tree"
        tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.split()
        if not tracked:
            pytest.skip("not a git checkout: the sdist is made from the tracked files")
        for name in tracked:
            if (REPO / name).is_file():
                (tree / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, tree / name)
        command = [sys.executable, "setup.py", "-q", "sdist", "-d", str(out)]
        build = subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=300)
    if build.returncode != 0:
        pytest.skip(f"cannot build the {kind} here: {build.stderr.strip().splitlines()[-1:]}")
    (made,) = out.glob("mvssl_plugin-*.whl" if kind == "wheel" else "mvssl[-_]plugin-*.tar.gz")  # setuptools<70: "-"
    if kind == "sdist":
        with tarfile.open(made) as archive:
            names = {Path(n).relative_to(Path(n).parts[0]).as_posix() for n in archive.getnames() if "/" in n}
        assert {"LICENSE", "CHANGELOG.md", "mvssl_plugin_autoregister.pth"} <= names
        assert "scripts/pretrain/cifar10/speedrun_cpu.yaml" in names
    return made


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_wheel_runs_the_headline_recipe_from_an_empty_folder(kind, tmp_path):
    """The wheel alone, or the sdist built into one by pip: recipes as package data, found from
    a folder outside the checkout."""
    made = built_distribution(kind, tmp_path)
    venv = tmp_path / "venv"
    python = venv_seeing_this_interpreters_packages(venv)
    install = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", str(made)]
    subprocess.run(install, check=True, timeout=300)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "WANDB_SERVICE", "WANDB_DIR")}
    env.update(PYTHONWARNINGS="ignore", WANDB_MODE="offline", WANDB_DIR=str(empty), OMP_NUM_THREADS="1")
    where = subprocess.run(
        [str(python), "-c", "import mvssl_plugin, sys; print(mvssl_plugin.__file__, 'torch' in sys.modules)"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
    )
    assert where.stdout.startswith(str(venv)) and where.stdout.split()[-1] == "False", where.stdout + where.stderr
    assert (next(venv.glob("lib/python*/site-packages")) / PTH.name).is_file()
    listing = subprocess.run([str(venv / "bin" / "mvssl-recipes")], cwd=empty, env=env, capture_output=True, text=True)
    assert "cifar10/mabt_cifar.yaml" in listing.stdout and str(venv) in listing.stdout
    solo = fake_solo_checkout(tmp_path / "solo-learn")
    install = subprocess.run(
        [str(venv / "bin" / "mvssl-recipes"), "install-solo", str(solo)],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    assert (solo / "scripts" / "pretrain" / "cifar" / "mabt.yaml").is_file()
    assert (solo / "scripts" / "pretrain" / "stl10" / "augmentations" / "symmetric.yaml").is_file()
    data = tmp_path / "data"
    make_image_folder(data / "train", classes=3, per_class=8)
    make_image_folder(data / "test", classes=3, per_class=4, seed=1)
    from mvssl_plugin.synthetic import tiny_overrides

    args = [
        "--config-name",
        "mabt_cifar.yaml",
        *tiny_overrides({"train": str(data / "train"), "test": str(data / "test")}, empty / "runs"),
    ]
    run = subprocess.run(
        [str(venv / "bin" / "mvssl-pretrain"), *args], cwd=empty, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert sorted((empty / "runs").rglob("*.ckpt"))
