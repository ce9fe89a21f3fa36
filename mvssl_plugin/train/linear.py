"""solo-learn's linear evaluation on any checkpoint of the plugin (or of solo-learn), with
the plugin's backbones, ImageFolder data and the CPU; or the fast probe.

The backbone is built as solo-learn builds it, loaded from the checkpoint's
``backbone.*`` weights (all of them: solo-learn's own script loads with ``strict=False``,
so a mismatched backbone would silently evaluate a random network), and trained under
solo-learn's ``LinearModel``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Tuple

from omegaconf import DictConfig

from mvssl_plugin.config import adapt_to_hardware, check_probe_cfg, open_cfg
from mvssl_plugin.config.pretrained import backbone_from_run, cifar_stem_of_run
from mvssl_plugin.data.key_checks import apply_backbone_defaults
from mvssl_plugin.errors import ConfigError
from mvssl_plugin.registry import PLUGIN_BACKBONES, register

if TYPE_CHECKING:
    from torch import nn


def build_solo_backbone(cfg: DictConfig) -> nn.Module:
    """solo-learn's backbone for ``cfg.backbone``, with its CIFAR stem for ResNets where the
    pretraining run had it (:func:`~mvssl_plugin.config.pretrained.cifar_stem_of_run`)."""
    # local: torch and solo-learn, as in checked_backbone
    from solo.methods.base import BaseMethod
    from torch import nn

    backbone = BaseMethod._BACKBONES[cfg.backbone.name](method=cfg.pretrain_method, **cfg.backbone.kwargs)
    if cfg.backbone.name.startswith("resnet"):
        backbone.fc = nn.Identity()
        if cifar_stem_of_run(cfg):
            backbone.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=2, bias=False)
            backbone.maxpool = nn.Identity()
    return backbone


def load_backbone_weights(backbone: nn.Module, ckpt_path: str) -> None:
    """Loads ``backbone.*`` from a solo-learn checkpoint; every tensor must match by name and shape."""
    import torch  # local: as in checked_backbone

    try:
        state = torch.load(ckpt_path, map_location="cpu", weights_only=False)["state_dict"]
    except Exception as err:  # a zip archive that is not a Lightning checkpoint
        raise ConfigError(
            f"pretrained_feature_extractor={ckpt_path!r} is not a Lightning checkpoint ({type(err).__name__}): "
            "point it at a pretraining run folder or one of its .ckpt files"
        ) from None
    weights = {k[len("backbone.") :]: v for k, v in state.items() if k.startswith("backbone.")}
    own = backbone.state_dict()
    wrong = [k for k in own if k not in weights or weights[k].shape != own[k].shape]
    wrong += [k for k in weights if k not in own]
    if not weights or wrong:
        raise ConfigError(
            f"pretrained_feature_extractor={ckpt_path!r} does not hold this backbone's weights "
            f"({len(wrong) or 'all'} missing or of another shape, e.g. {wrong[:3]}): set backbone.name, "
            "backbone.kwargs and data.dataset as in pretraining"
        )
    backbone.load_state_dict(weights)


def checked_backbone(cfg: DictConfig, notify=print) -> Tuple[DictConfig, nn.Module]:
    """Checks and completes a linear config as solo-learn's parser does; returns it with
    the pretrained backbone loaded."""
    # local: torch, Lightning and solo-learn (~5 s) load when a run starts, not for mvssl-linear
    # --help, and after cli.exits.with_openmp_wait has set OMP_WAIT_POLICY: this module imports no torch
    from lightning.pytorch import seed_everything
    from solo.args.linear import parse_cfg
    from solo.methods.base import BaseMethod

    from mvssl_plugin.train.launch_checks import check_linear_cfg
    from mvssl_plugin.train.start_block import cpu_text

    cfg = open_cfg(cfg)
    register()
    notices = check_linear_cfg(cfg, BaseMethod._BACKBONES, tuple(BaseMethod._OPTIMIZERS))
    check_probe_cfg(cfg)
    notices += adapt_to_hardware(cfg)
    notices += backbone_from_run(cfg, tuple(PLUGIN_BACKBONES))
    for notice in notices:
        notify(f"mvssl: {notice}")
    notify(f"mvssl: hardware {cfg.accelerator}{cpu_text(cfg)}")  # pretraining's start block says it too
    apply_backbone_defaults(cfg, tuple(PLUGIN_BACKBONES))
    cfg = parse_cfg(cfg)
    seed_everything(cfg.seed)
    backbone = build_solo_backbone(cfg)
    load_backbone_weights(backbone, cfg.pretrained_feature_extractor)
    notify(f"mvssl: backbone weights from {cfg.pretrained_feature_extractor}")
    return cfg, backbone


def linear(cfg: DictConfig):
    """Trains a linear classifier on a frozen pretrained backbone; returns the Trainer
    (solo-learn's flow), or the fast probe's results when the recipe has a ``probe`` block."""
    # local: torch, Lightning and solo-learn, as in checked_backbone
    from solo.methods.linear import LinearModel
    from torch import nn

    from mvssl_plugin.data.solo_loaders import classification_loaders
    from mvssl_plugin.eval.fast_probe import fast_probe
    from mvssl_plugin.train.launch_checks import file_screen
    from mvssl_plugin.train.trainer import fit

    if cfg.get("probe") is not None:
        cfg, backbone = checked_backbone(cfg)
        return fast_probe(cfg, backbone, screen=file_screen(cfg, pretraining=False))
    cfg, backbone = checked_backbone(cfg)
    model = LinearModel(backbone, loss_func=nn.CrossEntropyLoss(), mixup_func=None, cfg=cfg)
    screen = file_screen(cfg, pretraining=False)
    train_loader, val_loader = classification_loaders(cfg, data_fraction=cfg.data.fraction, screen=screen)
    return fit(cfg, model, train_loader, val_loader, "linear")
