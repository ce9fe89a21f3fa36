"""Config checks and defaults applied before solo-learn sees a Hydra config.

solo-learn validates with bare ``assert`` statements deep inside model construction;
everything here runs first and raises :class:`ConfigError` naming the key and the fix.
It also resolves ``auto`` orthogonality weights (the beta rule) for the plugin's methods
and for solo-learn's own ``barlow_twins`` and ``vicreg``, so one recipe serves both.
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from mvssl_plugin import beta as beta_rule
from mvssl_plugin.data.folders import empty_class_folders, is_image_folder_tree
from mvssl_plugin.errors import ConfigError

AUTO = "auto"
SUPPORTED_DATASETS = ("cifar10", "cifar100", "stl10", "imagenet", "imagenet100", "custom")
SMALL_IMAGE_DATASETS = ("cifar10", "cifar100")
AUGMENTATION_PROBABILITIES = tuple(
    f"{name}.prob"
    for name in ("color_jitter", "grayscale", "gaussian_blur", "solarization", "equalization", "horizontal_flip")
)
SUPPORTED_FORMATS = ("image_folder", "h5", "dali")
DALI_DEVICES = ("auto", "cpu", "gpu")


@dataclass(frozen=True)
class BetaSlot:
    """Where a method keeps its orthogonality weight, and how beta maps onto it.

    ``weight = beta`` (Barlow Twins' lamb) or ``weight = beta * method_kwargs[relative_to]``
    (VICReg's covariance weight, beta being the covariance/invariance ratio).
    """

    key: str
    default_c: float
    relative_to: Optional[str] = None
    relative_default: float = 1.0


BARLOW_SLOT = BetaSlot(key="lamb", default_c=beta_rule.BARLOW_TWINS_C)
VICREG_SLOT = BetaSlot(
    key="cov_loss_weight", default_c=beta_rule.VICREG_C, relative_to="sim_loss_weight", relative_default=25.0
)
#: Methods whose orthogonality weight may be ``auto``: the plugin's and solo-learn's.
BETA_SLOTS: dict[str, BetaSlot] = {
    "mabt": BARLOW_SLOT,
    "barlow_twins": BARLOW_SLOT,
    "mavicreg": VICREG_SLOT,
    "vicreg": VICREG_SLOT,
}


def beta_of(method: Optional[str], method_kwargs: Any) -> Optional[float]:
    """The beta a method's kwargs hold (the inverse of :func:`resolve_beta`'s mapping):
    None for methods without a slot or a weight that is not a number yet."""
    slot = BETA_SLOTS.get(method)
    weight = method_kwargs.get(slot.key) if slot is not None and method_kwargs is not None else None
    if not _is_number(weight):
        return None
    if slot.relative_to is None:
        return float(weight)
    return float(weight) / float(method_kwargs.get(slot.relative_to, slot.relative_default))


def select(cfg: DictConfig, key: str, default: Any = None) -> Any:
    return OmegaConf.select(cfg, key, default=default)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def count_views(cfg: DictConfig) -> int:
    """m: views per image, summed over the augmentation pipelines' ``num_crops``."""
    return sum(int(pipeline.num_crops) for pipeline in cfg.augmentations)


def resolve_beta(cfg: DictConfig) -> Optional[float]:
    """Replaces ``method_kwargs.<weight>: auto`` by the beta rule's number, in place.

    ``method_kwargs.beta_c`` (c) and ``method_kwargs.beta_multiview_factor`` are filled
    in with their defaults so that args.json and wandb show how the number was made.
    Returns the resolved weight, or None when the method has no slot or the weight is
    an explicit number (which is only checked).
    """
    slot = BETA_SLOTS.get(select(cfg, "method"))
    if slot is None:
        return None
    kwargs = cfg.method_kwargs
    value = select(cfg, f"method_kwargs.{slot.key}", AUTO)
    if value != AUTO:
        if not _is_number(value) or value < 0:
            raise ConfigError(
                f"method_kwargs.{slot.key}={value!r}: the orthogonality weight must be a number >= 0 "
                f"or '{AUTO}' (beta = c / proj_output_dim)"
            )
        return None
    dim = select(cfg, "method_kwargs.proj_output_dim")
    kwargs.beta_c = select(cfg, "method_kwargs.beta_c", slot.default_c)
    kwargs.beta_multiview_factor = select(cfg, "method_kwargs.beta_multiview_factor", beta_rule.MULTIVIEW_FACTOR)
    try:
        beta = beta_rule.beta_for_projector(
            dim, c=kwargs.beta_c, num_views=count_views(cfg), multiview_factor=kwargs.beta_multiview_factor
        )
    except ValueError as err:
        raise ConfigError(f"cannot resolve method_kwargs.{slot.key}=auto: {err} (method_kwargs)") from err
    weight = beta
    if slot.relative_to is not None:
        kwargs[slot.relative_to] = select(cfg, f"method_kwargs.{slot.relative_to}", slot.relative_default)
        weight = beta * kwargs[slot.relative_to]
    kwargs[slot.key] = float(weight)
    return float(weight)


def _positive(value: Any) -> bool:
    return _is_number(value) and value > 0


def _non_negative(value: Any) -> bool:
    return _is_number(value) and value >= 0


def _probability(value: Any) -> bool:
    return _is_number(value) and 0 <= value <= 1


def _count(value: Any) -> bool:
    return _is_int(value) and value >= 1


def require(cfg: DictConfig, key: str, ok, what: str, prefix: str = "") -> None:
    """Raises ConfigError ``<prefix><key>=value: what`` unless the key is absent or ``ok(value)``."""
    value = select(cfg, key)
    if value is not None and not ok(value):
        raise ConfigError(f"{prefix}{key}={value!r}: {what}")


#: (key, test, what it must be) for the keys solo-learn would otherwise reject deep inside
#: torch, Lightning or its own asserts, or silently misuse.
TRAINING_RULES = (
    ("optimizer.lr", _positive, "must be a number > 0"),
    ("optimizer.classifier_lr", _positive, "must be a number > 0"),
    ("optimizer.weight_decay", _non_negative, "must be a number >= 0"),
    ("scheduler.warmup_epochs", _non_negative, "must be a number >= 0"),
    ("scheduler.min_lr", _non_negative, "must be a number >= 0"),
    ("data.num_workers", lambda v: _is_int(v) and v >= 0, "must be an integer >= 0"),
    ("seed", _is_int, "must be an integer"),
    ("checkpoint.frequency", _count, "must be an integer >= 1"),
    ("knn_eval.k", _count, "must be an integer >= 1"),
    ("backbone.kwargs.width", _count, "must be an integer >= 1"),
    ("method_kwargs.scale_loss", _positive, "must be a number > 0"),
    ("method_kwargs.sim_loss_weight", _non_negative, "must be a number >= 0"),
    ("method_kwargs.var_loss_weight", _non_negative, "must be a number >= 0"),
    ("method_kwargs.beta_c", _positive, "must be a number > 0"),
    ("method_kwargs.beta_multiview_factor", lambda v: _is_number(v) and 0 < v <= 1, "must be in (0, 1]"),
)
PRECISIONS = ("64", "32", "16", "bf16", "64-true", "32-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true")
SCHEDULERS = ("warmup_cosine", "step", "none")  # what solo-learn's configure_optimizers builds


def check_training_keys(cfg: DictConfig, optimizers: tuple[str, ...]) -> None:
    """Batch size, epochs, optimizer, scheduler, precision and the other numbers of
    :data:`TRAINING_RULES`."""
    batch_size = select(cfg, "optimizer.batch_size")
    if not _is_int(batch_size) or batch_size < 2:
        raise ConfigError(f"optimizer.batch_size={batch_size!r}: must be an integer >= 2 (batch statistics)")
    max_epochs = select(cfg, "max_epochs")
    if not _is_int(max_epochs) or max_epochs < 1:
        raise ConfigError(f"max_epochs={max_epochs!r}: must be an integer >= 1")
    name = select(cfg, "optimizer.name")
    if name not in optimizers:
        raise ConfigError(f"optimizer.name={name!r}: choose one of {sorted(optimizers)}")
    scheduler = select(cfg, "scheduler.name", "none")
    if scheduler not in SCHEDULERS:
        raise ConfigError(f"scheduler.name={scheduler!r}: choose one of {SCHEDULERS}")
    if scheduler == "step":
        steps = select(cfg, "scheduler.lr_decay_steps")
        if steps is None or len(steps) == 0 or not all(_count(s) for s in steps):
            raise ConfigError(f"scheduler.lr_decay_steps={steps!r}: the step scheduler needs epochs, e.g. [60, 80]")
    precision = str(select(cfg, "precision", "32"))
    if precision not in PRECISIONS:
        raise ConfigError(f"precision={precision!r}: choose one of {PRECISIONS}")
    for key, ok, what in TRAINING_RULES:
        require(cfg, key, ok, what)


def check_augmentations(cfg: DictConfig, multiview: bool) -> None:
    """Each pipeline's crop_size/num_crops are integers >= 1; m-view methods need m >= 2."""
    pipelines = select(cfg, "augmentations")
    if pipelines is None or len(pipelines) == 0:
        raise ConfigError("augmentations: missing; add at least one pipeline with crop_size and num_crops")
    for i, pipeline in enumerate(pipelines):
        for key in ("num_crops", "crop_size"):
            value = select(pipeline, key)
            if not _is_int(value) or value < 1:
                raise ConfigError(f"augmentations[{i}].{key}={value!r}: must be an integer >= 1")
        where = f"augmentations[{i}]."
        for key in AUGMENTATION_PROBABILITIES:
            require(pipeline, key, _probability, "must be a probability in [0, 1]", where)
        for key in ("color_jitter.brightness", "color_jitter.contrast", "color_jitter.saturation"):
            require(pipeline, key, _non_negative, "must be a number >= 0", where)
        require(pipeline, "color_jitter.hue", lambda v: _is_number(v) and 0 <= v <= 0.5, "must be in [0, 0.5]", where)
        low, high = select(pipeline, "rrc.crop_min_scale", 0.08), select(pipeline, "rrc.crop_max_scale", 1.0)
        if not (_is_number(low) and _is_number(high) and 0 < low <= high <= 1):
            raise ConfigError(
                f"augmentations[{i}].rrc: crop_min_scale={low!r}, crop_max_scale={high!r}; "
                "need 0 < crop_min_scale <= crop_max_scale <= 1"
            )
    m = count_views(cfg)
    if multiview and m < 2:
        raise ConfigError(
            f"method={cfg.method} needs at least 2 views per image, the augmentations give {m}: "
            "raise augmentations[0].num_crops (the recipes' data.num_views)"
        )


def world_size(cfg: DictConfig) -> int:
    """Processes of the run: devices (a list once :func:`adapt_to_hardware` ran) x nodes."""
    devices = select(cfg, "devices", 1)
    return (devices if _is_int(devices) else len(devices)) * int(select(cfg, "num_nodes", 1) or 1)


def check_view_parallel(cfg: DictConfig) -> None:
    """``method_kwargs.view_parallel``: one resolution, views divisible by the processes."""
    enabled = select(cfg, "method_kwargs.view_parallel", False)
    if not isinstance(enabled, bool):
        raise ConfigError(f"method_kwargs.view_parallel={enabled!r}: use true or false")
    if not enabled:
        return
    world = world_size(cfg)
    if len(cfg.augmentations) != 1:
        raise ConfigError(
            "method_kwargs.view_parallel=true needs views of one resolution (one augmentation pipeline); "
            "mixed-resolution recipes spread images, not views"
        )
    m = count_views(cfg)
    if world < 2 or m % world != 0:
        raise ConfigError(
            f"method_kwargs.view_parallel=true spreads {m} views over {world} process(es): "
            "use devices that divide the number of views (at least 2), or view_parallel=false"
        )


def check_projector_dims(cfg: DictConfig, required: bool) -> None:
    """``proj_output_dim``/``proj_hidden_dim`` are integers >= 1 (and present if required)."""
    for key in ("proj_output_dim", "proj_hidden_dim"):
        value = select(cfg, f"method_kwargs.{key}")
        if value is None and required:
            raise ConfigError(f"method_kwargs.{key} is missing: set it, e.g. method_kwargs.{key}=256")
        if value is not None and (not _is_int(value) or value < 1):
            raise ConfigError(f"method_kwargs.{key}={value!r}: must be an integer >= 1")


def torchvision_archive_present(dataset: str, path: str) -> bool:
    """True when ``path`` holds the files torchvision's CIFAR/STL-10 classes read."""
    folder = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python", "stl10": "stl10_binary"}[dataset]
    return os.path.isdir(os.path.join(path, folder))


def _check_class_folders(key: str, path: str) -> None:
    empty = empty_class_folders(path)
    if empty:
        raise ConfigError(
            f"{key}={path!r}: class folder(s) {empty[:5]} hold no images: remove them or add images "
            "(every sub-folder is a class)"
        )


def _check_dali(cfg: DictConfig) -> None:
    """DALI reads ImageFolder trees (any dataset) and decodes on the CPU or a GPU; runs
    after the paths are checked, so only what DALI adds is checked here."""
    import torch

    from mvssl_plugin.data.dali import dali_available

    if not dali_available():
        raise ConfigError(
            "data.format=dali needs NVIDIA DALI, which is not installed: "
            "pip install nvidia-dali-cuda120 (or use data.format=image_folder)"
        )
    device = select(cfg, "dali.device", AUTO)
    if device not in DALI_DEVICES:
        raise ConfigError(f"dali.device={device!r}: choose one of {DALI_DEVICES}")
    if device == AUTO:
        device = "gpu" if select(cfg, "accelerator") in ("gpu", "cuda") and torch.cuda.is_available() else "cpu"
    elif device == "gpu" and not torch.cuda.is_available():
        raise ConfigError("dali.device=gpu needs a CUDA GPU, and none is visible: set dali.device=cpu")
    cfg.dali = select(cfg, "dali", {}) or {}
    cfg.dali.device = device
    threads = select(cfg, "dali.num_threads")
    if threads is not None and not _count(threads):
        raise ConfigError(f"dali.num_threads={threads!r}: must be an integer >= 1 (or null for data.num_workers)")
    path = select(cfg, "data.train_path")
    # _check_data_path also lets torchvision's CIFAR/STL-10 files through, which DALI cannot read
    if not select(cfg, "data.no_labels", False) and not is_image_folder_tree(path):
        raise ConfigError(
            f"data.train_path={path!r} is not an ImageFolder tree (one sub-folder of images per class), "
            "which data.format=dali reads: convert it, or use data.format=image_folder"
        )


def _check_data_path(cfg: DictConfig, key: str) -> None:
    path = select(cfg, key)
    dataset = cfg.data.dataset
    if dataset in ("cifar10", "cifar100", "stl10") and cfg.data.format in ("image_folder", "dali"):
        if path is not None and is_image_folder_tree(path):
            return _check_class_folders(key, path)
        if path is not None and torchvision_archive_present(dataset, path):
            return
        if select(cfg, "data.download", False):
            return
        if path is None or not os.path.exists(str(path)):
            raise ConfigError(
                f"{key}={path!r} does not exist: point it at an ImageFolder tree of {dataset} "
                f"(one sub-folder of images per class) or set data.download=true to fetch {dataset} there"
            )
        raise ConfigError(
            f"{key}={path!r} holds neither an ImageFolder tree (one sub-folder of images per class) "
            f"nor torchvision's {dataset} files: point it at an ImageFolder tree "
            f"or set data.download=true to fetch {dataset} there"
        )
    if path is None or not os.path.exists(str(path)):
        raise ConfigError(f"{key}={path!r} does not exist: point it at your {dataset} data")
    if cfg.data.format in ("image_folder", "dali") and not select(cfg, "data.no_labels", False):
        if not is_image_folder_tree(path):
            raise ConfigError(f"{key}={path!r} is not an ImageFolder tree (one sub-folder of images per class)")
        _check_class_folders(key, path)


def _check_data(cfg: DictConfig) -> None:
    dataset = select(cfg, "data.dataset")
    if dataset not in SUPPORTED_DATASETS:
        raise ConfigError(f"data.dataset={dataset!r}: choose one of {SUPPORTED_DATASETS}")
    cfg.data.format = select(cfg, "data.format", "image_folder")
    if cfg.data.format not in SUPPORTED_FORMATS:
        raise ConfigError(f"data.format={cfg.data.format!r}: choose one of {SUPPORTED_FORMATS}")
    fraction = select(cfg, "data.fraction", -1)
    if not _is_number(fraction) or not (fraction == -1 or 0 < fraction < 1):
        raise ConfigError(f"data.fraction={fraction!r}: use -1 for all images or a number in (0, 1)")
    _check_data_path(cfg, "data.train_path")
    if select(cfg, "data.val_path") is not None:
        _check_data_path(cfg, "data.val_path")
    if cfg.data.format == "dali":
        _check_dali(cfg)


def apply_backbone_defaults(cfg: DictConfig, plugin_backbones: tuple[str, ...]) -> None:
    """Gives the plugin's backbones solo-learn's small-image stem on CIFAR unless set."""
    name = select(cfg, "backbone.name")
    if name in plugin_backbones:
        cfg.backbone.kwargs = select(cfg, "backbone.kwargs", {}) or {}
        if select(cfg, "backbone.kwargs.small_input") is None:
            cfg.backbone.kwargs.small_input = cfg.data.dataset in SMALL_IMAGE_DATASETS


def check_pretrain_cfg(
    cfg: DictConfig, methods: dict, multiview_methods: tuple[str, ...], backbones: dict, optimizers: tuple[str, ...]
) -> None:
    """Validates a pretraining config in place; fills the plugin's defaults; resolves beta."""
    method = select(cfg, "method")
    if method not in methods:
        raise ConfigError(f"method={method!r} is not registered: choose one of {sorted(methods)}")
    backbone = select(cfg, "backbone.name")
    if backbone not in backbones:
        raise ConfigError(f"backbone.name={backbone!r} is unknown: choose one of {sorted(backbones)}")
    multiview = method in multiview_methods
    _check_data(cfg)
    check_augmentations(cfg, multiview)
    check_projector_dims(cfg, required=multiview)
    check_training_keys(cfg, optimizers)
    if multiview:
        check_view_parallel(cfg)
    for notice in check_signals(cfg):
        print(f"mvssl: {notice}")
    resolve_beta(cfg)


PROBE_RULES = (
    ("probe.train_patches", _count, "must be an integer >= 1"),
    ("probe.test_patches", _count, "must be an integer >= 1"),
    ("probe.epochs", _count, "must be an integer >= 1"),
    ("probe.lr", _positive, "must be a number > 0"),
    ("probe.batch_size", _count, "must be an integer >= 1"),
    ("probe.weight_decay", _non_negative, "must be a number >= 0"),
)


def check_probe_cfg(cfg: DictConfig) -> None:
    """The fast probe's keys (when the linear recipe has a ``probe`` block)."""
    if select(cfg, "probe") is None:
        return
    for key, ok, what in PROBE_RULES:
        if select(cfg, key) is None:
            raise ConfigError(f"{key} is missing: set it (see scripts/linear/cifar10/probe_cifar.yaml)")
        require(cfg, key, ok, what)
    device = select(cfg, "probe.device", AUTO)
    if not isinstance(device, str) or not (device in (AUTO, "cpu") or device.startswith("cuda")):
        raise ConfigError(f"probe.device={device!r}: use auto, cpu or cuda")
    cfg.probe.device = device


def check_signals(cfg: DictConfig) -> list[str]:
    """``time_to_accuracy`` and ``effective_rank`` (training-time signals); both need the
    validation set, and are switched off, with a notice, in runs without one."""
    notices = []
    no_val = select(cfg, "data.val_path") is None
    for key in ("time_to_accuracy", "effective_rank"):
        if select(cfg, f"{key}.enabled", False) and no_val:
            cfg[key].enabled = False
            notices.append(f"{key} is off: it measures on the validation set and data.val_path is null")
    if select(cfg, "time_to_accuracy.enabled", False):
        metrics, targets = select(cfg, "time_to_accuracy.metrics"), select(cfg, "time_to_accuracy.targets")
        if not metrics or any(not isinstance(m, str) for m in metrics):
            raise ConfigError(f"time_to_accuracy.metrics={metrics!r}: list metric names, e.g. [val_acc1]")
        if not targets or any(not (_is_number(t) and 0 < t <= 100) for t in targets):
            raise ConfigError(f"time_to_accuracy.targets={targets!r}: list accuracies in (0, 100], e.g. [50, 80]")
    if select(cfg, "effective_rank.enabled", False):
        require(cfg, "effective_rank.num_samples", lambda v: _is_int(v) and v >= 2, "must be an integer >= 2")
    return notices


def check_linear_cfg(cfg: DictConfig, backbones: dict, optimizers: tuple[str, ...]) -> None:
    """Validates a linear-evaluation config in place."""
    backbone = select(cfg, "backbone.name")
    if backbone not in backbones:
        raise ConfigError(f"backbone.name={backbone!r} is unknown: choose one of {sorted(backbones)}")
    ckpt = select(cfg, "pretrained_feature_extractor")
    if ckpt is not None and os.path.isdir(str(ckpt)):
        # checkpoint names hold "=", which Hydra overrides would need quoted: a run folder is accepted
        from mvssl_plugin.cli.checkpoints import newest_checkpoint

        ckpt = newest_checkpoint(str(ckpt))
        ckpt = str(ckpt) if ckpt is not None else None
        cfg.pretrained_feature_extractor = ckpt
    if ckpt is None or not os.path.isfile(str(ckpt)):
        raise ConfigError(
            f"pretrained_feature_extractor={ckpt!r} is not a file: point it at a pretraining checkpoint "
            "(trained_models/<method>/<run>/*.ckpt) or its run folder"
        )
    _check_data(cfg)
    if select(cfg, "data.val_path") is None:
        raise ConfigError("data.val_path is missing: linear evaluation needs a validation set")
    check_training_keys(cfg, optimizers)


def device_count(devices: Any, accelerator: str) -> int:
    if _is_int(devices):
        return int(devices)
    if isinstance(devices, str):
        if devices == "auto":
            import torch

            return max(1, torch.cuda.device_count()) if accelerator == "gpu" else 1
        return len([d for d in devices.split(",") if d.strip()])
    return len(devices)


def adapt_to_hardware(cfg: DictConfig) -> list[str]:
    """Makes ``accelerator``/``devices``/``precision`` work on the machine at hand.

    solo-learn reads ``len(cfg.devices)`` while Lightning's CPU accelerator wants an
    integer: devices are kept as a list in the config (solo-learn's layout, also in
    args.json) and :func:`trainer_devices` hands Lightning what it accepts.
    ``accelerator: auto`` (the recipes' default) becomes ``gpu`` or ``cpu``; on a CPU,
    half-precision mixed training becomes 32-bit, a one-device ``ddp`` plain, and
    ``sync_batchnorm`` (GPU-only in torch) off for several processes.
    Returns the notices to print.
    """
    import torch

    notices = []
    accelerator = str(select(cfg, "accelerator", "auto"))
    has_cuda = torch.cuda.is_available()
    if accelerator == "auto":
        accelerator = "gpu" if has_cuda else "cpu"
    if accelerator == "cuda":
        accelerator = "gpu"
    if accelerator == "gpu" and not has_cuda:
        raise ConfigError("accelerator=gpu but no CUDA device is visible: use accelerator=cpu (or auto)")
    if accelerator not in ("gpu", "cpu"):
        raise ConfigError(f"accelerator={accelerator!r}: use auto, gpu or cpu")
    cfg.accelerator = accelerator
    devices = select(cfg, "devices", 1)
    try:
        n = device_count(devices, accelerator)
    except TypeError:
        n = 0
    if n < 1:
        raise ConfigError(f"devices={devices!r}: give a number of devices >= 1 or a list of device ids")
    if _is_int(devices) or isinstance(devices, str):
        cfg.devices = list(range(n))
    if accelerator == "cpu":
        precision = str(select(cfg, "precision", "32"))
        if precision in ("16", "16-mixed"):
            cfg.precision = "32"
            notices.append(f"precision={precision} is not supported on a CPU; using precision=32")
        if select(cfg, "strategy") == "ddp" and n == 1:
            cfg.strategy = "auto"
            notices.append("strategy=ddp with one CPU process; using strategy=auto")
        if select(cfg, "sync_batchnorm", False) and n > 1:
            cfg.sync_batchnorm = False
            notices.append(
                "sync_batchnorm=True needs GPUs (torch's SyncBatchNorm); each CPU process normalizes its own batch"
            )
    if select(cfg, "strategy") is None:
        cfg.strategy = "auto"
    return notices


def trainer_devices(cfg: DictConfig) -> Any:
    """What Lightning's Trainer takes for ``devices`` given solo-learn's list layout."""
    return len(cfg.devices) if cfg.accelerator == "cpu" else list(cfg.devices)
