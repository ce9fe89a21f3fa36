"""The orthogonality-weight rule of Agrawal, Ghosh, Sodhani, Oberman, Richards (NeurIPS 2024): beta = c / d.

A projector with output dimension d needs a redundancy-reduction weight that grows as d
shrinks, beta = O(1/d); with it, d = 256 matches or beats d = 8192 on CIFAR-10. This
module holds the authors' released numbers (as data), the constants c fitted to them, the
multi-view factor of each loss and objective, and the VICReg weight conventions. Pure
Python: the solo-learn adapter (``mvssl_plugin.config``) turns ``auto`` into these numbers.

beta is Barlow Twins' off-diagonal weight lambda, and VICReg's covariance/invariance
weight ratio (cov_loss_weight / sim_loss_weight).
"""

from __future__ import annotations

import math
from typing import Optional

from mvssl_plugin.losses.objectives import check_objective

#: Loss families the rule serves (``BetaSlot.loss`` in ``config/beta.py``).
LOSS_FAMILIES: tuple[str, ...] = ("barlow_twins", "vicreg")

# ----------------------------------------------------------------------------- released numbers
# Source: github.com/kumarkrishna/fastssl at commit 96dfa37be7d46f4814a410affd6269fefab9ec32,
# CIFAR-10, batch 128, ResNet-50 ("resnet50proj"):
#   Barlow Twins sweep: sbatch_sh_files/final_exps/BarlowTwins_lambda_pdim_res.sh (best per d);
#   multi-view Barlow Twins: sbatch_sh_files/multiPatch/multiPatch_barlowTwins_results.sh;
#   multi-view VICReg: sbatch_sh_files/multiPatch/multiPatch_vicreg_results.sh (lambd = mu).

#: Best Barlow Twins lambda per projector dimension in the authors' released CIFAR-10
#: sweep (2 views). lambda * d lies between 1.6 and 6.6.
AUTHORS_CIFAR10_BEST_LAMBDA: dict[int, float] = {
    64: 0.04,
    128: 0.04,
    256: 0.02,
    512: 0.01,
    1024: 0.002,
    2048: 0.001,
    4096: 0.0004,
    8192: 0.0008,
}

#: Released multi-view Barlow Twins lambda, ``{(d, m): lambda}`` (objective fastssl).
RELEASED_MULTIVIEW_BARLOW_LAMBDA: dict[tuple[int, int], float] = {
    (256, 2): 0.02,
    (256, 4): 0.01,
    (256, 8): 0.01,
    (8192, 2): 0.0008,
    (8192, 4): 0.0004,
    (8192, 8): 0.0004,
}

#: Released multi-view VICReg weights ``{(d, m): (lambda, mu, covariance weight)}`` in the
#: release's convention (objective fastssl); beta = covariance weight / lambda.
RELEASED_VICREG_WEIGHTS: dict[tuple[int, int], tuple[float, float, float]] = {
    (256, 2): (25.0, 25.0, 1.0),
    (256, 4): (25.0, 25.0, 1.0),
    (8192, 2): (750.0, 750.0, 1.0),
}

# ----------------------------------------------------------------------------- fitted constants

#: Barlow Twins' c: the geometric mean of lambda * d over the 2-view sweep (3.34), rounded.
BARLOW_TWINS_C: float = 3.3

#: VICReg's c: the geometric mean of beta * d over the released 2-view weights,
#: sqrt(256 / 25 * 8192 / 750) = 10.58, rounded; within 1.04x of both released betas.
VICREG_C: float = 10.6

#: The release's factor on the 2-view Barlow Twins lambda for m > 2 (0.01 / 0.02 and
#: 0.0004 / 0.0008 at m = 4 and 8), i.e. the factor of objective ``fastssl``.
MULTIVIEW_FACTOR: float = 0.5

#: The rule's default c per loss family.
DEFAULT_C: dict[str, float] = {"barlow_twins": BARLOW_TWINS_C, "vicreg": VICREG_C}


def geometric_mean_c(sweep: dict[int, float]) -> float:
    """The c that best fits beta = c / d in log space over a ``{d: beta}`` sweep: exp(mean_d log(beta d))."""
    logs = [math.log(lam * d) for d, lam in sweep.items()]
    return math.exp(sum(logs) / len(logs))


def released_vicreg_betas() -> dict[tuple[int, int], float]:
    """``{(d, m): covariance weight / lambda}`` of :data:`RELEASED_VICREG_WEIGHTS`."""
    return {key: cov / lam for key, (lam, _mu, cov) in RELEASED_VICREG_WEIGHTS.items()}


