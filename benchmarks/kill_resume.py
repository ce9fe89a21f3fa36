"""Kill a pretraining run at random moments, resume it each time, and compare its loss
curve with an uninterrupted run of the same command.

    python benchmarks/kill_resume.py [--kills 3] [--epochs 8] [--seed 0] [--set accelerator=gpu ...]

Uses a generated ImageFolder (3 classes x 40 images) and the width-8 narrow ResNet-18, so
it runs in a few minutes on a CPU; ``--set`` adds Hydra overrides to both runs (the GPU kit's
smoke list runs it on a GPU). Prints each kill (when, during which epoch), where each resume
started, and the per-epoch ``train_barlow_loss`` of both runs. Exits 1 unless the killed run
completed every epoch, in one run folder, with a loss for each.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from mvssl_plugin.synthetic import tiny_overrides  # noqa: E402
from mvssl_plugin.synthetic import write_image_folder as make_image_folder  # noqa: E402

LOSS = re.compile(r"mvssl: epoch (\d+) train_\S+ .*train_barlow_loss=([0-9.e+-]+)")


def run_args(data: dict, out: Path, epochs: int, overrides: list[str]) -> list[str]:
    extra = {"auto_resume.enabled": True, "optimizer.lr": 0.05, "max_epochs": epochs}
    extra.update(dict(o.split("=", 1) for o in overrides))
    return [sys.executable, str(REPO / "main_pretrain.py"), "--config-name", "mabt_cifar.yaml"] + tiny_overrides(
        data, out, **extra
    )


def losses(text: str) -> dict[int, float]:
    return {int(e): float(v) for e, v in LOSS.findall(text.replace("\r", "\n"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="print each segment's epoch lines")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="Hydra overrides for both runs")
    args = parser.parse_args()
    bad = [o for o in args.set if "=" not in o]
    if bad:
        parser.error(f"--set takes KEY=VALUE overrides, got {bad}")
    epochs = int(dict(o.split("=", 1) for o in args.set).get("max_epochs", args.epochs))  # --set wins
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp())
    data = {"train": str(make_image_folder(tmp / "train", per_class=40)), "test": str(make_image_folder(tmp / "test"))}
    env = dict(os.environ, PYTHONWARNINGS="ignore")

    reference = subprocess.run(
        run_args(data, tmp / "reference", args.epochs, args.set), env=env, capture_output=True, text=True
    )
    ref = losses(reference.stdout)

    out = tmp / "killed"
    curve: dict[int, float] = {}
    for k in range(args.kills + 1):
        proc = subprocess.Popen(run_args(data, out, args.epochs, args.set), env=env, stdout=subprocess.PIPE, text=True)
        if k < args.kills:
            before = set(out.glob("mabt/*/*.ckpt"))
            while proc.poll() is None and set(out.glob("mabt/*/*.ckpt")) <= before:
                time.sleep(0.01)  # wait for this segment's first new checkpoint
            time.sleep(rng.uniform(0.0, 1.0))  # then kill somewhere in the next epoch
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        text, _ = proc.communicate()
        resumed = re.search(r"Resuming from .*ep=(\d+)\.ckpt", text)
        ckpts = sorted(p.name.split("-ep=")[1] for p in out.glob("mabt/*/*.ckpt*"))
        state = "killed" if proc.returncode == -signal.SIGKILL else f"exit {proc.returncode}"
        print(f"segment {k}: {state}; resumed after epoch {resumed.group(1) if resumed else '-'}; files now {ckpts}")
        if args.verbose:
            print("\n".join(line for line in text.replace("\r", "\n").split("\n") if "mvssl: epoch" in line))
        curve.update(losses(text))
    folders = len(list(out.glob("mabt/*")))
    print(f"run folders: {folders}")
    print("| epoch | uninterrupted | killed and resumed |")
    print("|---|---|---|")
    for epoch in range(epochs):
        print(f"| {epoch} | {ref.get(epoch, float('nan')):.2f} | {curve.get(epoch, float('nan')):.2f} |")
    missing = sorted(set(range(epochs)) - set(curve))
    if proc.returncode != 0 or folders != 1 or missing:
        print(f"kill_resume: FAILED: exit {proc.returncode}, {folders} run folder(s), no loss for epochs {missing}")
        sys.exit(1)


if __name__ == "__main__":
    main()
