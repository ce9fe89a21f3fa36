"""Differentiable cross-process reductions for the multi-view losses.

Only ``torch.distributed`` is used, so the losses stay free of Lightning and solo-learn.
Each helper is the identity when no process group of more than one process is
initialised, which is what a single-process (CPU or one-GPU) run sees.

Why autograd-aware collectives: under DDP every process computes the loss of the whole
global batch from its shard, and DDP averages the parameter gradients. With collectives
that autograd sees (``torch.distributed.nn``), the gradient reaching each shard is the sum
over processes of the loss's gradient, so after DDP's averaging it equals the gradient of
the loss on the concatenated batch. solo-learn's in-place ``dist.all_reduce`` of the
cross-correlation is invisible to autograd, which drops the other processes' terms.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum of ``tensor`` over processes, with gradients flowing back to every process."""
    if not is_distributed():
        return tensor
    from torch.distributed.nn.functional import all_reduce

    return all_reduce(tensor, op=dist.ReduceOp.SUM)


def gather_batch(tensor: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Concatenates ``tensor`` from all processes along ``dim`` (autograd-aware).

    Every process must hold the same shape (solo-learn's loaders drop the last batch).
    """
    if not is_distributed():
        return tensor
    from torch.distributed.nn.functional import all_gather

    return torch.cat(all_gather(tensor), dim=dim)


def global_batch_size(local: int, device: torch.device) -> int:
    """Number of samples over all processes."""
    if not is_distributed():
        return local
    count = torch.tensor([local], device=device)
    dist.all_reduce(count)
    return int(count.item())
