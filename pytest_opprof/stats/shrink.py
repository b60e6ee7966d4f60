"""The two empirical-Bayes shrinkers of an op's variance, one per design. Both borrow
strength from the test's other ops, because a few runs or pairs tell little of one
op's own spread; they differ because what each design measures differs.

- :func:`spread_posterior` fits the **stored-baseline rule** (judge/rule.py). Its ops
  may have a single baseline run (nothing measured of their own: a prior is all there
  is, and a quantile of it is read, not its centre), the test's typical spread comes
  from outside the op (the baseline's other ops, how far the ops moved since), ops
  differ by orders of magnitude (a GPU kernel at 0.01% beside a launch-bound op at
  20%: a heavy-tailed lognormal prior on a grid, not a conjugate one), and the result
  is a point estimate of the variance that sets a normal margin.
- :func:`moderated` fits the **paired model** (judge/paired.py). Every op has the same
  ``pairs - 1`` degrees of freedom of its own, measured now, in pairs whose drift is
  already out; the variances are then scaled chi-square draws around a scaled inverse
  chi-square prior (Smyth 2004, limma's moderated t), fitted by moments, and the
  result carries degrees of freedom for a Student's t interval.
"""

from __future__ import annotations

import math

import numpy as np

from .distributions import digamma, trigamma, trigamma_inverse

# -- the stored-baseline rule's: a grid posterior --------------------------------------

#: The grid over an op's spread relative to the test's typical one: 1/10,000 to 30x.
SPREAD_GRID = np.linspace(math.log(1e-4), math.log(30.0), 161)


def spread_posterior(sample_var: np.ndarray, dof: np.ndarray, se2: np.ndarray,
                     jitter2: np.ndarray, typical: float, *, tau_spread: float,
                     tau_tail: float, measured_quantile: float,
                     unmeasured_quantile: float) -> np.ndarray:
    """Each op's variance of its log median between processes (relative spread and
    jitter), given the test's ``typical`` spread and the op's own runs: ``sample_var``
    of ``dof`` degrees of freedom (0: one run), each run's median known to ``se2``.
    The prior is lognormal around the typical with log-sd ``tau_spread``, and a
    ``tau_tail`` share spread evenly over the grid. The posterior's
    ``measured_quantile`` for a measured op, its ``unmeasured_quantile`` for one never
    measured."""
    step = SPREAD_GRID[1] - SPREAD_GRID[0]
    normal = np.exp(-0.5 * (SPREAD_GRID / tau_spread) ** 2) \
        * step / (tau_spread * math.sqrt(2 * math.pi))
    tail = step / (SPREAD_GRID[-1] - SPREAD_GRID[0])
    tau2 = (typical * np.exp(SPREAD_GRID)) ** 2 + jitter2[:, None]
    log_weight = np.broadcast_to(np.log((1 - tau_tail) * normal + tau_tail * tail),
                                 tau2.shape).copy()
    measured = dof > 0
    if measured.any():
        var = tau2[measured] + se2[measured, None]
        k = dof[measured, None]
        log_weight[measured] += -0.5 * k * (np.log(var) + sample_var[measured, None] / var)
    log_weight -= log_weight.max(axis=1, keepdims=True)
    weight = np.exp(log_weight)
    # the posterior median of a measured op (the mean is dragged by the prior's mass
    # where the test's other ops are: five runs agreeing to 0.2% would be read as 2%);
    # an op never measured may be one of those that move more than the typical
    level = np.where(measured, measured_quantile, unmeasured_quantile)
    cumulative = np.cumsum(weight, axis=1)
    index = (cumulative < level[:, None] * cumulative[:, -1:]).sum(axis=1)
    return np.asarray(np.take_along_axis(tau2, index[:, None], axis=1)[:, 0])


# -- the paired model's: limma's moderated variances -----------------------------------

def moderated(var: np.ndarray, dof: int, *, min_ops: int,
              max_prior_weight: float) -> tuple[np.ndarray, float]:
    """Each op's variance (``dof`` degrees of freedom each) shrunk towards the test's
    typical variance, and the degrees of freedom of the result (Smyth 2004: the
    variances as scaled chi-squared draws around a scaled inverse chi-squared prior,
    fitted by moments of log variance; its weight at most ``max_prior_weight`` times the
    op's own). Fewer than ``min_ops`` ops: returned as they are."""
    if len(var) < min_ops:
        return var, float(dof)
    e = np.log(var) - digamma(dof / 2) + math.log(dof / 2)
    excess = float(e.var(ddof=1)) - trigamma(dof / 2)
    # excess <= 0: the ops' variances differ no more than chance (d0 infinite)
    d0 = 2 * trigamma_inverse(excess) if excess > 0 else math.inf
    d0 = min(d0, max_prior_weight * dof)
    s0 = math.exp(float(e.mean()) + digamma(d0 / 2) - math.log(d0 / 2))
    return (d0 * s0 + dof * var) / (d0 + dof), d0 + dof
