"""Backbones the plugin adds to solo-learn's table (see ``mvssl_plugin.registry``)."""

from mvssl_plugin.backbones.narrow_resnet import NarrowResNet18, narrow_resnet18

__all__ = ["NarrowResNet18", "narrow_resnet18"]
