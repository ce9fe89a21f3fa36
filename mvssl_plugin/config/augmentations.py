"""The augmentation pipelines a recipe asks for, checked (their view count: ``config.views``)."""

from __future__ import annotations

from omegaconf import DictConfig

from mvssl_plugin.config.values import is_int, is_number, non_negative, probability, require, select
from mvssl_plugin.errors import ConfigError

AUGMENTATION_PROBABILITIES = tuple(
    f"{name}.prob"
    for name in ("color_jitter", "grayscale", "gaussian_blur", "solarization", "equalization", "horizontal_flip")
)


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
