"""A ResNet-18 of configurable base width, for CPU-scale studies.

solo-learn's backbones are full width (64 base channels); on 2 CPU cores a CIFAR
ResNet-18 forwards and backwards about 37 views/s, a width-16 one about 600. torchvision
cannot narrow a BasicBlock ResNet (``width_per_group`` must be 64), so the stages are
built here from torchvision's own ``BasicBlock``.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import nn
from torchvision.models.resnet import BasicBlock


def stage_widths(width: int, first_stage_width: Optional[int] = None) -> Tuple[int, int, int, int]:
    """The four stages' channels: ``width * (1, 2, 4, 8)``, the first (and the stem) replaced by
    ``first_stage_width`` where given."""
    return (first_stage_width or width, 2 * width, 4 * width, 8 * width)


class NarrowResNet18(nn.Module):
    """ResNet-18 with stage widths ``width * (1, 2, 4, 8)``; returns pooled features.

    Args:
        width: base width (64 is the standard ResNet-18).
        small_input: the CIFAR stem (3x3 stride-1 convolution, no max-pool) that
            solo-learn uses for 32x32 images.
        zero_init_residual: zero the last BN of each block, as torchvision's option.
        first_stage_width: the stem's and first stage's channels, where they differ from
            ``width``. On an AMX CPU 16 channels half-fill a tile row of 32 bf16 values; 32 fill
            it, yet cost the speedrun's step 1.2-1.3x and learned no more per epoch
            (docs/performance.md), so no recipe sets it.
    """

    def __init__(
        self,
        width: int = 16,
        small_input: bool = False,
        zero_init_residual: bool = False,
        first_stage_width: Optional[int] = None,
    ):
        super().__init__()
        if width < 1:
            raise ValueError(f"backbone.kwargs.width must be >= 1, got {width}")
        if first_stage_width is not None and first_stage_width < 1:
            raise ValueError(f"backbone.kwargs.first_stage_width must be >= 1, got {first_stage_width}")
        widths = stage_widths(width, first_stage_width)
        if small_input:
            self.conv1 = nn.Conv2d(3, widths[0], kernel_size=3, stride=1, padding=1, bias=False)
            self.maxpool: nn.Module = nn.Identity()
        else:
            self.conv1 = nn.Conv2d(3, widths[0], kernel_size=7, stride=2, padding=3, bias=False)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        stages, in_planes = [], widths[0]
        for i, planes in enumerate(widths):
            stride = 1 if i == 0 else 2
            downsample = None
            if stride != 1 or in_planes != planes:
                downsample = nn.Sequential(
                    nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride, bias=False),
                    nn.BatchNorm2d(planes),
                )
            stages.append(nn.Sequential(BasicBlock(in_planes, planes, stride, downsample), BasicBlock(planes, planes)))
            in_planes = planes
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.num_features = in_planes
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        if zero_init_residual:
            for module in self.modules():
                if isinstance(module, BasicBlock):
                    nn.init.zeros_(module.bn2.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return torch.flatten(self.avgpool(x), 1)


def narrow_resnet18(method: str, **kwargs) -> NarrowResNet18:
    """solo-learn backbone factory signature: ``(method, **backbone.kwargs)``."""
    del method  # solo-learn passes it to every backbone; only ViT-MAE variants use it
    return NarrowResNet18(**kwargs)
