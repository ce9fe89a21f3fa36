"""The precision a method's loss runs at under mixed precision: ``performance.loss_fp32``.

Why a key: under ``precision: bf16-mixed`` autocast runs the loss's matrix products in bf16
(an 8-bit mantissa), which blurs the correlations Barlow Twins and VICReg drive to 0 and 1.
The plugin's methods compute their loss in float32 (``methods/base.py``); solo-learn's own
methods compute theirs inside autocast. A comparison of the two is fair only at one precision,
so this key sets it for any method: ``true`` computes the loss in float32 (solo-learn's
built-ins too: their ``*_loss_func`` is called outside autocast on float32 inputs), ``false``
inside autocast, and unset leaves each method as it ships (ours float32, solo-learn's autocast).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, List, Optional

import torch
from omegaconf import DictConfig

from mvssl_plugin.config.values import select
from mvssl_plugin.errors import ConfigError

KEY = "performance.loss_fp32"


def loss_fp32(cfg: DictConfig, default: bool) -> bool:
    """The key's value, or ``default`` (how the method ships) where it is unset."""
    value: Optional[bool] = select(cfg, KEY, None)
    return default if value is None else value


def _float32(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in (torch.bfloat16, torch.float16):
        return value.float()
    if isinstance(value, (list, tuple)):
        return type(value)(_float32(v) for v in value)
    return value


def in_float32(loss: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``loss`` called outside autocast, its half-precision tensor arguments cast to float32."""

    @functools.wraps(loss)
    def wrapped(*args: Any, **kwargs: Any) -> torch.Tensor:
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        device = tensors[0].device.type if tensors else "cpu"
        with torch.autocast(device, enabled=False):
            return loss(*_float32(args), **{k: _float32(v) for k, v in kwargs.items()})

    return wrapped


def loss_functions(method: torch.nn.Module) -> List[str]:
    """The names of the loss functions a solo-learn method's module calls (``vicreg_loss_func``...)."""
    module = sys.modules[type(method).__module__]
    return sorted(n for n, f in vars(module).items() if n.endswith("_loss_func") and callable(f))


def compute_loss_in_float32(method: torch.nn.Module) -> List[str]:
    """Makes a solo-learn method's training step call its loss functions in float32 (for this
    instance only: the module's names are swapped for the step and restored after it). Returns
    the names wrapped; raises ConfigError for a method with none to wrap."""
    names = loss_functions(method)
    if not names:
        raise ConfigError(
            f"{KEY}=true: {type(method).__name__} calls no solo-learn *_loss_func this key could run in "
            f"float32; leave {KEY} unset for it"
        )
    module = sys.modules[type(method).__module__]
    step = method.training_step
    shipped = {n: getattr(module, n) for n in names}
    wrapped = {n: in_float32(f) for n, f in shipped.items()}  # once, not at every step

    @functools.wraps(step)
    def training_step(*args: Any, **kwargs: Any) -> Any:
        try:
            for n, f in wrapped.items():
                setattr(module, n, f)
            return step(*args, **kwargs)
        finally:
            for n, f in shipped.items():
                setattr(module, n, f)

    method.training_step = training_step  # type: ignore[method-assign]
    return names
