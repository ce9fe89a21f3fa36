"""``main_compare.py`` / ``mvssl-compare``: a table and plots from the local files of several runs.

    python main_compare.py trained_models/ --out comparison/ [--metric val_acc1] [--targets 50 80]

Arguments are run folders, or folders above them (every run below is taken).
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from mvssl_plugin.cli.exits import quiet_dependency_warnings, report_errors
from mvssl_plugin.eval.compare import compare, markdown
from mvssl_plugin.files import check_writable_folder


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run folders (args.json + metrics.csv) or folders above them")
    parser.add_argument("--out", default="comparison", help="folder for comparison.md/.csv and the plots")
    parser.add_argument("--metric", default="val_acc1", help="accuracy column of metrics.csv to compare")
    parser.add_argument("--targets", type=float, nargs="*", default=[], help="accuracies to time (seconds to reach)")
    return parser


@report_errors
def main(argv: Optional[List[str]] = None) -> None:
    quiet_dependency_warnings()
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    check_writable_folder(args.out, f"--out {args.out}")
    result = compare(args.runs, args.out, args.metric, args.targets)
    print(markdown(result["table"]))
    print("wrote", *map(str, result["files"]), sep="\n  ")


if __name__ == "__main__":
    main()
