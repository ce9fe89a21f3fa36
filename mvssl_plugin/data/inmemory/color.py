"""The colour steps of a view, each image of a batch drawn on its own as torchvision draws
it: colour jitter with its own factors and order of the four steps
(:class:`ColorJitterPerImage`, with the closed-form hue shift :func:`shift_hue`), grayscale,
Gaussian blur, solarization and equalization (:class:`RandomPerImage` of a :data:`Step`).

Every random choice is drawn on the CPU and every step runs on the images it chose, so the
number of images is known to the host: on a GPU no step reads a device tensor back (a
``nonzero`` or a boolean mask on the device would stop the host once per step and call)."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import torch

from mvssl_plugin.data.inmemory.devices import to_device


def shift_hue(images: torch.Tensor, turns: torch.Tensor) -> torch.Tensor:
    """torchvision's ``adjust_hue`` for a batch, one shift per image: (B, 3, H, W) in [0, 1],
    ``turns`` (B,) in [-0.5, 0.5]. The same HSV hexcone as torchvision's (and kornia's), in
    closed form: the hue h in sextants [0, 6) is shifted, value and chroma C are kept, and
    the channels are ``min + C * clamp(|h - 3| - 1, 2 - |h - 2|, 2 - |h - 4|; 0, 1)``:
    about 15 tensor ops instead of an HSV tensor round trip (3x faster on the CPU)."""
    high, low = images.amax(dim=1), images.amin(dim=1)  # (B, H, W)
    chroma = high - low
    red, green, blue = images.unbind(dim=1)
    # as torchvision's hr + hg + hb: the first maximal channel names the sextant. Selected
    # by lerp with 0/1 weights: torch.where on a random mask is ~10x slower on the CPU
    # (a mispredicted branch per pixel)
    red_first, green_first = (red == high).to(images.dtype), (green == high).to(images.dtype)
    sextant = torch.lerp(
        torch.lerp(4 * chroma + red - green, 2 * chroma + blue - red, green_first), green - blue, red_first
    )
    sextant = sextant / chroma.clamp(min=1e-12) + 6 * turns.view(-1, 1, 1).to(images.dtype)
    sextant = torch.remainder(sextant, 6.0).unsqueeze(1)  # (B, 1, H, W)
    centre, sign, offset = _hue_profile(images.device, images.dtype)
    weight = (sextant - centre).abs_().mul_(sign).add_(offset).clamp_(0.0, 1.0)  # (B, 3, H, W)
    return weight.mul_(chroma.unsqueeze(1)).add_(low.unsqueeze(1))


#: per channel (R, G, B): |h - centre| * sign + offset, the hexcone's piecewise-linear profile
_HUE_PROFILE = ([3.0, 2.0, 4.0], [1.0, -1.0, -1.0], [-1.0, 2.0, 2.0])
_HUE_PROFILES: Dict[tuple, Tuple[torch.Tensor, ...]] = {}


def _hue_profile(device: torch.device, dtype: torch.dtype) -> Tuple[torch.Tensor, ...]:
    """The profile's three (1, 3, 1, 1) tensors on ``device``, sent there once."""
    key = (device, dtype)
    if key not in _HUE_PROFILES:
        _HUE_PROFILES[key] = tuple(torch.tensor(v, dtype=dtype).view(1, 3, 1, 1).to(device) for v in _HUE_PROFILE)
    return _HUE_PROFILES[key]


def grayscale(images: torch.Tensor, _: Optional[torch.Tensor] = None) -> torch.Tensor:
    """torchvision's ``rgb_to_grayscale`` (ITU-R 601-2 luma), kept as 3 channels."""
    red, green, blue = images.unbind(dim=1)
    return (0.299 * red + 0.587 * green + 0.114 * blue).unsqueeze(1).expand_as(images)


def solarize(images: torch.Tensor, _: Optional[torch.Tensor] = None) -> torch.Tensor:
    """PIL's ``solarize`` at 128 for images in [0, 1]: values at or above half are inverted."""
    return torch.where(images < 0.5, images, 1.0 - images)


def equalize(images: torch.Tensor, _: Optional[torch.Tensor] = None) -> torch.Tensor:
    """kornia's ``equalize`` (per image and channel)."""
    from kornia import enhance  # local: kornia for the in-memory format only, as in augment

    return enhance.equalize(images)


def gaussian_blur(images: torch.Tensor, sigma: Optional[torch.Tensor], kernel: int = 23) -> torch.Tensor:
    """kornia's Gaussian blur, ``kernel`` x ``kernel`` taps, one sigma (B,) per image,
    reflected borders (kornia's ``RandomGaussianBlur`` as solo-learn's recipes set it). The
    sigmas stay on the CPU: kornia checks them there and sends them on without a wait."""
    from kornia import filters  # local: as above

    assert sigma is not None, "gaussian_blur draws a sigma per image"
    if images.device.type != "cpu" and not kornia_blur_checks_sigma_on_host():
        # kornia 0.8 sends sigma to the images' device and checks it there (a read-back per
        # call): the same kernels made here on the CPU, sent without a wait, and kornia's own
        # separable filter. Drop this branch once the kornia floor is 0.9 (it checks on the host)
        return blur_with_host_kernels(images, sigma, kernel)
    return filters.gaussian_blur2d(images, (kernel, kernel), sigma.unsqueeze(1).expand(-1, 2), "reflect")


