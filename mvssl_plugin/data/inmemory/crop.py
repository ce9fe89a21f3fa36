"""The random resized crop, cut and resized as PIL does, as batched matmuls with per-image
weight matrices: the box drawn as torchvision's ``RandomResizedCrop.get_params`` draws it
(:func:`random_resized_boxes`), the weights of PIL's bicubic resize of that box
(:func:`resize_matrix`, tabled per integer box by :class:`CropMatrices`)."""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch

from mvssl_plugin.data.inmemory.devices import to_device


def _pil_bicubic(t: torch.Tensor, a: float = -0.5) -> torch.Tensor:
    """PIL's bicubic filter (Keys, a = -0.5), support 2."""
    t = t.abs()
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return torch.where(t < 1, near, torch.where(t < 2, far, torch.zeros_like(t)))


def resize_matrix(start: torch.Tensor, length: torch.Tensor, in_size: int, out_size: int, crop: bool) -> torch.Tensor:
    """(B, out_size, in_size) weights resizing the pixels ``[start, start + length)`` of an
    axis to ``out_size`` samples, as PIL's bicubic resize of a cropped image does: output
    pixel i is centred on ``start + (i + 0.5) * length / out_size``, the filter is widened
    by the scale when shrinking (antialiasing), and each row is renormalized over the
    pixels it may use (the crop when ``crop``, as PIL crops first; else the whole axis).

    start, length: (B,) float, in pixels.
    """
    device = start.device
    scale = (length / out_size).unsqueeze(1)  # (B, 1)
    stretch = scale.clamp(min=1.0).unsqueeze(2)  # (B, 1, 1)
    centres = start.unsqueeze(1) + (torch.arange(out_size, device=device, dtype=scale.dtype) + 0.5) * scale
    pixels = torch.arange(in_size, device=device, dtype=scale.dtype) + 0.5  # (in,)
    weights = _pil_bicubic((pixels.view(1, 1, -1) - centres.unsqueeze(2)) / stretch)  # (B, out, in)
    if crop:
        inside = (pixels.view(1, -1) >= start.unsqueeze(1)) & (pixels.view(1, -1) < (start + length).unsqueeze(1))
        weights = weights * inside.unsqueeze(1)
    return weights / weights.sum(dim=2, keepdim=True)


#: Largest table of precomputed crop matrices (bytes) :class:`CropMatrices` keeps per axis.
TABLE_BYTES = 64 * 2**20


class CropMatrices:
    """The resize matrices of every integer crop (start, length) of an axis, computed once
    when they fit :data:`TABLE_BYTES` (CIFAR's 32 -> 32: 4 MiB), so a batch's matrices are
    one gather instead of ~25 elementwise ops over (B, out, in); else computed per batch."""

    def __init__(self, in_size: int, out_size: int, device: torch.device) -> None:
        self.in_size, self.out_size = in_size, out_size
        self.table: Optional[torch.Tensor] = None
        if in_size * (in_size + 1) * out_size * in_size * 4 <= TABLE_BYTES:
            start, length = torch.meshgrid(torch.arange(in_size), torch.arange(in_size + 1), indexing="ij")
            start, length = start.reshape(-1).double(), length.reshape(-1).clamp(min=1).double()
            table = resize_matrix(start, length, in_size, out_size, crop=True)  # (in * (in + 1), out, in)
            self.table = table.float().to(device)

    def __call__(self, start: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        """(B, out, in) for integer-valued (B,) ``start`` and ``length``."""
        if self.table is None:
            return resize_matrix(start, length, self.in_size, self.out_size, crop=True)
        return self.table.index_select(0, (start * (self.in_size + 1) + length).long())


def random_resized_boxes(
    batch: int, height: int, width: int, scale: Tuple[float, float], device: torch.device, tries: int = 10
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """torchvision's ``RandomResizedCrop.get_params`` for a batch: (top, left, h, w), each
    (B,) float holding integers. Ratio log-uniform in 3/4..4/3, the first of ``tries``
    draws that fits, else the centred fallback clamped to the ratio range."""
    area = height * width
    ratio = (3.0 / 4.0, 4.0 / 3.0)
    target = area * (scale[0] + (scale[1] - scale[0]) * torch.rand(batch, tries))
    log_ratio = math.log(ratio[0]) + (math.log(ratio[1]) - math.log(ratio[0])) * torch.rand(batch, tries)
    aspect = torch.exp(log_ratio)
    w = torch.round(torch.sqrt(target * aspect))
    h = torch.round(torch.sqrt(target / aspect))
    fits = (w > 0) & (w <= width) & (h > 0) & (h <= height)
    first = fits.to(torch.int8).argmax(dim=1, keepdim=True)
    found = fits.any(dim=1)
    w, h = w.gather(1, first).squeeze(1), h.gather(1, first).squeeze(1)
    top = torch.floor(torch.rand(batch) * (height - h + 1))
    left = torch.floor(torch.rand(batch) * (width - w + 1))
    in_ratio = width / height
    if in_ratio < ratio[0]:
        fw, fh = width, round(width / ratio[0])
    elif in_ratio > ratio[1]:
        fw, fh = round(height * ratio[1]), height
    else:
        fw, fh = width, height
    h, w = torch.where(found, h, float(fh)), torch.where(found, w, float(fw))
    top = torch.where(found, top, float((height - fh) // 2))
    left = torch.where(found, left, float((width - fw) // 2))
    return tuple(to_device(torch.stack((top, left, h, w)), device).unbind())  # type: ignore[return-value]
