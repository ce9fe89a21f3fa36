"""A run folder holding a recipe's network at random initialisation: the reference every
evaluation of a pretrained run should beat.

    python benchmarks/random_init_run.py --config-name mabt_cifar_cpu.yaml --out trained_models/random_init [overrides]

Builds the method exactly as ``main_pretrain.py`` would (same recipe, overrides and seed),
trains nothing, and writes ``args.json`` and ``random-init.ckpt`` in solo-learn's layout,
so ``main_linear.py``, the fast probe and ``main_knn.py`` evaluate it like any run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from omegaconf import OmegaConf

from mvssl_plugin.files import write_json
from mvssl_plugin.runs import ARGS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config-name", required=True)
    parser.add_argument("--out", required=True, help="the run folder to write")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for main_pretrain.py")
    args = parser.parse_args()

    from mvssl_plugin.cli.config_name import compose_recipe
    from mvssl_plugin.cli.exits import quiet_dependency_warnings
    from mvssl_plugin.train.pretrain import build_pretrain_model

    quiet_dependency_warnings()
    cfg, model = build_pretrain_model(compose_recipe(args.config_name, "pretrain", args.overrides))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg.name = f"{cfg.name}-random-init"
    write_json(out / ARGS, OmegaConf.to_container(cfg))
    torch.save({"state_dict": model.state_dict(), "epoch": -1}, out / "random-init.ckpt")
    print(f"random-init run of {cfg.method} written to {out}")


if __name__ == "__main__":
    main()
