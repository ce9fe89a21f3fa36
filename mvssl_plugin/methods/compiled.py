"""``performance.compile``: ``torch.compile`` of a method's backbone and projector, any method
(ours in ``MultiViewMethod.__init__``, solo-learn's built-ins in ``train/pretrain.py``), training
compiled and evaluation eager on the same weights.

Why the forward and not the module: the state_dict's keys stay as they are (no ``_orig_mod.``),
so checkpoints load into uncompiled models (linear evaluation, kNN, the encoder export).
Why evaluation eager: the per-epoch kNN and solo-learn's validation loop run in evaluation mode,
where a compiled forward would compile a second graph (BatchNorm's running statistics) for one
pass an epoch; the module's mode picks the forward, so every evaluation path is eager without
knowing about compile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, List

import torch
from torch import nn

#: the attribute that holds a module's compiled forward (and marks it compiled)
_MARK = "_mvssl_compiled_forward"


def _by_mode(module: nn.Module, compiled: Callable[..., Any]) -> Callable[..., Any]:
    """A forward that runs ``compiled`` while ``module`` trains, its class's own forward otherwise."""
    eager = type(module).forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        return compiled(*args, **kwargs) if module.training else eager(module, *args, **kwargs)

    return forward


def compile_forwards(model: nn.Module) -> List[str]:
    """Compiles the training forward of the model's backbone and projector in place; returns their names."""
    names = []
    for name in ("backbone", "projector"):
        module = getattr(model, name, None)
        if module is None or hasattr(module, _MARK):
            continue
        compiled = torch.compile(module.forward)
        setattr(module, _MARK, compiled)
        module.forward = _by_mode(module, compiled)
        names.append(name)
    return names
