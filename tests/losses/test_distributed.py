"""The losses under torch.distributed: 2 CPU processes (gloo) against one process.

Under DDP each process computes the loss from its shard and DDP averages parameter
gradients. Correct means: the processes' mean loss equals the one-process loss on the
concatenated batch, and each shard's gradient divided by the world size equals the
one-process gradient of those rows (then DDP's averaged parameter gradients are exact).
"""

from __future__ import annotations

import json
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from helpers import NEEDS_DALI

from mvssl_plugin.losses import mmcr_loss, multiview_barlow_loss, multiview_vicreg_loss

#: every test here starts a subprocess (an entry point, solo-learn's script, DDP workers)
pytestmark = pytest.mark.slow


def _mmcr(z: torch.Tensor, redundancy: str) -> torch.Tensor:
    """MMCR has no redundancy modes: its local term stands in for the second case."""
    return mmcr_loss(z, local_weight=0.0 if redundancy == "per_view" else 0.5)


WORLD = 2
CASES = [
    (name, fn, redundancy)
    for name, fn in (("barlow", multiview_barlow_loss), ("vicreg", multiview_vicreg_loss), ("mmcr", _mmcr))
    for redundancy in ("per_view", "mean")
]


def full_batch(m: int = 4, n: int = 16, d: int = 8) -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(n, d, generator=gen) + 0.5 * torch.randn(m, n, d, generator=gen)


