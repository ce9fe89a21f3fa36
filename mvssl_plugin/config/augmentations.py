"""The views a recipe asks for: augmentation pipelines, crop counts, m."""

from __future__ import annotations

from omegaconf import DictConfig

from mvssl_plugin.config.values import is_int, is_number, non_negative, probability, require, select
from mvssl_plugin.errors import ConfigError

AUGMENTATION_PROBABILITIES = tuple(
    f"{name}.prob"
    for name in ("color_jitter", "grayscale", "gaussian_blur", "solarization", "equalization", "horizontal_flip")
)


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


def check_augmentations(cfg: DictConfig) -> None:
    """Each pipeline's crop_size/num_crops are integers >= 1, probabilities in [0, 1],
    jitter strengths and crop scales in range."""
    pipelines = select(cfg, "augmentations")
    if pipelines is None or len(pipelines) == 0:
        raise ConfigError("augmentations: missing; add at least one pipeline with crop_size and num_crops")
    for i, pipeline in enumerate(pipelines):
        for key in ("num_crops", "crop_size"):
            value = select(pipeline, key)
            if not is_int(value) or value < 1:
                raise ConfigError(f"augmentations[{i}].{key}={value!r}: must be an integer >= 1")
        where = f"augmentations[{i}]."
        for key in AUGMENTATION_PROBABILITIES:
            require(pipeline, key, probability, "must be a probability in [0, 1]", where)
        for key in ("color_jitter.brightness", "color_jitter.contrast", "color_jitter.saturation"):
            require(pipeline, key, non_negative, "must be a number >= 0", where)
        require(pipeline, "color_jitter.hue", lambda v: is_number(v) and 0 <= v <= 0.5, "must be in [0, 0.5]", where)
        low, high = select(pipeline, "rrc.crop_min_scale", 0.08), select(pipeline, "rrc.crop_max_scale", 1.0)
        if not (is_number(low) and is_number(high) and 0 < low <= high <= 1):
            raise ConfigError(
                f"augmentations[{i}].rrc: crop_min_scale={low!r}, crop_max_scale={high!r}; "
                "need 0 < crop_min_scale <= crop_max_scale <= 1"
            )