# ----------------------------------------------------------------------------- multi-view factors


def _check_views(num_views: int) -> None:
    if isinstance(num_views, bool) or not isinstance(num_views, int) or num_views < 2:
        raise ValueError(f"num_views must be an integer >= 2, got {num_views!r}")


def _check_objective_and_views(objective: str, num_views: int) -> None:
    check_objective(objective)
    _check_views(num_views)


def barlow_multiview_factor(objective: str, num_views: int) -> float:
    """Factor on the 2-view Barlow Twins lambda for m views, per objective.

    ``fastssl``: 1 for m = 2, :data:`MULTIVIEW_FACTOR` = 0.5 for m > 2, as released.

    ``leave_one_out``: 1 for m = 2 (both objectives are then the same Barlow Twins), and
    0.5 * (m / (m - 1))^2 for m > 2, the lambda that keeps the release's balance between
    the diagonal and off-diagonal terms. Derivation: with s_i the standardized views,
    t_i = (sum_j s_j - s_i) / (m - 1) the leave-one-out target and zbar = (1/m) sum_j s_j
    the release's target, zbar = s_i / m + (m - 1) / m * t_i. Per dimension k, with
    unit second moment mean_n s_i[n,k]^2 = 1 (exact under per-view standardization),

        mean_n s_i[n,k] zbar[n,k] - 1 = 1/m + (m-1)/m * C_i[k,k] - 1 = (m-1)/m * (C_i[k,k] - 1),

    where C_i = s_i^T t_i / N is the leave-one-out correlation. So the release's diagonal
    term is ((m-1)/m)^2 times the leave-one-out diagonal term, while the off-diagonal
    terms agree: at the invariant solution (all views equal) C_i = zbar^T zbar / N = A
    exactly, and on noisy views their sums stay within about 20 % (measured: ratio 0.83
    to 1.0 for noise/signal 0 to 2). Hence

        L_fastssl = ((m-1)/m)^2 * [ D_loo + lambda_fastssl * (m/(m-1))^2 * O ]

    and leave_one_out needs lambda_loo = lambda_fastssl * (m/(m-1))^2 for the same
    balance (the overall factor ((m-1)/m)^2 only rescales the gradient). Under the
    release's joint standardization of all m x N rows the second moments q_ik are only
    near 1 and each diagonal entry gains a residual (q_ik - 1) / m, a pull toward equal
    per-view variances that does not involve lambda. On correlated test data the
    diagonal ratio was within 8 % of ((m-1)/m)^2 while the views still disagree
    (1 - C_kk >= 0.14), but the residual dominates once they nearly agree; the factor
    balances the lambda-dependent parts only. Values: m = 3: 1.125,
    m = 4: 0.889, m = 8: 0.653, m -> inf: 0.5. (The release only has m = 2, 4, 8; m = 3
    and m > 8 are extrapolations.)

    Raises:
        ValueError: unknown objective, or num_views < 2.
    """
    _check_objective_and_views(objective, num_views)
    if num_views == 2:
        return 1.0
    if objective == "fastssl":
        return MULTIVIEW_FACTOR
    return MULTIVIEW_FACTOR * (num_views / (num_views - 1)) ** 2


def vicreg_multiview_factor(objective: str, num_views: int) -> float:
    """Factor on the 2-view VICReg beta for m views: always 1.

    The release keeps (lambda, mu, 1) = (25, 25, 1) at d = 256 for both m = 2 and m = 4
    (:data:`RELEASED_VICREG_WEIGHTS`): VICReg's beta has no multi-view factor.

    Raises:
        ValueError: unknown objective, or num_views < 2.
    """
    _check_objective_and_views(objective, num_views)
    return 1.0


def multiview_factor(loss: str, objective: str, num_views: int) -> float:
    """The multi-view factor of a loss family (``barlow_twins`` or ``vicreg``) and objective.

    Raises:
        ValueError: unknown loss family or objective, or num_views < 2.
    """
    if loss == "barlow_twins":
        return barlow_multiview_factor(objective, num_views)
    if loss == "vicreg":
        return vicreg_multiview_factor(objective, num_views)
    raise ValueError(f"loss must be one of {LOSS_FAMILIES}, got {loss!r}")


# ----------------------------------------------------------------------------- the rule


def _resolved_factor(num_views: int, multiview_factor_: Optional[float], objective: str, loss: str) -> float:
    """The explicit factor (applied for m > 2 only) if given, else the derived one; validates all four."""
    derived = multiview_factor(loss, objective, num_views)
    if multiview_factor_ is None:
        return derived
    if isinstance(multiview_factor_, bool) or not (
        isinstance(multiview_factor_, (int, float)) and math.isfinite(multiview_factor_) and multiview_factor_ > 0
    ):
        raise ValueError(f"multiview_factor must be a finite number > 0, got {multiview_factor_!r}")
    return float(multiview_factor_) if num_views > 2 else 1.0


