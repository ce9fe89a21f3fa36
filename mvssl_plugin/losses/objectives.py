"""The Barlow Twins / VICReg family's vocabulary, in one place: the objectives, the redundancy
variants (and the deprecated name still accepted), the fastssl/redundancy rule and the
default ``scale_loss``. The losses, the beta rule and the methods all check against these.
Standard library only, so the pure beta rule can use it without importing torch.
"""

from __future__ import annotations

import warnings

#: ``leave_one_out``: ours, exact m = 2 parity with solo-learn; ``fastssl``: the authors' release.
OBJECTIVES: tuple[str, ...] = ("leave_one_out", "fastssl")
#: Redundancy terms of the leave_one_out objective (see ``losses.multiview_barlow_loss``).
REDUNDANCY_MODES: tuple[str, ...] = ("per_view", "mean_embedding")
#: Old names still accepted, mapped to their current one (with a FutureWarning).
REDUNDANCY_ALIASES: dict[str, str] = {"mean": "mean_embedding"}

#: solo-learn quotes two Barlow Twins ``scale_loss`` defaults (commit 9187ea3): its loss
#: function ``barlow_loss_func`` takes 0.025, its method ``BarlowTwins`` sets 0.024 (its
#: CIFAR / ImageNet-100 YAMLs set 0.1). Our loss function and our method follow each in turn,
#: so each equals its solo-learn counterpart at m = 2. The release has no such factor (1).
SOLO_LOSS_SCALE: float = 0.025
SOLO_METHOD_SCALE: float = 0.024
#: ``scale_loss`` of ``multiview_barlow_loss`` when none is given, per objective.
LOSS_SCALE: dict[str, float] = {"leave_one_out": SOLO_LOSS_SCALE, "fastssl": 1.0}
#: ``method_kwargs.scale_loss`` of ``mabt`` when none is given, per objective.
METHOD_SCALE: dict[str, float] = {"leave_one_out": SOLO_METHOD_SCALE, "fastssl": 1.0}


def check_objective(objective: str) -> str:
    """``objective`` itself, or ValueError naming the choices."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    return objective


def canonical_redundancy(redundancy: str) -> str:
    """The current name of a redundancy mode: ``"mean"`` (deprecated) -> ``"mean_embedding"``.

    Raises:
        ValueError: for a name that is neither a mode nor an alias.
    """
    if redundancy in REDUNDANCY_ALIASES:
        current = REDUNDANCY_ALIASES[redundancy]
        warnings.warn(
            f"redundancy={redundancy!r} is deprecated, use {current!r} (the same variant)", FutureWarning, stacklevel=3
        )
        return current
    if redundancy not in REDUNDANCY_MODES:
        raise ValueError(f"redundancy must be one of {REDUNDANCY_MODES}, got {redundancy!r}")
    return redundancy


def check_pair(objective: str, redundancy: str) -> str:
    """Validates the pair and returns the canonical redundancy mode.

    ``redundancy`` only chooses between variants of the leave_one_out objective; the fastssl
    objective has the release's own redundancy term, so asking for another is an error.
    """
    check_objective(objective)
    mode = canonical_redundancy(redundancy)
    if objective == "fastssl" and mode != "per_view":
        raise ValueError(
            f"redundancy={redundancy!r} is a variant of the leave_one_out objective only; objective=fastssl "
            "has the release's own redundancy term: drop redundancy, or use objective=leave_one_out"
        )
    return mode
