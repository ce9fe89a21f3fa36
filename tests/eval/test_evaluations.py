"""Evaluation: effective rank, the fast probe, offline kNN, training-time signals and
``compare``, through the entry points and YAML on tiny generated data."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import torch
from helpers import run_entry, tiny_overrides

from mvssl_plugin.cli.config_name import compose_recipe
from mvssl_plugin.config import VICREG_SLOT, resolve_beta
from mvssl_plugin.eval.compare import pareto_front
from mvssl_plugin.eval.probe import ProbeSettings, patch_accuracy, train_probe
from mvssl_plugin.eval.rank import rankme
from mvssl_plugin.train.trainer import run_tags


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


# ---- pure pieces ----------------------------------------------------------------------


def test_rankme_counts_used_dimensions():
    torch.manual_seed(0)
    full = torch.randn(2048, 32)
    assert 28 < rankme(full) <= 32
    assert rankme(full * 100) == pytest.approx(rankme(full), rel=1e-6), "scale-free"
    collapsed = torch.randn(2048, 1) @ torch.randn(1, 32)
    assert rankme(collapsed) < 1.01
    half = torch.cat([torch.randn(2048, 16), torch.zeros(2048, 16)], dim=1)
    assert 14 < rankme(half) <= 16
    with pytest.raises(ValueError, match=r"\(N, d\)"):
        rankme(torch.randn(8))


def test_probe_learns_separable_features_and_averages_patches():
    torch.manual_seed(0)
    centers = torch.randn(4, 16) * 4
    labels = torch.arange(4).repeat(50)
    train = centers[labels] + torch.randn(200, 16)
    probe = train_probe(train, labels, 4, ProbeSettings(epochs=30, batch_size=64, lr=1e-2))
    patches = centers[labels][None] + torch.randn(3, 200, 16)  # 3 noisy patches of each image
    acc1, acc5 = patch_accuracy(probe, patches, labels)
    assert acc1 > 95 and acc5 == 100
    scrambled, _ = patch_accuracy(probe, patches, labels.roll(1))
    assert scrambled < 10


def test_pareto_front_keeps_runs_nothing_beats():
    points = [(10, 50), (20, 60), (15, 40), (30, 55), (40, 70)]
    assert pareto_front(points) == [(10, 50), (20, 60), (40, 70)]


def test_wandb_tags_name_method_views_pdim_beta_fraction(tiny_cifar, tmp_path):
    cfg = compose_recipe(
        "mavicreg_cifar.yaml", "pretrain", tiny_overrides(tiny_cifar, tmp_path, **{"data.fraction": 0.5})
    )
    resolve_beta(cfg, VICREG_SLOT)
    beta = cfg.method_kwargs.cov_loss_weight / cfg.method_kwargs.sim_loss_weight
    assert run_tags(cfg) == ["method:mavicreg", "views:4", "pdim:16", "fraction:0.5", f"beta:{beta:.4g}"]


# ---- through the entry points -----------------------------------------------------------


def pretrain_run(data, out: Path, recipe: str, **extra) -> tuple[Path, str]:
    overrides = tiny_overrides(
        data,
        out,
        max_epochs=2,
        **{"time_to_accuracy.metrics": "[val_acc5]", "time_to_accuracy.targets": "[10,100]", **extra},
    )
    result = run_entry("main_pretrain.py", ["--config-name", recipe, *overrides], cwd=out)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (folder,) = [p.parent for p in out.rglob("args.json")]
    return folder, result.stdout


@pytest.fixture(scope="module")
def runs(tiny_cifar, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("eval_runs")
    (root / "a").mkdir()
    (root / "b").mkdir()
    mabt, stdout = pretrain_run(
        tiny_cifar, root / "a", "mabt_cifar.yaml", **{"wandb.enabled": True, "wandb.offline": True}
    )
    solo_bt, _ = pretrain_run(tiny_cifar, root / "b", "mabt_cifar_2views_d8192.yaml", method="barlow_twins")
    return {"root": root, "mabt": mabt, "mabt_stdout": stdout, "barlow_twins": solo_bt}


@pytest.mark.slow
def test_a_run_logged_to_a_file_prints_progress_lines_not_redraws(runs):
    """stdout is a pipe here, as under nohup, CI or SLURM: each epoch's progress is whole lines."""
    stdout = runs["mabt_stdout"]
    assert "\r" not in stdout
    for epoch in (0, 1):
        assert re.search(rf"^mvssl: epoch {epoch}, training step (\d+)/\1 \(100%\), \d+ s$", stdout, re.M), stdout[
            -2000:
        ]


