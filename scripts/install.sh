#!/usr/bin/env bash
# Install what is missing for mvssl-plugin into the active Python; a step whose package is
# already at the pinned version is skipped, so a second call takes seconds.
#   bash scripts/install.sh            # torch pair, solo-learn, the plugin with [test,dali]
#   EXTRAS=test bash scripts/install.sh  # without DALI (788 MB); its tests then skip
#   WITH_SLURM=1 bash scripts/install.sh # and SLURM + munge from apt-get, for tests/benchmarks/test_slurm.py
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python}
EXTRAS=${EXTRAS:-test,dali}
TORCH=2.12.1
TORCHVISION=0.27.1
KORNIA=0.9.0   # CI's exact versions; pyproject.toml declares the ranges the plugin works with
SOLO_COMMIT=9187ea39c2c3f43c455ab06664d2b019a9802954   # solo-learn 1.0.6
SOLO_SNAPSHOT=${SOLO_SNAPSHOT:-../shared/solo-learn}  # unmodified export of that commit, if present

version() { "$PY" -c "import importlib.metadata as m, sys
try: print(m.version(sys.argv[1]))
except m.PackageNotFoundError: pass" "$1"; }
pip() { "$PY" -m pip install -q --disable-pip-version-check "$@"; }

step() { printf '[install] %s\n' "$*"; }

if [ "$(version torch)" != "$TORCH" ] || [ "$(version torchvision)" != "$TORCHVISION" ]; then
  step "torch==$TORCH torchvision==$TORCHVISION"
  pip "torch==$TORCH" "torchvision==$TORCHVISION"
fi

if [ "$(version setuptools | cut -d. -f1)" = "" ] || [ "$(version setuptools | cut -d. -f1)" -ge 70 ] \
   || [ -z "$(version wheel)" ]; then
  step "setuptools<70 wheel (solo-learn's setup.py needs the old API)"
  pip "setuptools<70" wheel
fi

if [ "$(version solo-learn)" != "1.0.6" ]; then
  if [ -f "$SOLO_SNAPSHOT/setup.py" ]; then
    step "solo-learn from $SOLO_SNAPSHOT (commit $SOLO_COMMIT)"
    pip --no-build-isolation "$SOLO_SNAPSHOT"
  else
    step "solo-learn from its repository at commit $SOLO_COMMIT"
    pip --no-build-isolation "git+https://github.com/vturrisi/solo-learn@$SOLO_COMMIT"
  fi
fi

# the plugin itself (editable) with its extras; pip only fetches what is missing
# asked from outside the checkout, so that the installed copy answers, not ./mvssl_plugin
here=$(cd / && "$PY" -c "import mvssl_plugin, pathlib; print(pathlib.Path(mvssl_plugin.__file__).resolve().parents[1])" 2>/dev/null || true)
stamp=".install-stamp-$(echo "$EXTRAS" | tr , -)"
if [ "$here" != "$(pwd -P)" ] || [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  step "mvssl-plugin (editable) with [$EXTRAS]"
  pip --no-build-isolation -e ".[$EXTRAS]" "kornia==$KORNIA"
  touch "$stamp"
fi
# SLURM and munge for tests/benchmarks/test_slurm.py (the sbatch template on a one-node cluster, see
# docs/slurm.md), only when asked (WITH_SLURM=1, as `make test` does), where apt-get exists,
# as root or with password-less sudo, and SLURM is missing. A failure here fails nothing: that
# test then skips, saying why.
SLURM_PACKAGES="slurmctld slurmd slurm-client munge"
install_slurm() {
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo -n true 2>/dev/null || { echo "not root, and no password-less sudo"; return 1; }
    sudo="sudo -n"
  fi
  local get="$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $SLURM_PACKAGES"
  $get >/dev/null 2>&1 && return 0
  # a fresh machine may have no package lists yet
  { $sudo apt-get update -q >/dev/null 2>&1 && $get >/dev/null 2>&1; } || { echo "apt-get install failed"; return 1; }
}
if [ "${WITH_SLURM:-0}" = 1 ] && ! command -v sbatch >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null 2>&1; then
    step "SLURM not installed (no apt-get here): tests/benchmarks/test_slurm.py will skip"
  else
    step "SLURM and munge (apt-get install $SLURM_PACKAGES)"
    why=$(install_slurm) || step "SLURM not installed ($why): tests/benchmarks/test_slurm.py will skip"
  fi
fi

step "ready: $("$PY" -c 'import importlib.metadata as m; print(*(f"{p} {m.version(p)}" for p in ("torch", "solo-learn", "mvssl-plugin")), sep=" | ")')"
