"""MMCR, the third multi-view method: its loss against a plain transcription of the published
equation (value and gradient), and the method through the flows the others run (the
contract, fuzz and recipe tests cover it through the registry)."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import NEEDS_DALI, run_entry, tiny_overrides

from mvssl_plugin.losses import mmcr_loss


def transcription(views: torch.Tensor, local_weight: float) -> torch.Tensor:
    """Yerxa et al.'s objective written out image by image: unit-normalize every view, average
    each image's views into its centroid, minus the nuclear norm (sum of singular values) of
    the N x D centroid matrix, plus lambda times each image's m x D nuclear norm; over N."""
    m, n, _ = views.shape
    centroids, local = [], 0.0
    for b in range(n):
        rows = [views[v, b] / views[v, b].norm() for v in range(m)]
        centroids.append(sum(rows) / m)
        local = local + torch.linalg.svdvals(torch.stack(rows)).sum()
    return (-torch.linalg.svdvals(torch.stack(centroids)).sum() + local_weight * local) / n


@pytest.mark.parametrize("m", [2, 4, 8])
@pytest.mark.parametrize("local_weight", [0.0, 0.5])
def test_the_loss_equals_the_published_equation_in_value_and_gradient(m, local_weight):
    gen = torch.Generator().manual_seed(m)
    base = torch.randn(1, 12, 6, generator=gen, dtype=torch.float64)
    z = (base + 0.3 * torch.randn(m, 12, 6, generator=gen, dtype=torch.float64)).requires_grad_()
    ours = mmcr_loss(list(z.unbind(0)), local_weight=local_weight)
    (grad,) = torch.autograd.grad(ours, z)
    reference = transcription(z, local_weight)
    (reference_grad,) = torch.autograd.grad(reference, z)
    torch.testing.assert_close(ours, reference, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad, reference_grad, rtol=1e-9, atol=1e-12)
    # identical views of orthogonal directions: centroids = unit rows, ||C||_* = N -> loss -1
    eye = torch.eye(6, dtype=torch.float64)[:4].expand(m, 4, 6)
    assert mmcr_loss(eye).item() == pytest.approx(-1.0)


def test_the_gradient_is_the_loss_derivative():
    z = torch.randn(3, 5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1)).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: mmcr_loss(x, local_weight=0.2), (z,))


def test_half_precision_is_computed_in_float32_and_bad_input_is_refused():
    z = torch.randn(2, 8, 4).to(torch.bfloat16)
    assert mmcr_loss(z).dtype == torch.float32
    with pytest.raises(ValueError, match="m >= 2 views"):
        mmcr_loss(torch.randn(1, 8, 4))
    with pytest.raises(ValueError, match="local_weight must be >= 0"):
        mmcr_loss(torch.randn(2, 8, 4), local_weight=-1)


def pretrain(data: dict, out, recipe: str = "mmcr_cifar.yaml", **extra):
    args = ["--config-name", recipe, *tiny_overrides(data, out, **extra)]
    return run_entry("main_pretrain.py", args, out)


@pytest.fixture(scope="module")
def mmcr_run(tiny_cifar, tmp_path_factory):
    """A 1-epoch mmcr run with wandb offline: the folder the evaluations read."""
    out = tmp_path_factory.mktemp("mmcr")
    result = pretrain(tiny_cifar, out, **{"wandb.enabled": True, "wandb.offline": True})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    (run_dir,) = (out / "mmcr").iterdir()
    return out, run_dir, result.stdout


@pytest.mark.slow
def test_mmcr_pretrains_through_the_entry_point_with_its_tags(mmcr_run):
    out, run_dir, stdout = mmcr_run
    assert "mmcr (projector solo)" in stdout and "orthogonality  -" in stdout
    args = json.loads((run_dir / "args.json").read_text())
    assert args["method"] == "mmcr" and args["data"]["num_large_crops"] == 4
    assert "objective" not in args["method_kwargs"] and "lamb" not in args["method_kwargs"]
    assert "train_mmcr_loss" in (run_dir / "metrics.csv").read_text()
    (wandb_file,) = out.glob("wandb/offline-run-*/run-*.wandb")
    assert b"method:mmcr" in wandb_file.read_bytes() and b"views:4" in wandb_file.read_bytes()


@pytest.mark.slow
def test_knn_probe_and_compare_read_an_mmcr_run(mmcr_run, tiny_cifar, tmp_path):
    out, run_dir, _ = mmcr_run
    knn = ["--pretrained_checkpoint_dir", str(run_dir), "--dataset", "cifar10", "--num_workers", "0", "--k", "3"]
    knn += ["--train_data_path", tiny_cifar["train"], "--val_data_path", tiny_cifar["test"], "--batch_size", "8"]
    result = run_entry("main_knn.py", knn, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run_dir / "knn.csv").is_file()
    probe = tiny_overrides(tiny_cifar, tmp_path, pretrained_feature_extractor=str(run_dir), **{"probe.epochs": 2})
    probe = [o for o in probe if not o.startswith(("method_kwargs", "auto_resume"))]
    result = run_entry("main_linear.py", ["--config-name", "probe_cifar.yaml", *probe], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((run_dir / "probe.json").read_text())["test_images"] == 12
    result = run_entry("main_compare.py", [str(out), "--out", str(tmp_path / "cmp")], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "mmcr" in (tmp_path / "cmp" / "comparison.csv").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("data_format", ["memory", pytest.param("dali", marks=NEEDS_DALI)])
def test_mmcr_trains_on_the_other_data_formats(data_format, tiny_cifar, tmp_path):
    result = pretrain(tiny_cifar, tmp_path, **{"data.format": data_format})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]


@pytest.mark.slow
def test_mmcr_view_parallel_on_two_cpu_processes(tiny_cifar, tmp_path):
    extra = {"strategy": "ddp", "devices": 2, "method_kwargs.view_parallel": True, "data.format": "memory"}
    result = pretrain(tiny_cifar, tmp_path, **extra)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (run_dir,) = (tmp_path / "mmcr").iterdir()
    assert json.loads((run_dir / "args.json").read_text())["devices"] == [0, 1]