@pytest.mark.slow
def test_metrics_csv_holds_every_epoch_with_clock_and_effective_rank(runs):
    rows = read_rows(runs["mabt"] / "metrics.csv")
    assert [int(r["epoch"]) for r in rows] == [0, 1]
    assert 0 < float(rows[0]["train_seconds"]) < float(rows[1]["train_seconds"])
    assert float(rows[1]["train_seconds"]) <= float(rows[1]["wall_seconds"])
    for row in rows:  # the loop waits on the loader for part of each epoch, never all of it
        assert 0 < float(row["data_wait_seconds"]) and 0 < float(row["data_wait_fraction"]) < 1
    for row in rows:
        assert 1 <= float(row["rank_backbone"]) <= 64  # width-8 ResNet-18: 64 features
        assert 1 <= float(row["rank_projector"]) <= 16
        assert float(row["train_barlow_loss"]) > 0 and "val_acc1" in row
    summary = [line for line in runs["mabt_stdout"].splitlines() if "mvssl: epoch 1 train" in line]
    assert summary and f"train_barlow_loss={float(rows[1]['train_barlow_loss']):.4g}" in summary[0]


@pytest.mark.slow
def test_time_to_accuracy_records_the_first_epoch_past_each_target(runs):
    rows = read_rows(runs["mabt"] / "time_to_accuracy.csv")
    reached_10 = [r for r in rows if r["metric"] == "val_acc5" and float(r["target"]) == 10]
    assert len(reached_10) == 1 and int(reached_10[0]["epoch"]) == 0  # 3 classes: top-5 is 100%
    assert float(reached_10[0]["value"]) >= 10
    metrics = read_rows(runs["mabt"] / "metrics.csv")
    assert 0 < float(reached_10[0]["train_seconds"]) <= float(metrics[0]["train_seconds"]) + 1e-6
    assert "mvssl: val_acc5 reached 10 at epoch 0" in runs["mabt_stdout"]


@pytest.mark.slow
def test_wandb_offline_run_carries_the_tags(runs):
    (wandb_file,) = (runs["root"] / "a").glob("wandb/offline-run-*/run-*.wandb")
    content = wandb_file.read_bytes()
    for tag in (b"method:mabt", b"views:4", b"pdim:16", b"fraction:1"):
        assert tag in content


