"""solo-learn's transforms as the plugin takes them: the m-view pretraining transform, and
whether a dataset's validation transform keeps the images' own size."""

from __future__ import annotations

from typing import Callable

from omegaconf import DictConfig

from mvssl_plugin.data.key_checks import SMALL_IMAGE_DATASETS


def pretrain_transform(cfg: DictConfig) -> Callable:
    """m-view transform: each pipeline's ``num_crops`` independent draws (solo-learn's)."""
    # local: solo-learn (all of it, with timm and Lightning: seconds) loads when a transform is built;
    # importing this module (the config checks do) loads none of it
    from solo.data.pretrain_dataloader import FullTransformPipeline, NCropAugmentation, build_transform_pipeline

    return FullTransformPipeline(
        [NCropAugmentation(build_transform_pipeline(cfg.data.dataset, aug), aug.num_crops) for aug in cfg.augmentations]
    )


def eval_keeps_size(dataset: str) -> bool:
    """True when solo-learn's validation transform for ``dataset`` does not resize (CIFAR's:
    ToTensor + Normalize), so every validation image must have one size to be batched."""
    return dataset in SMALL_IMAGE_DATASETS
