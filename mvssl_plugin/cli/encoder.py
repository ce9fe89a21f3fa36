"""``mvssl-export`` / ``main_export.py``, ``mvssl-embed`` and ``mvssl-umap``: a run's encoder
taken away (:mod:`mvssl_plugin.encoder`). Bad input ends in one line and exit status 2, before
anything is read or written."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from mvssl_plugin.cli.exits import quiet_dependency_warnings, report_errors


def export_main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(
        prog="mvssl-export",
        description="Export a pretraining run's backbone: model.safetensors, config.json and a model card "
        "(README.md) in --out, loadable with mvssl_plugin.load_encoder(DIR) in a plain torch environment.",
    )
    parser.add_argument("run", help="a pretraining run folder (trained_models/<method>/<run id>) or one of its .ckpt")
    parser.add_argument("--out", required=True, help="the folder to write (new, or empty; --force replaces it)")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")
    args = parser.parse_args(argv)
    # local: torch (~3 s) loads once the arguments parse: --help and usage errors stay fast
    from mvssl_plugin.encoder.export import export

    quiet_dependency_warnings()
    report_errors(export)(args.run, args.out, force=args.force)


def _encoder_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """A parser for a command that feeds images to an exported encoder: the encoder folder first, and
    the batch and device options both commands share."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("encoder", help="an exported encoder folder (mvssl-export)")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--device", default="auto", help="auto (the GPU when there is one), cpu, cuda")
    return parser


def embed_main(argv: Optional[List[str]] = None) -> None:
    parser = _encoder_parser(
        "mvssl-embed",
        "Features of a folder of images (an ImageFolder tree gives labels too) from an exported "
        "encoder, fed as the run's evaluation fed it, into a .npz (features, paths, labels, classes).",
    )
    parser.add_argument("images", help="a folder of images, or an ImageFolder tree (one sub-folder per class)")
    parser.add_argument("--out", required=True, help="the .npz to write")
    parser.add_argument("--num-workers", type=int, default=0, help="image-decoding worker processes")
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")
    args = parser.parse_args(argv)
    # local: torch (~3 s) loads once the arguments parse: --help and usage errors stay fast
    from mvssl_plugin.encoder.embed import embed

    report_errors(embed)(
        args.encoder, args.images, args.out, args.batch_size, args.num_workers, args.device, force=args.force
    )


def umap_main(argv: Optional[List[str]] = None) -> None:
    parser = _encoder_parser(
        "mvssl-umap",
        "A UMAP picture of an exported encoder's features of the training (and validation) "
        "images, coloured by class, on a CPU or a GPU. Needs umap-learn.",
    )
    parser.add_argument("train", help="training images: an ImageFolder tree (or any folder of images)")
    parser.add_argument("--val", help="validation images, drawn beside them")
    parser.add_argument("--out", required=True, help="the picture to write (.png, .pdf, .svg, .jpg)")
    parser.add_argument("--max-images", type=int, default=5000, help="at most this many images of each set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--force", action="store_true", help="replace --out if it exists")
    args = parser.parse_args(argv)
    # local: torch (~3 s) loads once the arguments parse: --help and usage errors stay fast
    from mvssl_plugin.encoder.umap_plot import umap_picture

    quiet_dependency_warnings()
    report_errors(umap_picture)(
        args.encoder, args.train, args.out, args.val, args.max_images, args.batch_size, args.device, args.seed,
        force=args.force,
    )  # fmt: skip


if __name__ == "__main__":
    export_main(sys.argv[1:])
