"""Views per second of the three m-view pipelines on one ImageFolder tree, side by side.

    python benchmarks/bench_dataloading.py [--data ../shared/data/cifar10/train] [--images 10000]
        [--views 2 4 8] [--workers 2] [--batch 256] [--recipe mabt_cifar.yaml] [--dali-device cpu]
        [--memory-device cpu] [--no-memory]
    python benchmarks/bench_dataloading.py --synthetic-imagenet 600 --views 2 4 --batch 64 --batches 4 --no-memory

``--synthetic-imagenet N`` generates N ImageNet-sized JPEGs (500 x 375, smooth random
content, so they compress and decode like photographs rather than noise) in 10 class
folders and reads them with the ImageNet-100 recipe (224-px views).

All pipelines are built from the same recipe (its augmentations, crop size and
normalization): torchvision = solo-learn's N-crop transform in a DataLoader with
``--workers`` worker processes; DALI = this plugin's loader with ``--workers`` threads
(``dali.device`` as given); memory = this plugin's in-memory loader (``data.format:
memory``) with ``--workers`` torch threads, on ``--memory-device``, the images decoded
once beforehand (that decode is timed on its own line, not in views/s). Each pipeline
runs one warm-up batch, then ``--batches`` timed batches; views/s = batches x batch x m /
seconds. Ratios are within one run.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def recipe(args, views: int):
    from mvssl_plugin.cli.config_name import compose_recipe

    return compose_recipe(
        args.recipe,
        "pretrain",
        [
            f"data.train_path={args.data}",
            "data.val_path=null",
            f"data.num_views={views}",
            f"data.num_workers={args.workers}",
            f"optimizer.batch_size={args.batch}",
            f"dali.device={args.dali_device}",
        ],
    )


def synthetic_imagenet(root: Path, count: int, seed: int = 0) -> Path:
    """``count`` 500 x 375 JPEGs of smooth random content in 10 class folders under ``root``."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    for i in range(count):
        folder = root / f"class_{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        coarse = Image.fromarray(rng.integers(0, 256, size=(12, 16, 3), dtype=np.uint8))
        image = np.asarray(coarse.resize((500, 375), Image.BICUBIC), dtype=np.int16)
        image = np.clip(image + rng.integers(-12, 13, size=image.shape), 0, 255).astype(np.uint8)
        Image.fromarray(image).save(folder / f"{i:05d}.jpg", quality=90)
    return root


def subset(files, targets, count: int, seed: int = 0):
    """An unbiased subset of ``count`` images, so both pipelines read the very same files."""
    order = torch.randperm(len(files), generator=torch.Generator().manual_seed(seed))[:count].tolist()
    return [files[i] for i in order], [targets[i] for i in order]


def time_batches(loader, batches: int, sync) -> float:
    iterator = iter(loader)
    next(iterator)  # warm-up: worker start-up, pipeline build
    sync()
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    sync()
    elapsed = time.perf_counter() - start
    del iterator
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "cifar10" / "train"))
    parser.add_argument("--images", type=int, default=10000)
    parser.add_argument("--views", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--recipe", default="mabt_cifar.yaml")
    parser.add_argument("--dali-device", default="cpu", choices=("cpu", "gpu"))
    parser.add_argument("--memory-device", default=None, choices=("cpu", "cuda"), help="default: as --dali-device")
    parser.add_argument("--no-memory", action="store_true", help="leave the in-memory pipeline out")
    parser.add_argument("--synthetic-imagenet", type=int, default=0, help="generate N ImageNet-sized JPEGs to read")
    args = parser.parse_args()
    if args.synthetic_imagenet:
        import tempfile

        args.data = str(synthetic_imagenet(Path(tempfile.mkdtemp()) / "train", args.synthetic_imagenet))
        args.images = min(args.images, args.synthetic_imagenet)
        if args.recipe == "mabt_cifar.yaml":
            args.recipe = "mabt_imagenet100.yaml"
    memory_device = args.memory_device or ("cuda" if args.dali_device == "gpu" else "cpu")
    torch.set_num_threads(args.workers)

    from mvssl_plugin.cli.exits import quiet_dependency_warnings

    quiet_dependency_warnings()

    from torch.utils.data import DataLoader

    from mvssl_plugin.data.dali import DaliMultiViewLoader, ViewRecipe
    from mvssl_plugin.data.inmemory.cache import decode_to_uint8
    from mvssl_plugin.data.inmemory.loader import MemoryMultiViewLoader
    from mvssl_plugin.data.pretrain_set import pretrain_dataset, pretrain_samples
    from mvssl_plugin.data.transforms import pretrain_transform

    gpu = args.dali_device == "gpu" or memory_device == "cuda"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    print(f"# m-view loading: {args.data}, {args.images} images, batch {args.batch}, {args.workers} workers/threads")
    print(
        f"# torch threads {torch.get_num_threads()}, cpus {os.cpu_count()}, DALI device {args.dali_device}, "
        f"memory device {memory_device}, load average {os.getloadavg()[0]:.1f}"
    )
    files, targets = subset(*pretrain_samples(recipe(args, args.views[0])), args.images)
    if not args.no_memory:
        start = time.perf_counter()
        images = decode_to_uint8(files, None, None)
        print(
            f"# memory: {len(files)} images decoded once in {time.perf_counter() - start:.1f} s, {tuple(images.shape)}"
        )
    print("| m | torchvision views/s | DALI views/s | memory views/s | DALI / torchvision | memory / DALI |")
    print("|---|---|---|---|---|---|")
    for views in args.views:
        cfg = recipe(args, views)
        files, targets = subset(*pretrain_samples(cfg), args.images)

        dataset = pretrain_dataset(cfg, pretrain_transform(cfg))
        dataset.samples = list(zip(files, targets))
        torch_loader = DataLoader(
            dataset,
            batch_size=args.batch,
            shuffle=True,
            num_workers=args.workers,
            drop_last=True,
            persistent_workers=False,
        )
        dali_loader = DaliMultiViewLoader(
            files,
            targets,
            [ViewRecipe.from_cfg(cfg.data.dataset, aug) for aug in cfg.augmentations],
            batch_size=args.batch,
            device=args.dali_device,
            num_threads=args.workers,
        )
        batches = min(args.batches, len(dali_loader) - 1)
        seconds_torch = time_batches(torch_loader, batches, sync)
        seconds_dali = time_batches(dali_loader, batches, sync)
        rate_torch, rate_dali = (batches * args.batch * views / seconds for seconds in (seconds_torch, seconds_dali))
        memory_rate, memory_ratio = "-", "-"
        if not args.no_memory:
            memory_loader = MemoryMultiViewLoader(
                images,
                targets,
                [ViewRecipe.from_cfg(cfg.data.dataset, aug) for aug in cfg.augmentations],
                batch_size=args.batch,
                device=memory_device,
            )
            rate_memory = batches * args.batch * views / time_batches(memory_loader, batches, sync)
            memory_rate, memory_ratio = f"{rate_memory:,.0f}", f"{rate_memory / rate_dali:.2f}x"
        print(
            f"| {views} | {rate_torch:,.0f} | {rate_dali:,.0f} | {memory_rate} | "
            f"{rate_dali / rate_torch:.2f}x | {memory_ratio} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
