#!/usr/bin/env bash
# The plugin in a user's solo-learn environment at the far end of its declared range (pyproject.toml):
# a new venv that already holds torch, torchvision and solo-learn, as a solo-learn user's would;
# then the plugin, which must change none of torch, torchvision, lightning or torchmetrics; then
# the fast tier (pytest -m "not slow") and one epoch of mabt through solo-learn's own main_pretrain.py.
#   bash scripts/far_end.sh VENV [TORCH TORCHVISION]     # default: the newest pair pip serves here
#   USER_EXTRA="numpy<2" bash scripts/far_end.sh VENV 2.2.2 0.17.2   # the oldest end, with the numpy 1
#                                                                    # such a user's venv holds
# .ci/run calls it for both ends after the suite; docs/install.md, "Into your own environment".
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(realpath -m "${1:?usage: far_end.sh VENV [TORCH TORCHVISION]}")  # absolute: the last step runs elsewhere
TORCH=${2:-2.14.1}
TORCHVISION=${3:-0.29.1}
# torch >= 2.14 wants setuptools >= 77.0.3; solo-learn's setup.py and Lightning 2.1 import pkg_resources,
# which setuptools 80 still ships (docs/install.md)
SETUPTOOLS=${SETUPTOOLS:-"setuptools>=77.0.3,<81"}
SOLO=${SOLO_SNAPSHOT:-../shared/solo-learn}
say() { printf '[far end] %s\n' "$*"; }
began=$(date +%s)
rm -rf "$VENV"
# the venv takes about 6 GB (torch's CUDA build and its nvidia wheels), and pip unpacks beside it: say
# early where it lacks room, before anything is installed. One-shot venvs keep nothing in pip's cache.
mkdir -p "$(dirname "$VENV")"
free_gb=$(( $(df -Pk "$(dirname "$VENV")" | awk 'NR==2 {print $4}') / 1048576 ))
need_gb=${FAR_END_MIN_GB:-8}  # the oldest end peaked at 7.5 GB on 12-06
say "$free_gb GB free where the venv goes ($(dirname "$VENV"))"
if [ "$free_gb" -lt "$need_gb" ]; then
  say "needs $need_gb GB free: remove other venvs there, or give a VENV path on a larger disk"; exit 1
fi
export PIP_NO_CACHE_DIR=1
python3 -m venv "$VENV"
# quiet, less the find-links notes of this workplace's pip configuration
pip() { "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" 2> >(grep -v "is ignored: it is neither" >&2); }
say "the user's environment: torch==$TORCH torchvision==$TORCHVISION, $SETUPTOOLS, solo-learn"
pip "torch==$TORCH" "torchvision==$TORCHVISION" "$SETUPTOOLS" wheel ${USER_EXTRA:-}
if [ -f "$SOLO/setup.py" ]; then pip --no-build-isolation "$SOLO"; else
  pip --no-build-isolation "git+https://github.com/vturrisi/solo-learn@9187ea39c2c3f43c455ab06664d2b019a9802954"; fi
theirs() { "$VENV/bin/python" -m pip list --format=freeze 2>/dev/null | grep -iE '^(torch|torchvision|lightning|torchmetrics)==' | sort; }
before=$(theirs)
say "before the plugin: $(echo $before)"
# as docs/install.md says: what the environment holds, as constraints, so pip picks the plugin's other
# dependencies to fit them (kornia 0.9 would otherwise take torch up to 2.5.1 or newer)
keep="$VENV/keep.txt"
echo "$before" > "$keep"
pip --no-build-isolation -c "$keep" -e ".[test]"
after=$(theirs)
if [ "$before" != "$after" ]; then
  say "installing the plugin changed the user's packages:"; diff <(echo "$before") <(echo "$after") || true; exit 1
fi
say "the plugin changed none of them"
say "fast tier"
("$VENV/bin/python" -m pytest -q -p no:cacheprovider -m "not slow" -n 2 --dist loadscope)
say "one epoch of mabt through solo-learn's own main_pretrain.py (mvssl-recipes install-solo)"
work=$(mktemp -d)
if [ -f "$SOLO/main_pretrain.py" ]; then cp -r "$SOLO" "$work/solo-learn"; chmod -R u+w "$work/solo-learn"; else
  git clone -q https://github.com/vturrisi/solo-learn "$work/solo-learn"
  git -C "$work/solo-learn" checkout -q 9187ea39c2c3f43c455ab06664d2b019a9802954; fi
"$VENV/bin/mvssl-recipes" install-solo "$work/solo-learn" > /dev/null
"$VENV/bin/python" -c "from mvssl_plugin.synthetic import write_image_folder as w
w('$work/data/train', classes=5); w('$work/data/val', classes=5, per_class=4, seed=1)"
(cd "$work/solo-learn" && OMP_NUM_THREADS=1 WANDB_MODE=offline "$VENV/bin/python" main_pretrain.py \
  --config-path scripts/pretrain/cifar/ --config-name mabt.yaml data.dataset=custom \
  data.train_path="$work/data/train" data.val_path="$work/data/val" data.num_workers=0 \
  backbone.name=narrow_resnet18 +backbone.kwargs.width=8 optimizer.batch_size=8 max_epochs=1 \
  accelerator=cpu "devices='1'" strategy=auto sync_batchnorm=false \
  precision=32 wandb.enabled=false checkpoint.dir="$work/out" auto_resume.enabled=false) > "$work/run.log" 2>&1 \
  || { tail -30 "$work/run.log"; exit 1; }
say "ended 0: $(find "$work/out" -name '*.ckpt' | head -1)"
rm -rf "$work"
say "done in $(( $(date +%s) - began )) s: torch $TORCH, torchvision $TORCHVISION"
