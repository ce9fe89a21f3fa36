"""``main_pretrain.py`` / ``mvssl-pretrain``: pretraining from a recipe (see
:mod:`mvssl_plugin.train.pretrain`)."""

from __future__ import annotations

from mvssl_plugin.cli.exits import run_hydra
from mvssl_plugin.train.pretrain import pretrain


def main() -> None:
    run_hydra(pretrain, "pretrain")


if __name__ == "__main__":
    main()