def _rule_factor(
    proj_output_dim: int, c: float, num_views: int, multiview_factor_: Optional[float], objective: str, loss: str
) -> float:
    """f(m) of the rule, after checking every argument of :func:`beta_for_projector`."""
    if isinstance(proj_output_dim, bool) or not isinstance(proj_output_dim, int) or proj_output_dim < 1:
        raise ValueError(f"proj_output_dim must be an integer >= 1, got {proj_output_dim!r}")
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not c > 0:
        raise ValueError(f"the beta rule's c must be > 0, got {c!r}")
    _check_views(num_views)
    return _resolved_factor(num_views, multiview_factor_, objective, loss)


def beta_for_projector(
    proj_output_dim: int,
    c: float,
    num_views: int = 2,
    multiview_factor: Optional[float] = None,
    objective: str = "leave_one_out",
    loss: str = "barlow_twins",
) -> float:
    """beta(d, m) = c / d * f(m): ``f = 1`` for m = 2, the multi-view factor for m > 2.

    Args:
        proj_output_dim: projector output dimension d (>= 1).
        c: the rule's constant (> 0), e.g. :data:`DEFAULT_C` ``[loss]``.
        num_views: views per image m (>= 2).
        multiview_factor: f for m > 2, overriding the derived one; None derives it from
            ``loss`` and ``objective`` (:func:`multiview_factor`).
        objective: ``leave_one_out`` or ``fastssl`` (the loss's objective).
        loss: ``barlow_twins`` or ``vicreg``.

    Raises:
        ValueError: naming the argument that is out of range.
    """
    factor = _rule_factor(proj_output_dim, c, num_views, multiview_factor, objective, loss)  # checks first
    return c / proj_output_dim * factor


def describe_beta(
    proj_output_dim: int,
    c: float,
    num_views: int = 2,
    multiview_factor: Optional[float] = None,
    objective: str = "leave_one_out",
    loss: str = "barlow_twins",
) -> str:
    """A one-line account of an ``auto`` beta for a start-of-run summary, e.g. ``auto: 3.3/256 x 0.5``.

    The factor is shown only when it is not 1 (m = 2, or VICReg), to 4 significant digits.
    Same arguments and errors as :func:`beta_for_projector`.
    """
    factor = _rule_factor(proj_output_dim, c, num_views, multiview_factor, objective, loss)
    text = f"auto: {c:g}/{proj_output_dim}"
    return text if factor == 1 else f"{text} x {factor:.4g}"


# ----------------------------------------------------------------------------- VICReg weights


def solo_vicreg_weights(lam: float, mu: float, cov: float = 1.0) -> tuple[float, float, float]:
    """The release's VICReg weights (lambda, mu, cov) as solo-learn's (sim, var, cov).

    For m = 2 the release's loss is, with t = z_2 (the mean of the other views),

        L_release = lambda * MSE(z_1, z_2) + mu * [h(z_1) + h(z_2)] / 2 + cov * [c(z_1) + c(z_2)]

    and solo-learn's ``vicreg_loss_func`` is

        L_solo = sim * MSE(z_1, z_2) + var * [h(z_1) + h(z_2)] + cov * [c(z_1) + c(z_2)]

    with the same MSE (``F.mse_loss``, mean over N x D), the same c (squared off-diagonal
    covariance over N - 1, divided by D) and the same h (mean over dimensions of
    relu(1 - std), unbiased variance), so term by term sim = lambda, var = mu / 2 and
    cov = cov: the release's mu weighs the mean of the two hinges, solo-learn's var their
    sum. The forms still differ in two details this mapping cannot remove:

    * eps: solo-learn's std is sqrt(var + 1e-4), the release's has no eps; the hinges
      differ by about 5e-5 / std per dimension where std < 1 (none where std >= 1).
    * gathering: under DDP solo-learn computes the MSE per process and h, c on the
      gathered batch; our fastssl objective computes all three on the gathered batch
      (the same value with equal shards).

    beta = cov / sim = cov / lambda is unchanged by the mapping. The mapping is exact for
    m = 2 only: for m > 2 the release also regularizes the leave-one-out means t_i,
    which solo-learn's two-view loss has no counterpart for.

    Returns:
        ``(sim_loss_weight, var_loss_weight, cov_loss_weight)``.
    """
    return float(lam), mu / 2, float(cov)
