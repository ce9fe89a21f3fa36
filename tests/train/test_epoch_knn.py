"""The kNN after every epoch (train/epoch_knn.py, ``epoch_knn``), as a user turns it on: its
figure is the offline kNN's on the same checkpoint, its seconds are off the training clock,
and the run ends with its minutes to each target."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from helpers import assert_one_line, make_image_folder, pretrain_args, run_entry
from lightning.pytorch import LightningModule, Trainer

from mvssl_plugin.files import read_csv, read_json
from mvssl_plugin.runs import EPOCH_KNN, KNN, METRICS, RUN_LOG
from mvssl_plugin.train.epoch_knn import EpochKNN
from mvssl_plugin.train.run_log import RunLog

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def knn_run(tmp_path_factory):
    """A finished 2-epoch tiny run in fp32 with ``epoch_knn`` on both held-out sets."""
    root = tmp_path_factory.mktemp("epoch_knn")
    data = {
        "train": str(make_image_folder(root / "train", per_class=16)),
        "test": str(make_image_folder(root / "test", per_class=6, seed=1)),
    }
    extra = {"epoch_knn.enabled": True, "epoch_knn.targets": "[20,99]", "data.holdout": 6, "precision": 32}
    result = run_entry("main_pretrain.py", pretrain_args(data, root / "out", max_epochs=2, **extra), root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (folder,) = (root / "out" / "mabt").iterdir()
    return {"folder": folder, "data": data, "stdout": result.stdout, "root": root}


def _training_tree_without_the_holdout(data: dict, out) -> str:
    """A copy of the training tree less the ``data.holdout`` split: the bank the run's kNN used."""
    import shutil

    from helpers import checked_config

    from mvssl_plugin.data.pretrain_set import holdout_samples

    cfg = checked_config("mabt_cifar.yaml", "cpu", **{"data.train_path": data["train"], "data.holdout": 6})
    held = set(holdout_samples(cfg)[0])
    root = Path(data["train"])
    for image in sorted(root.rglob("*.jpg")):
        if str(image) not in held:
            (out / image.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copy(image, out / image.parent.name / image.name)
    return str(out)


@pytest.mark.slow
def test_its_figure_is_the_offline_knn_of_the_same_checkpoint(knn_run):
    rows = read_csv(knn_run["folder"] / EPOCH_KNN)
    assert [int(r["epoch"]) for r in rows] == [0, 1]
    bank = _training_tree_without_the_holdout(knn_run["data"], knn_run["root"] / "bank")
    args = [
        "--pretrained_checkpoint_dir", str(knn_run["folder"]),
        "--dataset", "cifar10",
        "--train_data_path", bank,
        "--val_data_path", knn_run["data"]["test"],
        "--k", "20", "--temperature", "0.07", "--distance_function", "cosine", "--feature_type", "backbone",
        "--num_workers", "0",
    ]  # fmt: skip
    result = run_entry("main_knn.py", args, cwd=knn_run["root"])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (offline,) = read_csv(knn_run["folder"] / KNN)
    assert float(rows[-1]["knn_val_acc1"]) == pytest.approx(float(offline["acc1"]), abs=0.01)


@pytest.mark.slow
def test_its_rows_sit_beside_the_training_clock_in_metrics_csv_and_the_console(knn_run):
    rows, metrics = read_csv(knn_run["folder"] / EPOCH_KNN), read_csv(knn_run["folder"] / METRICS)
    for row, metric in zip(rows, metrics):
        assert row["train_seconds"] == metric["train_seconds"]
        for key in ("knn_val_acc1", "knn_holdout_acc1"):  # metrics.csv: the float32 Lightning logged
            assert float(row[key]) == pytest.approx(float(metric[key]), abs=1e-4)
        assert f"mvssl: epoch {row['epoch']} kNN val {float(row['knn_val_acc1']):.2f}%, holdout " in knn_run["stdout"]
    assert "mvssl: training minutes to each kNN accuracy" in knn_run["stdout"]
    last = float(rows[-1]["knn_val_acc1"])
    assert "  val: 20%: " in knn_run["stdout"] and f"99%: -; last {last:.2f}%" in knn_run["stdout"]


class _Toy(LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 4)

    def training_step(self, batch, batch_idx):
        return self.layer(batch).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class _SlowKNN(EpochKNN):
    """An evaluation that takes a known time."""

    def evaluate(self, pl_module, bf16: bool = False):
        time.sleep(0.6)
        return {"val": 12.5}


def _fit_toy(tmp_path, max_epochs: int, **knn_kwargs):
    """A toy model fitted for ``max_epochs`` of two steps, a :class:`_SlowKNN` on the run's clock."""
    run_log = RunLog()
    knn = _SlowKNN(recipe=None, bank=(torch.zeros(0), []), queries={"val": (torch.zeros(0), [])}, **knn_kwargs)
    knn.clock = run_log
    trainer = Trainer(
        max_epochs=max_epochs, callbacks=[knn, run_log], logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path, accelerator="cpu",
    )  # fmt: skip
    started = time.perf_counter()
    trainer.fit(_Toy(), torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4))
    trainer.wall_seconds = time.perf_counter() - started  # the fit's own wall clock, for the tests below
    return knn, run_log, trainer