@pytest.mark.slow
def test_offline_knn_on_the_cpu_with_solo_learns_flags(runs, tiny_cifar, tmp_path):
    args = [
        "--pretrained_checkpoint_dir", str(runs["mabt"]),
        "--dataset", "cifar10",
        "--train_data_path", tiny_cifar["train"],
        "--val_data_path", tiny_cifar["train"],  # the bank holds every query: k=1 must find itself
        "--k", "1", "3",
        "--temperature", "0.07",
        "--num_workers", "0",
        "--batch_size", "8",
    ]  # fmt: skip
    result = run_entry("main_knn.py", args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "scheduler_interval" not in result.stderr, "solo-learn's resume caution: an evaluation resumes nothing"
    # no terminal here: whole progress lines, not tqdm's carriage-return redraws on one line
    assert "\r" not in result.stderr and re.search(r"^train features \d+/\d+ \(100%\), \d+ s$", result.stderr, re.M)
    rows = read_rows(runs["mabt"] / "knn.csv")
    assert len(rows) == 2 * 2 * 2  # feature x k x (cosine with one T, euclidean)
    assert {(r["feature"], r["distance"]) for r in rows} == {
        (f, d) for f in ("backbone", "projector") for d in ("cosine", "euclidean")
    }
    for row in rows:
        if row["k"] == "1":
            assert float(row["acc1"]) == 100.0, row


@pytest.mark.slow
def test_knn_reports_bad_input_in_one_line(runs, tmp_path):
    result = run_entry(
        "main_knn.py",
        ["--pretrained_checkpoint_dir", str(tmp_path), "--dataset", "cifar10", "--train_data_path", str(tmp_path),
         "--val_data_path", str(tmp_path)],
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2 and "holds no complete .ckpt" in result.stderr


@pytest.mark.slow
def test_fast_probe_through_main_linear(runs, tiny_cifar, tmp_path):
    overrides = tiny_overrides(
        tiny_cifar,
        tmp_path,
        pretrained_feature_extractor=str(runs["mabt"]),
        **{"probe.epochs": 20, "probe.test_patches": 2, "probe.train_patches": 2, "probe.device": "cpu"},
    )
    overrides = [o for o in overrides if not o.startswith(("method_kwargs", "auto_resume"))]
    result = run_entry("main_linear.py", ["--config-name", "probe_cifar.yaml", *overrides], cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((runs["mabt"] / "probe.json").read_text())
    assert report["train_images"] == 24 and report["test_images"] == 12
    assert report["train_features"] == 48  # 2 patches of each training image
    assert 0 <= report["acc1"] <= 100 and 0 <= report["acc1_2patches"] <= 100
    assert "mvssl probe: top-1" in result.stdout


@pytest.mark.slow
def test_fast_probe_reads_the_memory_format(runs, tiny_cifar, tmp_path):
    """data.format=memory: the same files, decoded once (the cache beside each data path)
    and transformed as solo-learn's linear-eval transforms do, on the probe's device."""
    overrides = tiny_overrides(
        tiny_cifar,
        tmp_path,
        pretrained_feature_extractor=str(runs["mabt"]),
        **{"probe.epochs": 20, "probe.test_patches": 2, "probe.train_patches": 2, "probe.device": "cpu"},
    )
    overrides = [o for o in overrides if not o.startswith(("method_kwargs", "auto_resume", "data.format"))]
    cache = tmp_path / "cache"
    args = ["--config-name", "probe_cifar.yaml", *overrides, "data.format=memory", f"++memory.cache_dir={cache}"]
    result = run_entry("main_linear.py", args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((runs["mabt"] / "probe.json").read_text())
    assert report["data_format"] == "memory"
    assert report["train_images"] == 24 and report["test_images"] == 12 and report["train_features"] == 48
    assert 0 <= report["acc1"] <= 100 and 0 <= report["acc1_2patches"] <= 100
    assert len(list(cache.glob("*.npy"))) == 2  # train and test sets, read back by the next probe
    assert "reads its images with torchvision" not in result.stdout


@pytest.mark.slow
def test_probe_rejects_bad_keys(runs, tiny_cifar, tmp_path):
    overrides = tiny_overrides(
        tiny_cifar, tmp_path, pretrained_feature_extractor=str(runs["mabt"]), **{"probe.epochs": 0}
    )
    overrides = [o for o in overrides if not o.startswith(("method_kwargs", "auto_resume"))]
    result = run_entry("main_linear.py", ["--config-name", "probe_cifar.yaml", *overrides], cwd=tmp_path)
    assert result.returncode == 2 and "probe.epochs=0" in result.stderr


@pytest.mark.slow
def test_compare_writes_table_and_plots_from_local_logs(runs, tmp_path):
    out = tmp_path / "cmp"
    result = run_entry(
        "main_compare.py", [str(runs["root"]), "--out", str(out), "--targets", "10", "100"], cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    table = read_rows(out / "comparison.csv")
    assert sorted(r["method"] for r in table) == ["barlow_twins", "mabt"]
    by_method = {r["method"]: r for r in table}
    assert by_method["mabt"]["views"] == "4" and by_method["barlow_twins"]["views"] == "2"
    assert by_method["mabt"]["epochs"] == "2"
    final = float(read_rows(runs["mabt"] / "metrics.csv")[-1]["val_acc1"])
    assert float(by_method["mabt"]["final val_acc1"]) == pytest.approx(final, abs=0.01)
    assert "| run |" in (out / "comparison.md").read_text()
    for name in ("accuracy_vs_epoch.png", "accuracy_vs_time.png", "pareto.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_compare_names_what_is_missing(runs, tmp_path):
    empty = run_entry("main_compare.py", [str(tmp_path)], cwd=tmp_path)
    assert empty.returncode == 2 and "no pretraining run folders" in empty.stderr
    metric = run_entry("main_compare.py", [str(runs["root"]), "--metric", "val_top1", "--out", str(tmp_path)], tmp_path)
    assert metric.returncode == 2 and "--metric val_top1: no run logged it" in metric.stderr
