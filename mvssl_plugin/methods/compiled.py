"""``performance.compile``: ``torch.compile`` of a method's backbone and projector, any method
(ours in ``MultiViewMethod.__init__``, solo-learn's built-ins in ``train/pretrain.py``), and the
eager view of the same weights beside it.

Why the forward and not the module: the state_dict's keys stay as they are (no ``_orig_mod.``),
so checkpoints load into uncompiled models (linear evaluation, kNN, the encoder export).
Why an eager view: the per-epoch kNN and solo-learn's validation loop run in evaluation mode,
where a compiled forward would compile a second graph (BatchNorm's running statistics) for one
pass an epoch; ``eager_forwards`` (and the ``EagerEvaluation`` callback around the validation
loop) run the uncompiled forward on the same parameters.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import List

import torch
from lightning.pytorch import Callback
from torch import nn

#: the attribute that marks a module whose forward this module compiled
_MARK = "_mvssl_compiled_forward"


def compiled_modules(model: nn.Module) -> List[nn.Module]:
    """The model's backbone and projector (those it has): what ``performance.compile`` compiles."""
    return [m for m in (getattr(model, "backbone", None), getattr(model, "projector", None)) if m is not None]


def is_compiled(model: nn.Module) -> bool:
    """Whether ``compile_forwards`` compiled any of the model's modules."""
    return any(hasattr(m, _MARK) for m in compiled_modules(model))


def compile_forwards(model: nn.Module) -> List[str]:
    """Compiles the forward of the model's backbone and projector in place; returns their names."""
    names = []
    for name, module in (
        ("backbone", getattr(model, "backbone", None)),
        ("projector", getattr(model, "projector", None)),
    ):
        if module is None or hasattr(module, _MARK):
            continue
        compiled = torch.compile(module.forward)
        module.forward = compiled
        setattr(module, _MARK, compiled)
        names.append(name)
    return names


@contextmanager
def eager_forwards(model: nn.Module) -> Iterator[None]:
    """The class's own (eager) forward of every compiled module for a while, then the compiled one."""
    modules = [m for m in compiled_modules(model) if hasattr(m, _MARK)]
    for module in modules:
        del module.forward  # the instance's attribute: the class's forward shows through
    try:
        yield
    finally:
        for module in modules:
            module.forward = getattr(module, _MARK)


class EagerEvaluation(Callback):
    """solo-learn's validation loop (the online classifier's accuracy, the sanity check) on the
    eager forwards of a compiled model."""

    def __init__(self) -> None:
        self._stack = ExitStack()

    def on_validation_start(self, trainer, pl_module) -> None:
        self._stack.enter_context(eager_forwards(pl_module))

    def on_validation_end(self, trainer, pl_module) -> None:
        self._stack.close()

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self._stack.close()
