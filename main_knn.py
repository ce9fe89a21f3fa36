"""Offline kNN on a pretraining run, with solo-learn's flags: ``python main_knn.py --help``."""

from mvssl_plugin.cli.knn import main

if __name__ == "__main__":
    main()
