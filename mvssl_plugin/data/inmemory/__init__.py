"""m-view pretraining data held in memory: every image decoded once, views cut in batches.

``data.format: memory`` decodes the whole training set once with PIL into one uint8 tensor
(N, 3, H, W), caches that array on disk for the next run, and keeps it on the training
device (the GPU when training on one, else in RAM). Each step gathers a batch and draws
every view of every image with its own random parameters, as a few batched tensor ops, in
torchvision's order: random resized crop, color jitter, grayscale, blur, solarization,
equalization, flip, normalization. Nothing is decoded or copied to the device per step,
so the data set must fit the device (checked before decoding: :func:`check_fits`).

The modules, each importing only those above it:

* :mod:`.devices`: where the images live (the training device, moving them there).
* :mod:`.cache`: the decode, the cache on disk, the stored shape, the fit check.
* :mod:`.crop`: the random resized crop, ours: the box drawn as torchvision's
  ``RandomResizedCrop.get_params`` draws it, then cut and resized as PIL does (integer
  crop, bicubic with PIL's antialiasing when shrinking, the horizontal pass rounded before
  the vertical one) as two batched matmuls with per-image weights, equal to PIL's pixels
  up to a grey level in rare pixels. Not kornia's ``RandomResizedCrop``: its ``slice``
  mode loops over the batch (much slower), and its ``resample`` mode maps crop
  pixel centres corner to corner, so a crop w px wide shows w - 1 px of content. The flip
  is folded into the horizontal weights (it commutes with every later step).
* :mod:`.color`: the colour steps, each image drawn on its own. Colour jitter, ours: each
  image gets its own order of the four steps, as torchvision's (kornia's ``ColorJitter``
  shares one order across the batch, and spends most of its time in an HSV round trip;
  kornia's ``ColorJiggle`` is not torchvision's jitter: its brightness is additive); kornia's
  torchvision-compatible ``kornia.enhance`` functions for brightness, contrast and
  saturation, and a closed-form hue shift equal to torchvision's. Then grayscale (ITU-R 601
  luma as PIL), kornia's Gaussian blur (sigma 0.1..2.0 px as solo-learn's), solarization
  (the pixels PIL's ``solarize(128)`` inverts) and kornia's equalization, each on the images
  its probability chose. Every choice is drawn on the CPU, so on a GPU no step reads a
  device value back (kornia's ``Random*`` modules pick their images with a mask on the
  device, a host wait per step and module).
* :mod:`.augment`: one view per recipe for a batch, in torchvision's order; normalization
  with the recipe's numbers (solo-learn's).
* :mod:`.loader`: :class:`MemoryMultiViewLoader`, the pretraining loader Lightning iterates.
* :mod:`.pretrain`: :func:`pretrain_memory_loader`, that loader from a composed config.
* :mod:`.eval_loaders`: the fast probe's and the online validation's loaders
  (solo-learn's linear-evaluation transforms).

Every step draws from torch's global generator on the CPU: each training step runs under
``torch.random.fork_rng`` seeded from (seed, epoch, rank, step), so the stream is
reproducible, a run resumed at an epoch boundary sees exactly the views the uninterrupted
run would, and the caller's random state (CPU and GPU) is left as it was.

Known differences from solo-learn's torchvision pipeline: the brightness is slightly higher
on average (PIL's blends truncate to uint8 after each colour step, here all arithmetic is
float); PIL also quantizes the hue shift to 1/256 turn and pivots contrast on the rounded
grey mean; PIL's blur is three box blurs (edges extended), kornia's a true Gaussian (edges
reflected). The timings against kornia and the statistics of views against torchvision
(tests/data/test_inmemory.py checks them on 400 views) are in
``benchmarks/results/memory_format/augmentation_fidelity.md``.

This package re-exports its public API; private helpers and module constants are not
re-exported: patch them (tests) in the module that looks them up.
"""

from mvssl_plugin.data.inmemory.augment import BatchAugment, seeded_views, step_seed
from mvssl_plugin.data.inmemory.cache import check_fits, decode_to_uint8, default_cache_dir, memory_bytes_needed
from mvssl_plugin.data.inmemory.color import ColorJitterPerImage, shift_hue
from mvssl_plugin.data.inmemory.crop import CropMatrices, resize_matrix
from mvssl_plugin.data.inmemory.eval_loaders import (
    MemoryEvalLoader,
    eval_recipe,
    probe_memory_loaders,
    probe_recipes,
    val_memory_loader,
)
from mvssl_plugin.data.inmemory.loader import MemoryMultiViewLoader
from mvssl_plugin.data.inmemory.pretrain import pretrain_memory_loader

__all__ = [
    "BatchAugment",
    "ColorJitterPerImage",
    "CropMatrices",
    "MemoryEvalLoader",
    "MemoryMultiViewLoader",
    "check_fits",
    "decode_to_uint8",
    "default_cache_dir",
    "eval_recipe",
    "memory_bytes_needed",
    "pretrain_memory_loader",
    "probe_memory_loaders",
    "probe_recipes",
    "resize_matrix",
    "seeded_views",
    "shift_hue",
    "step_seed",
    "val_memory_loader",
]
