"""Hydra entry points (``main_pretrain.py``, ``main_linear.py`` and the console scripts)."""
