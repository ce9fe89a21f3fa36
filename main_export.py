"""Export a pretraining run's encoder (beside solo-learn's main_*.py): ``python main_export.py RUN --out DIR``."""

from mvssl_plugin.cli.encoder import export_main

if __name__ == "__main__":
    export_main()