def test_its_seconds_are_off_the_training_clock(tmp_path):
    knn, run_log, trainer = _fit_toy(tmp_path, 2)
    assert [r["eval_seconds"] >= 0.6 for r in knn.rows] == [True, True]
    # whatever the machine's speed: the training clock and the evaluations' together fit in the fit's
    # wall clock, so the 1.2 s of evaluation are not on the training clock
    evaluations = sum(r["eval_seconds"] for r in knn.rows)
    assert run_log.train_seconds + evaluations <= trainer.wall_seconds, (run_log.train_seconds, trainer.wall_seconds)
    assert knn.rows[-1]["train_seconds"] == round(run_log.train_seconds, 3)
    assert knn.rows[0]["train_seconds"] < knn.rows[1]["train_seconds"]


@pytest.mark.slow
def test_a_run_with_no_set_to_measure_on_stops_in_one_line(tmp_path):
    data = {"train": str(make_image_folder(tmp_path / "train")), "test": str(make_image_folder(tmp_path / "test"))}
    args = pretrain_args(data, tmp_path, **{"epoch_knn.enabled": True, "data.val_path": "null"})
    assert_one_line(run_entry("main_pretrain.py", args, tmp_path), 2, "epoch_knn.enabled=true", "data.holdout=5000")


def test_a_training_time_budget_ends_the_run_after_the_epoch_that_reaches_it(tmp_path):
    knn, _, trainer = _fit_toy(tmp_path, 3, stop_after_minutes=1e-9)
    assert [r["epoch"] for r in knn.rows] == [0] and trainer.global_step == 2


@pytest.mark.slow
def test_a_user_gives_the_budget_in_training_minutes_a_spent_one_trains_no_more_and_a_bad_one_stops(tmp_path):
    data = {"train": str(make_image_folder(tmp_path / "train")), "test": str(make_image_folder(tmp_path / "test"))}
    extra = {
        "epoch_knn.enabled": True,
        "epoch_knn.stop_after_minutes": 1e-6,
        "precision": 32,
        "auto_resume.enabled": True,
    }
    result = run_entry("main_pretrain.py", pretrain_args(data, tmp_path / "out", max_epochs=3, **extra), tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "mvssl: stopping after epoch 0: " in result.stdout and "epoch_knn.stop_after_minutes=1e-06" in result.stdout
    (knn,) = (tmp_path / "out").rglob(EPOCH_KNN)
    assert [r["epoch"] for r in read_csv(knn)] == ["0"]
    assert read_json(knn.parent / RUN_LOG)["launches"][-1]["finished"] is True
    assert [p.name for p in knn.parent.glob("*.ckpt")] and all("ep=0" in p.name for p in knn.parent.glob("*.ckpt"))
    # the same command again resumes the finished run and trains nothing: its curve and checkpoints stay
    before = {p.name: p.read_bytes() for p in knn.parent.iterdir() if p.suffix in {".csv", ".ckpt"}}
    again = run_entry("main_pretrain.py", pretrain_args(data, tmp_path / "out", max_epochs=3, **extra), tmp_path)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "resuming from the newest complete checkpoint" in again.stdout
    assert "mvssl: nothing to train: " in again.stdout and "mvssl: stopping after epoch" not in again.stdout
    assert {p.name: p.read_bytes() for p in knn.parent.iterdir() if p.suffix in {".csv", ".ckpt"}} == before
    assert [launch["epochs_completed"] for launch in read_json(knn.parent / RUN_LOG)["launches"]] == [1, 1]
    bad = pretrain_args(data, tmp_path / "bad", **{"epoch_knn.enabled": True, "epoch_knn.stop_after_minutes": -5})
    assert_one_line(run_entry("main_pretrain.py", bad, tmp_path), 2, "epoch_knn.stop_after_minutes=-5", "minutes > 0")
    assert not (tmp_path / "bad").exists()
