#!/usr/bin/env bash
# CPU-scale side-by-side on the CIFAR-10 JPEG copy: mabt / mavicreg (4 views) against
# solo-learn's barlow_twins / vicreg (2 views), same recipe otherwise (width-16 ResNet-18,
# 10% of the training images, d = 256, beta by the rule), plus a random-init reference.
# Every run is then evaluated three ways (solo-learn's linear flow, the fast probe, kNN) and
# compared. Results: benchmarks/results/cpu_demo/ (docs/evaluate.md). About 25 minutes on
# 2 cores. A sanity run of the tooling, far too small to test the paper's claims.
#
#   bash benchmarks/cpu_compare_demo.sh            # DATA=../shared/data/cifar10 EPOCHS=5
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data/cifar10}
OUT=${OUT:-benchmarks/results/cpu_demo}
EPOCHS=${EPOCHS:-5}
RUNS=$OUT/trained_models
COMMON=(data.train_path=$DATA/train data.val_path=$DATA/test max_epochs=$EPOCHS checkpoint.dir=$RUNS auto_resume.enabled=false)
timed() { local start=$SECONDS; "$@"; echo "mvssl-demo: $(( SECONDS - start )) s: $*" >> "$OUT/timings.txt"; }

mkdir -p "$OUT"
: > "$OUT/timings.txt"
timed python main_pretrain.py --config-name mabt_cifar_cpu.yaml "${COMMON[@]}"
timed python main_pretrain.py --config-name mabt_cifar_cpu.yaml method=barlow_twins data.num_views=2 "${COMMON[@]}"
timed python main_pretrain.py --config-name mavicreg_cifar_cpu.yaml "${COMMON[@]}"
timed python main_pretrain.py --config-name mavicreg_cifar_cpu.yaml method=vicreg data.num_views=2 "${COMMON[@]}"
timed python benchmarks/random_init_run.py --config-name mabt_cifar_cpu.yaml --out "$RUNS/random_init/seed5" "${COMMON[@]}"

for run in "$RUNS"/*/*/; do
  timed python main_linear.py --config-name linear_cifar_cpu.yaml pretrained_feature_extractor="$run" \
      data.train_path=$DATA/train data.val_path=$DATA/test checkpoint.dir=$OUT/linear
  timed python main_linear.py --config-name probe_cifar_cpu.yaml pretrained_feature_extractor="$run" \
      data.train_path=$DATA/train data.val_path=$DATA/test probe.test_patches=4 checkpoint.dir=$OUT/linear
  timed python main_knn.py --pretrained_checkpoint_dir "$run" --dataset cifar10 --train_data_path $DATA/train \
      --val_data_path $DATA/test --data_fraction 0.1 --k 20 200 --temperature 0.07 --num_workers 2
done
python main_compare.py "$RUNS" --out "$OUT" --targets 20 25 30
python benchmarks/probe_agreement.py "$RUNS" "$OUT/linear" "$OUT/timings.txt" > "$OUT/evaluation.md"
cat "$OUT/evaluation.md"
