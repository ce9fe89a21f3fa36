"""Differentiable cross-process reductions for the multi-view losses.

Only ``torch.distributed`` is used, so the losses stay free of Lightning and solo-learn.
Each helper is the identity when no process group of more than one process is
initialised, which is what a single-process (CPU or one-GPU) run sees.

Why autograd-aware collectives: under DDP every process computes the loss of the whole
global batch from its shard, and DDP averages the parameter gradients. With collectives
that autograd sees, the gradient reaching each shard is the sum over processes of the
loss's gradient, so after DDP's averaging it equals the gradient of the loss on the
concatenated batch. solo-learn's in-place ``dist.all_reduce`` of the cross-correlation is
invisible to autograd, which drops the other processes' terms.

Why our own ``autograd.Function`` rather than ``torch.distributed.nn.functional``: with
the gloo backend (CPU DDP), a process that used the latter aborts at exit
("terminate called without an active exception", SIGABRT) in about one run of four on
torch 2.12, after its work is done; plain ``dist.all_gather`` / ``dist.all_reduce`` inside
a Function do not (0 of 30 in the same two-process check).
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


class _AllReduceSum(torch.autograd.Function):
    """y = sum_p x_p on every process; dL/dx_p = sum_q dL_q/dy (every process's loss uses y)."""

    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.clone()
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad


class _AllGather(torch.autograd.Function):
    """(x_0, ..., x_{P-1}) on every process; dL/dx_p = sum_q dL_q/dx_p, the row block of process p."""

    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> tuple[torch.Tensor, ...]:
        parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, tensor.contiguous())
        return tuple(parts)

    @staticmethod
    def backward(ctx, *grads: torch.Tensor) -> torch.Tensor:
        stacked = torch.stack(grads)  # (P, *shape)
        dist.all_reduce(stacked, op=dist.ReduceOp.SUM)
        return stacked[dist.get_rank()]


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum of ``tensor`` over processes, with gradients flowing back to every process."""
    if not is_distributed():
        return tensor
    return _AllReduceSum.apply(tensor)


def gather_batch(tensor: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Concatenates ``tensor`` from all processes along ``dim`` (autograd-aware).

    Every process must hold the same shape (solo-learn's loaders drop the last batch).
    """
    if not is_distributed():
        return tensor
    return torch.cat(_AllGather.apply(tensor), dim=dim)


def global_batch_size(local: int) -> int:
    """Number of samples over all processes: every process holds ``local`` (the training loaders
    drop the last batch, as :func:`gather_batch` requires), so no collective and no read-back."""
    return local * dist.get_world_size() if is_distributed() else local
