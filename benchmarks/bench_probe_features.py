"""The fast probe's feature pass, image_folder (torchvision workers) vs data.format=memory
(cold decode cache, then warm), side by side in one run, through the entry point.

    python benchmarks/bench_probe_features.py --checkpoint trained_models/mabt/<run>
        [--recipe probe_cifar_cpu.yaml] [--test-patches 4] [--rounds 2] [override ...]

Each round runs ``main_linear.py --config-name <recipe>`` once per format (the memory
format first with an emptied cache folder, then again reading it back) and prints the
``features_seconds`` that probe.json records: building the datasets, decoding (memory)
and every backbone pass (train patches, plain test images, test patches). The probe's own
training is cut to a few epochs; it is not what is compared. Ratios are within one round.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def probe(checkpoint: Path, recipe: str, data_format: str, cache: Path, patches: int, extra: list[str]) -> dict:
    args = [
        sys.executable, str(REPO / "main_linear.py"), "--config-name", recipe,
        f"pretrained_feature_extractor={checkpoint}", f"data.format={data_format}",
        f"++memory.cache_dir={cache}", f"probe.test_patches={patches}", "probe.epochs=5", *extra,
    ]  # fmt: skip
    start = time.perf_counter()
    result = subprocess.run(args, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"{data_format} probe failed (exit {result.returncode}):\n{result.stderr[-2000:]}")
    run = checkpoint if checkpoint.is_dir() else checkpoint.parent
    report = json.loads((run / "probe.json").read_text())
    return {"features_s": report["features_seconds"], "wall_s": wall, "acc1": report["acc1"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, required=True, help="a pretraining run folder or .ckpt")
    parser.add_argument("--recipe", default="probe_cifar_cpu.yaml")
    parser.add_argument("--test-patches", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("overrides", nargs="*", help="more key=value overrides for every probe")
    args = parser.parse_args()
    print("round | format | cache | features s | wall s | top-1 (plain)")
    with tempfile.TemporaryDirectory(prefix="mvssl-probe-bench-") as tmp:
        cache = Path(tmp) / "cache"
        for round_ in range(args.rounds):
            shutil.rmtree(cache, ignore_errors=True)
            rows = [
                ("image_folder", "-"),
                ("memory", "cold"),
                ("memory", "warm"),
            ]
            seconds = {}
            for data_format, state in rows:
                out = probe(args.checkpoint, args.recipe, data_format, cache, args.test_patches, args.overrides)
                seconds[(data_format, state)] = out["features_s"]
                print(
                    f"{round_} | {data_format} | {state} | {out['features_s']:.1f} | {out['wall_s']:.1f} | "
                    f"{out['acc1']:.2f}",
                    flush=True,
                )
            base = seconds[("image_folder", "-")]
            print(
                f"{round_} | ratio image_folder / memory: cold {base / seconds[('memory', 'cold')]:.2f}x, "
                f"warm {base / seconds[('memory', 'warm')]:.2f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
