"""Differentiable cross-process reductions for the multi-view losses.

Only ``torch.distributed`` is used, so the losses stay free of Lightning and solo-learn.
Both helpers are the identity when no process group is initialised, which is what a
single-process (CPU or one-GPU) run sees.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def all_reduce_mean(tensor: torch.Tensor) -> torch.Tensor:
    """Mean of ``tensor`` over processes, with gradients flowing back to every process.

    solo-learn's ``barlow_loss_func`` reduces the cross-correlation with an in-place
    ``dist.all_reduce`` that autograd does not see. Going through the autograd-aware
    collective instead makes the gradient, after DDP's own averaging, equal to the
    gradient of the loss on the concatenated global batch.
    """
    if not _distributed():
        return tensor
    from torch.distributed.nn.functional import all_reduce

    return all_reduce(tensor, op=dist.ReduceOp.SUM) / dist.get_world_size()


def gather_batch(tensor: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Concatenates ``tensor`` from all processes along ``dim`` (autograd-aware)."""
    if not _distributed():
        return tensor
    from torch.distributed.nn.functional import all_gather

    return torch.cat(all_gather(tensor), dim=dim)
