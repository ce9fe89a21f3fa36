"""What the plugin does inside solo-learn's own scripts (called by :mod:`mvssl_plugin_autoregister`).

* ``solo.methods`` imported: :func:`mvssl_plugin.registry.register` (``mabt``, ``mavicreg``,
  the plugin's backbones in solo-learn's tables).
* ``solo.args.pretrain`` imported: its ``parse_cfg`` is wrapped, for the plugin's methods
  only: ``data.num_views`` (when set) becomes the crops of the augmentation pipelines, and
  the view count is kept past solo-learn's ``main_pretrain.py``, which allows other than 2
  large crops only for its wmse and mae (the method's own config check puts it back).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from mvssl_plugin.config.augmentations import hide_crop_counts, views_to_crops
from mvssl_plugin.registry import PLUGIN_METHODS


def on_import(name: str, module: Any) -> None:
    if name == "solo.methods":
        from mvssl_plugin.registry import register

        register()
    elif name == "solo.args.pretrain" and not hasattr(module.parse_cfg, "__wrapped__"):
        module.parse_cfg = wrap_parse_cfg(module.parse_cfg)


def wrap_parse_cfg(parse_cfg: Callable) -> Callable:
    """solo-learn's ``parse_cfg``, plus the views of the plugin's methods (see module doc);
    other methods' configs go through untouched."""

    @functools.wraps(parse_cfg)
    def wrapped(cfg):
        ours = cfg.get("method") in PLUGIN_METHODS
        if ours:
            views_to_crops(cfg)
        cfg = parse_cfg(cfg)
        if ours:
            hide_crop_counts(cfg)
        return cfg

    return wrapped
