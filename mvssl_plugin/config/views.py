"""The view count m, in one place: how a recipe says it, how solo-learn's crop counts are
derived from it, and how they are read back. Every other module asks here.

A recipe says m as ``data.num_views`` (interpolated into the pipelines' ``num_crops`` by the
plugin's recipes, spread over them by :func:`views_to_crops` for solo-learn's own
augmentation files) or directly as each pipeline's ``augmentations[i].num_crops``.
solo-learn reads ``data.num_large_crops`` / ``num_small_crops`` (crops of the first
pipeline's size are large): :func:`set_crop_counts` derives them, :func:`count_views` reads
m back. Inside solo-learn's ``main_pretrain.py``, which asserts 2 large crops for its own
methods, :func:`hide_crop_counts` keeps them aside under :data:`HIDDEN_CROPS` and
:func:`restore_crop_counts` (the method's config check) puts them back
(``mvssl_plugin_autoregister``, the bridge to solo-learn's scripts, calls the first).
"""

from __future__ import annotations

from omegaconf import DictConfig

from mvssl_plugin.config.values import is_int, select
from mvssl_plugin.errors import ConfigError


def count_views(cfg: DictConfig) -> int:
    """m, views per image: solo-learn's ``data.num_large_crops + data.num_small_crops`` when
    set (every solo-learn method reads these), else the pipelines' ``num_crops``."""
    large, small = select(cfg, "data.num_large_crops"), select(cfg, "data.num_small_crops")
    if large is not None:
        return int(large) + int(small or 0)
    return sum(int(pipeline.num_crops) for pipeline in select(cfg, "augmentations", []) or [])


def set_crop_counts(cfg: DictConfig) -> None:
    """``data.num_large_crops`` / ``num_small_crops`` from the pipelines, by solo-learn's
    rule (crops of the first pipeline's size are large), so the method checks can run
    before solo-learn's parser does the same."""
    big = cfg.augmentations[0].crop_size
    large = sum(int(p.num_crops) for p in cfg.augmentations if p.crop_size == big)
    cfg.data.num_large_crops = large
    cfg.data.num_small_crops = sum(int(p.num_crops) for p in cfg.augmentations) - large


#: where :func:`hide_crop_counts` keeps the crop counts while solo-learn's script checks them
HIDDEN_CROPS = "mvssl_crop_counts"


def views_to_crops(cfg: DictConfig) -> None:
    """``data.num_views`` m, when set, as the crops of the large pipelines (those of the first
    pipeline's crop size, solo-learn's rule): m spread evenly over them, the first ones one
    more when they do not divide m. For recipes on solo-learn's own augmentation files,
    whose ``num_crops`` cannot be interpolated."""
    m = select(cfg, "data.num_views")
    pipelines = select(cfg, "augmentations")
    if m is None or not pipelines:
        return
    if not is_int(m) or m < 1:
        raise ConfigError(f"data.num_views={m!r}: must be an integer >= 1")
    large = [p for p in pipelines if p.crop_size == pipelines[0].crop_size]
    if m < len(large):
        raise ConfigError(f"data.num_views={m}: fewer views than the {len(large)} large augmentation pipelines")
    for i, pipeline in enumerate(large):
        pipeline.num_crops = m // len(large) + (1 if i < m % len(large) else 0)


def hide_crop_counts(cfg: DictConfig) -> None:
    """Keeps ``data.num_large_crops``/``num_small_crops`` aside and shows solo-learn's
    ``main_pretrain.py`` the 2 large crops it asserts for methods other than wmse/mae;
    :func:`restore_crop_counts` (the method's config check) puts them back."""
    large, small = int(cfg.data.num_large_crops), int(cfg.data.num_small_crops)
    if large != 2:
        cfg.data[HIDDEN_CROPS] = {"num_large_crops": large, "num_small_crops": small}
        cfg.data.num_large_crops = 2


def restore_crop_counts(cfg: DictConfig) -> None:
    """Undoes :func:`hide_crop_counts` (no-op when nothing is hidden)."""
    hidden = select(cfg, f"data.{HIDDEN_CROPS}")
    if hidden is not None:
        cfg.data.num_large_crops = int(hidden.num_large_crops)
        cfg.data.num_small_crops = int(hidden.num_small_crops)
        del cfg.data[HIDDEN_CROPS]
