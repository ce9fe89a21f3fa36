"""``main_linear.py`` / ``mvssl-linear``: solo-learn's linear evaluation or the fast probe
on a pretraining run (see :mod:`mvssl_plugin.train.linear`)."""

from __future__ import annotations

from mvssl_plugin.cli.exits import run_hydra
from mvssl_plugin.train.linear import linear


def main() -> None:
    run_hydra(linear, "linear")


if __name__ == "__main__":
    main()
