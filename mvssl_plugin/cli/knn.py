"""``main_knn.py`` / ``mvssl-knn``: solo-learn's offline kNN on a pretraining run, on a CPU or a GPU.

The flags are solo-learn's ``main_knn.py`` flags (its own parser pieces), so its commands
run unchanged; on top: ``--device auto|cpu|cuda`` (solo-learn's script calls ``.cuda()``),
ImageFolder copies of CIFAR/STL-10, the run folder's newest complete checkpoint (not the
first file listed), every image of both sets (no shuffling, no dropped batch), defaults for
every grid flag, validation classes matched to the training classes by folder name, and
``knn.csv`` written into the run folder. The classifier is solo-learn's
``WeightedKNNClassifier``, counting the classes of both sets (:func:`~mvssl_plugin.eval.knn_grid.all_classes_knn`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from mvssl_plugin.cli.exits import quiet_dependency_warnings, report_errors
from mvssl_plugin.data.imagefolder import class_names, is_image_folder_tree, match_classes
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.eval.knn_grid import DISTANCES, FEATURE_TYPES
from mvssl_plugin.eval.knn_run import run_knn
from mvssl_plugin.files import check_writable_folder


def build_parser() -> argparse.ArgumentParser:
    # local: solo-learn (seconds, all of it) loads once main() has silenced its harmless warnings
    from solo.args.dataset import custom_dataset_args, dataset_args

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pretrained_checkpoint_dir", type=str, required=True, help="run folder or .ckpt")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--num_workers", type=int, default=2)
    parser.add_argument("--k", type=int, nargs="+", default=[10, 20, 100, 200])
    parser.add_argument("--temperature", type=float, nargs="+", default=[0.02, 0.07, 0.1, 0.2, 0.5])
    parser.add_argument("--distance_function", type=str, nargs="+", default=list(DISTANCES), choices=DISTANCES)
    parser.add_argument("--feature_type", type=str, nargs="+", default=list(FEATURE_TYPES), choices=FEATURE_TYPES)
    parser.add_argument("--device", type=str, default="auto", help="auto (the GPU when there is one), cpu, cuda")
    dataset_args(parser)
    custom_dataset_args(parser)
    return parser


def check_args(args: argparse.Namespace) -> List[str]:
    """Checks the flags before anything is loaded; returns notices."""
    if any(k < 1 for k in args.k):
        raise ConfigError(f"--k {args.k}: every k must be >= 1")
    if any(t <= 0 for t in args.temperature):
        raise ConfigError(f"--temperature {args.temperature}: temperatures must be > 0")
    if args.batch_size < 1:
        raise ConfigError(f"--batch_size {args.batch_size}: must be >= 1")
    if args.val_data_path is None:
        raise ConfigError("--val_data_path is missing: kNN classifies the validation images")
    for flag, path in (("--train_data_path", args.train_data_path), ("--val_data_path", args.val_data_path)):
        if not Path(path).exists():
            raise ConfigError(f"{flag} {path} does not exist")
        if args.data_format == "image_folder" and args.dataset in ("imagenet", "imagenet100", "custom"):
            if not is_image_folder_tree(path):
                raise ConfigError(f"{flag} {path} is not an ImageFolder tree (one sub-folder of images per class)")
    run = Path(args.pretrained_checkpoint_dir)
    if run.exists():  # a missing one is named by the checkpoint lookup
        check_writable_folder(
            run if run.is_dir() else run.parent, f"--pretrained_checkpoint_dir {run} (knn.csv goes there)"
        )
    train, val = args.train_data_path, args.val_data_path
    if args.data_format != "h5" and is_image_folder_tree(train) and is_image_folder_tree(val):
        # the datasets are relabelled by name too (data.labels.label_by_name); said here, early
        _, notice = match_classes(class_names(train), class_names(val), "--train_data_path", "--val_data_path")
        return [notice] if notice else []
    return []


def knn(argv: Optional[List[str]] = None) -> List[dict]:
    """Runs the kNN grid; returns one row per (feature, k, distance, temperature).

    The flags are parsed and checked here; :func:`~mvssl_plugin.eval.knn_run.run_knn` runs it."""
    args = build_parser().parse_args(argv)
    for notice in check_args(args):
        print(f"mvssl: {notice}", flush=True)
    return run_knn(
        args.pretrained_checkpoint_dir,
        dataset=args.dataset,
        train_path=args.train_data_path,
        val_path=args.val_data_path,
        data_format=args.data_format,
        data_fraction=args.data_fraction,
        feature_types=args.feature_type,
        ks=args.k,
        distances=args.distance_function,
        temperatures=args.temperature,
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        device=args.device,
    )


def main() -> None:
    quiet_dependency_warnings()
    report_errors(knn)(sys.argv[1:])


if __name__ == "__main__":
    main()
