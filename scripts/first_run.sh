#!/usr/bin/env bash
# README's first run: pretrain mabt on CIFAR-10 on the CPU, then compare the run(s).
# Data: ../shared/data/cifar10 (a JPEG copy) when present, else CIFAR10_DIR, else
# torchvision's download into ./datasets; without any of them it says what to do.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
data=${CIFAR10_DIR:-../shared/data/cifar10}
if [ -d "$data/train" ] && [ -d "$data/test" ]; then
  paths=(data.train_path="$data/train" data.val_path="$data/test")
elif echo "[first run] no CIFAR-10 copy at $data: fetching torchvision's (170 MB) into ./datasets/cifar10" \
     && "$PY" - <<'PY'
import sys
from torchvision.datasets import CIFAR10

try:
    for train in (True, False):
        CIFAR10("./datasets/cifar10", train=train, download=True)
except Exception as err:  # no network, a proxy, a full disk: one line, then the advice below
    sys.exit(f"[first run] {type(err).__name__}: {err}")
PY
then
  paths=(data.train_path=./datasets/cifar10 data.val_path=./datasets/cifar10)
else
  echo "[first run] no CIFAR-10 copy at $data, and torchvision's download failed (no network?):" >&2
  echo "  put CIFAR-10 as an ImageFolder tree (train/<class>/*.jpg, test/<class>/*.jpg) there," >&2
  echo "  or run with CIFAR10_DIR=/path/to/cifar10 make first-run" >&2
  exit 2
fi
"$PY" main_pretrain.py --config-name mabt_cifar_cpu.yaml "${paths[@]}" "$@"
"$PY" main_compare.py trained_models/mabt --out comparison --targets 10 12