def blur_with_host_kernels(images: torch.Tensor, sigma: torch.Tensor, kernel: int = 23) -> torch.Tensor:
    """:func:`gaussian_blur` with each image's 1-D kernel made on the CPU and sent to the images'
    device without a wait, then kornia's separable filter: what ``gaussian_blur2d`` computes."""
    from kornia import filters  # local: kornia for the in-memory format only, as in gaussian_blur

    assert bool((sigma > 0).all()), f"sigma must be positive, got {sigma}"  # on the CPU
    kernels = to_device(filters.get_gaussian_kernel1d(kernel, sigma.to(images.dtype).unsqueeze(1)), images.device)
    return filters.filter2d_separable(images, kernels, kernels, "reflect")


_KORNIA_BLUR_HOST_CHECK: List[bool] = []


def kornia_blur_checks_sigma_on_host() -> bool:
    """Whether kornia's ``gaussian_blur2d`` reads a CPU sigma on the CPU only (kornia 0.9), not
    back from the images' device (0.8): tried once on a meta tensor, which holds no values to read."""
    from kornia import filters  # local: as in gaussian_blur

    if not _KORNIA_BLUR_HOST_CHECK:
        try:
            filters.gaussian_blur2d(torch.empty(1, 1, 8, 8, device="meta"), (3, 3), torch.ones(1, 2), "reflect")
            _KORNIA_BLUR_HOST_CHECK.append(True)
        except (RuntimeError, NotImplementedError):
            _KORNIA_BLUR_HOST_CHECK.append(False)
    return _KORNIA_BLUR_HOST_CHECK[0]


#: a colour step: (k, 3, H, W) in [0, 1] and its (k,) parameters on the CPU (or None) -> (k, 3, H, W)
Step = Callable[[torch.Tensor, Optional[torch.Tensor]], torch.Tensor]


class RandomPerImage:
    """``step`` applied to each image with probability ``p``; with ``parameters`` (low, high)
    each image it applies to gets its own value, uniform in that range."""

    def __init__(self, step: Step, p: float, parameters: Optional[Tuple[float, float]] = None) -> None:
        self.step, self.p, self.parameters = step, p, parameters

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        which = torch.nonzero(torch.rand(images.shape[0]) < self.p).squeeze(1)  # on the CPU
        if not which.numel():
            return images
        values = None
        if self.parameters is not None:
            low, high = self.parameters
            values = low + (high - low) * torch.rand(which.numel())
        rows = to_device(which, images.device)
        return images.index_copy_(0, rows, self.step(images.index_select(0, rows), values))


class ColorJitterPerImage:
    """torchvision's ``RandomApply([ColorJitter(b, c, s, h)], p)`` for a batch: each image
    with probability ``p`` gets its own factors and its own order of the four steps (kornia's
    ``ColorJitter`` shares one order across the batch). Brightness, contrast and saturation
    are kornia's torchvision-compatible ``kornia.enhance`` functions; hue is
    :func:`shift_hue`. Each step runs once per (stage, step) on the images due for it, found
    on the CPU and sent to the device in one copy with their factors."""

    def __init__(self, brightness: float, contrast: float, saturation: float, hue: float, p: float) -> None:
        from kornia import enhance  # local: kornia for the in-memory format only, as in augment.BatchAugment

        around_one = [(max(0.0, 1.0 - v), 1.0 + v) for v in (brightness, contrast, saturation)]
        self.ranges = around_one + [(-hue, hue)]
        self.low = torch.tensor([low for low, _ in self.ranges])
        self.spread = torch.tensor([high - low for low, high in self.ranges])
        self.steps: List[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = [
            enhance.adjust_brightness_accumulative,
            enhance.adjust_contrast_with_mean_subtraction,
            enhance.adjust_saturation_with_gray_subtraction,
            shift_hue,
        ]
        self.active = [k for k, (low, high) in enumerate(self.ranges) if low != high]  # torchvision skips the rest
        self.p = p

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        batch = images.shape[0]
        factors = self.low + self.spread * torch.rand(batch, 4)  # (B, 4), on the CPU as every draw
        order = torch.rand(batch, 4).argsort(dim=1)  # (B, 4): a uniform permutation per image
        chosen = torch.rand(batch) < self.p
        due = [  # (step, its images) per (stage, step), in the order they run
            (step, torch.nonzero(chosen & (order[:, stage] == step)).squeeze(1))
            for stage in range(4)
            for step in self.active
        ]
        due = [(step, which) for step, which in due if which.numel()]
        if not due:
            return images.clone()
        sizes = [which.numel() for _, which in due]
        rows = to_device(torch.cat([which for _, which in due]), images.device).split(sizes)
        values = to_device(torch.cat([factors[which, step] for step, which in due]), images.device)
        out = images.clone()
        for (step, _), index, factor in zip(due, rows, values.to(images.dtype).split(sizes)):
            # index_select/index_copy_: far cheaper than x[which] on the CPU
            out.index_copy_(0, index, self.steps[step](out.index_select(0, index), factor).clamp_(0.0, 1.0))
        return out