def _worker(rank: int, init_file: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    results = {}
    for name, fn, redundancy in CASES:
        shard = full_batch().chunk(WORLD, dim=1)[rank].clone().requires_grad_()
        loss = fn(shard, redundancy=redundancy)
        loss.backward()
        results[(name, redundancy)] = (loss.detach(), shard.grad)
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def distributed_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    mp.spawn(_worker, args=(str(out / "init"), str(out)), nprocs=WORLD, join=True)
    return [torch.load(out / f"rank{r}.pt") for r in range(WORLD)]


def _exit_worker(rank: int, init_file: str) -> None:
    from mvssl_plugin.losses.distributed import all_reduce_sum, gather_batch

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    x = torch.randn(4, 8, requires_grad=True)
    (gather_batch(x).pow(2).sum() + all_reduce_sum(x).sum()).backward()
    dist.destroy_process_group()


def test_processes_exit_cleanly_after_the_collectives(tmp_path):
    """torch.distributed.nn's collectives made a gloo process abort at exit in about one
    launch of four (SIGABRT after its work was done); ours must exit 0 every time."""
    for attempt in range(6):
        mp.spawn(_exit_worker, args=(str(tmp_path / f"init{attempt}"),), nprocs=WORLD, join=True)


@pytest.mark.parametrize("name,fn,redundancy", CASES, ids=[f"{n}-{r}" for n, _, r in CASES])
def test_two_processes_equal_one_process_on_the_whole_batch(name, fn, redundancy, distributed_results):
    whole = full_batch().requires_grad_()
    loss = fn(whole, redundancy=redundancy)
    loss.backward()
    losses = torch.stack([res[(name, redundancy)][0] for res in distributed_results])
    torch.testing.assert_close(losses.mean(), loss.detach(), rtol=1e-5, atol=0)
    grads = torch.cat([res[(name, redundancy)][1] for res in distributed_results], dim=1) / WORLD
    relative = (grads - whole.grad).abs().max() / whole.grad.abs().max()
    assert relative <= 1e-5, f"gradient differs by {relative:.2e} (relative to its largest entry)"


@pytest.mark.parametrize(
    "view_parallel,data_format",
    [
        (False, "image_folder"),
        (True, "image_folder"),
        pytest.param(False, "dali", marks=NEEDS_DALI),
        pytest.param(True, "dali", marks=NEEDS_DALI),
        (False, "memory"),
        (True, "memory"),
    ],
)
def test_ddp_on_two_cpu_processes_through_the_entry_point(view_parallel, data_format, tiny_cifar, tmp_path):
    """Lightning re-launches the command line for each process; the recipe must survive it.
    Every m-view pipeline shards the images over the processes (or not, view-parallel)."""
    from helpers import run_entry, tiny_overrides

    extra = {"strategy": "ddp", "devices": 2, "method_kwargs.view_parallel": view_parallel, "data.format": data_format}
    overrides = tiny_overrides(tiny_cifar, tmp_path, **extra)
    result = run_entry("main_pretrain.py", ["--config-name", "mabt_cifar.yaml", *overrides], cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "each CPU process normalizes its own batch" in result.stdout
    (run_dir,) = (tmp_path / "mabt").iterdir()
    args = json.loads((run_dir / "args.json").read_text())
    assert args["devices"] == [0, 1] and args["strategy"] == "ddp"
    assert len(list(run_dir.glob("*.ckpt"))) == 1
    assert "rank_backbone" in (run_dir / "metrics.csv").read_text()  # signals under DDP, written once
    # solo-learn's lr scale is batch x processes / 256; view-parallel processes share images
    processes_holding_distinct_images = 1 if view_parallel else 2
    assert args["optimizer"]["lr"] == pytest.approx(5e-4 * 8 * processes_holding_distinct_images / 256)
    # data-parallel: each process its own shard of the 24 images (12, one batch of 8 kept);
    # view-parallel: every process all 24 images (3 batches)
    state = torch.load(next(run_dir.glob("*.ckpt")), map_location="cpu", weights_only=False)
    assert state["global_step"] == (3 if view_parallel else 1)
    assert f"; {state['global_step']} steps per epoch;" in result.stdout  # the start block counts per process


def _view_parallel_worker(rank: int, init_file: str, out_dir: str, overrides: list, batch: list) -> None:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.train.pretrain import build_pretrain_model

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    cfg = compose_recipe("mabt_cifar.yaml", "pretrain", overrides + ["method_kwargs.view_parallel=true"])
    _, model = build_pretrain_model(cfg)  # same seed: the same initial weights in every process
    loss = model.training_step(batch, 0)
    loss.backward()
    grads = {}
    for name, param in model.named_parameters():  # what DDP does: average over processes
        if param.grad is not None:
            dist.all_reduce(param.grad)
            grads[name] = param.grad / WORLD
    torch.save({"loss": loss.detach(), "grads": grads}, os.path.join(out_dir, f"view_parallel{rank}.pt"))
    dist.destroy_process_group()


def test_view_parallel_equals_one_process_with_all_views(tiny_cifar, tmp_path):
    """4 views over 2 processes, 2 each: the same loss and averaged gradients as one
    process forwarding all 4 views (per-view BatchNorm makes this exact, no SyncBN needed)."""
    from helpers import tiny_overrides

    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.train.pretrain import build_pretrain_model

    overrides = tiny_overrides(tiny_cifar, tmp_path, strategy="ddp", devices=2)
    gen = torch.Generator().manual_seed(0)
    batch = [torch.arange(8), [torch.randn(8, 3, 32, 32, generator=gen) for _ in range(4)], torch.randint(0, 3, (8,))]
    mp.spawn(
        _view_parallel_worker, args=(str(tmp_path / "init"), str(tmp_path), overrides, batch), nprocs=WORLD, join=True
    )
    ranks = [torch.load(tmp_path / f"view_parallel{r}.pt") for r in range(WORLD)]

    _, single = build_pretrain_model(compose_recipe("mabt_cifar.yaml", "pretrain", overrides))
    loss = single.training_step(batch, 0)
    loss.backward()
    # the m-view loss is the same everywhere; the online classifier's loss is each
    # process's share of the views, so its mean over processes is the one-process value
    mean_loss = torch.stack([result["loss"] for result in ranks]).mean()
    torch.testing.assert_close(mean_loss, loss.detach(), rtol=1e-5, atol=1e-6)
    for result in ranks:
        for name, param in single.named_parameters():
            error = (result["grads"][name] - param.grad).abs().max()
            assert error <= 1e-4 * param.grad.abs().max() + 1e-6, f"{name}: {error}"
