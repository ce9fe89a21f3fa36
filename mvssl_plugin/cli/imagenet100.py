"""``mvssl-imagenet100``: ImageNet-100 as links into an ImageNet-1k tree.

``python -m mvssl_plugin.cli.imagenet100 --imagenet <root> --out <folder>`` (or ``--train``
/ ``--val`` / ``--val-labels``); the work is :mod:`mvssl_plugin.data.imagenet_subset`. A
wrong tree is one ``mvssl config error: ...`` line, exit 2. No torch import.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from mvssl_plugin.cli.exits import report_errors
from mvssl_plugin.data.imagenet_subset import build


def parse(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="mvssl-imagenet100",
        description="Builds ImageNet-100 (solo-learn's 100 classes) as symbolic links into an ImageNet-1k "
        "tree: <out>/train/<wnid>/*.JPEG and <out>/val/<wnid>/*.JPEG, every class and image count checked.",
    )
    parser.add_argument(
        "--imagenet",
        type=Path,
        help="ImageNet-1k root holding train/ and val/ (or the Kaggle layout's ILSVRC/Data/CLS-LOC/)",
    )
    parser.add_argument("--train", type=Path, help="the train folder (train/<wnid>/*.JPEG), instead of --imagenet")
    parser.add_argument("--val", type=Path, help="the validation folder: val/<wnid>/*.JPEG, or flat with a label file")
    parser.add_argument(
        "--val-labels",
        type=Path,
        help="labels of a flat val/: LOC_val_solution.csv (found by itself beside the root), or a text file "
        "of WordNet ids, one per image in file-name order, or '<file name> <wnid>' per line",
    )
    parser.add_argument("--out", type=Path, required=True, help="the folder to write (new or empty)")
    parser.add_argument(
        "--replace",
        action="store_true",
        help="--out holds another build: make its links this one's (only links are ever removed)",
    )
    return parser.parse_args(argv)


@report_errors
def run(args: argparse.Namespace) -> None:
    lines = build(args.out, args.imagenet, args.train, args.val, args.val_labels, replace=args.replace)
    print("\n".join(lines), flush=True)


def main(argv: Optional[List[str]] = None) -> None:
    run(parse(argv))


if __name__ == "__main__":
    main(sys.argv[1:])
