"""Compare pretraining runs from their local logs: ``python main_compare.py --help``."""

from mvssl_plugin.cli.compare import main

if __name__ == "__main__":
    main()
