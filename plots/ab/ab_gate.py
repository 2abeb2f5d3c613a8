"""The A/B gate: one-sided paired t-tests of the gated metrics, Holm's correction across them,
and what the pairs could have detected.

Each gated metric's sample is its per-pair log worsening (log B/A for a time, log A/B for a
rate: above 0 is worse). A metric fails when the one-sided paired t-test finds it worse beyond
chance at the level Holm's step-down procedure gives it, so that over all the gated metrics of
a run the chance of failing unchanged code stays at most `error` whatever the metrics' joint
behaviour; and when its estimate (the geometric mean ratio) is worse by more than half the
threshold, so that a certain but negligible change does not fail.

Why a t-test: with n pairs no rank test (sign, Wilcoxon signed-rank) can give a p-value below
2^-n, 1/64 at 6 pairs, while Holm asks of the smallest p-value error / m (0.05 / 22 = 0.0023):
such a gate could never fail. The t-test uses the size of each ratio, reaches any level, and is
conservative against the odd wild pair (one outlier inflates the spread as much as the mean).

Every function takes arrays whose last axis is the pairs (NaN where a pair lacks the metric)
and whose axis before it is the metrics of one run, so that ab.py's verdict on one run and
the tests' 10,000 simulated runs are the same code.
"""

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

POWER = 0.95        # "could have detected": caught in this share of runs
MAX_PAIRS = 200     # the most pairs pairs_needed() looks for
GATE_MIN_PAIRS = 3  # fewer ratios than this give no spread: the metric is undecided


def _moments(x):
    """(count, mean, standard error) of each sample along the last axis, NaNs left out."""
    x = np.asarray(x, dtype=float)
    n = np.sum(~np.isnan(x), axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nansum(x, axis=-1) / n
        dev = np.where(np.isnan(x), 0.0, x - mean[..., None])
        sd = np.sqrt(np.sum(dev * dev, axis=-1) / (n - 1))
        se = sd / np.sqrt(n)
    return n, mean, se


def p_worse(x):
    """One-sided p-value of "worse", the paired t-test on the last axis: P(T >= mean / se).

    A sample without spread is certain: p 0 when its mean is above 0, else 1. Fewer than
    GATE_MIN_PAIRS values give 1 (nothing can be said)."""
    n, mean, se = _moments(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = mean / se
        p = stats.t.sf(t, np.maximum(n - 1, 1))
    p = np.where(se > 0, p, np.where(mean > 0, 0.0, 1.0))
    return np.where(n >= GATE_MIN_PAIRS, p, 1.0)


def holm(p, error):
    """Which hypotheses Holm's step-down procedure rejects, over the last axis (the metrics):
    sorted by p, the k-th smallest (from 0) is rejected while every one before it and itself
    are below error / (m - k)."""
    p = np.asarray(p, dtype=float)
    m = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=-1)
    below = ranked < error / (m - np.arange(m))
    passed = np.cumprod(below, axis=-1).astype(bool)
    out = np.zeros_like(passed)
    np.put_along_axis(out, order, passed, axis=-1)
    return out


def holm_adjusted(p):
    """Holm-adjusted p-values along the last axis: the smallest error at which each would be
    rejected (what the report prints)."""
    p = np.asarray(p, dtype=float)
    m = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=-1) * (m - np.arange(m))
    ranked = np.minimum(np.maximum.accumulate(ranked, axis=-1), 1.0)
    out = np.empty_like(ranked)
    np.put_along_axis(out, order, ranked, axis=-1)
    return out


def floor(threshold):
    """The least worsening that fails, however certain: half the threshold."""
    return math.log1p(threshold / 2)


def regressed(x, threshold, error):
    """Which gated metrics fail, over the last-but-one axis: Holm over the run's metrics, and
    a geometric-mean worsening beyond half the threshold."""
    _, mean, _ = _moments(x)
    return holm(p_worse(x), error) & (mean > floor(threshold))


def _critical(n, m, error):
    """The t quantiles (significance at Holm's first level, power) for n pairs, m metrics."""
    df = np.maximum(np.asarray(n) - 1, 1)
    return stats.t.isf(error / m, df), stats.t.isf(1 - POWER, df)


def detectable(x, threshold, error):
    """The smallest worsening (relative: 0.1 is 10%) each metric's test would flag in POWER of
    runs with this many pairs and this spread: significant at Holm's first level (error / m,
    the level a lone regression among m metrics meets) and beyond the floor. NaN where the
    sample is too small to tell."""
    n, _, se = _moments(x)
    m = np.shape(x)[-2]
    sig, pw = _critical(n, m, error)
    need = np.maximum((sig + pw) * se, floor(threshold) + pw * se)
    return np.where(n >= GATE_MIN_PAIRS, np.expm1(need), np.nan)


def pairs_needed(x, threshold, error):
    """Per metric, the fewest pairs with which detectable() would reach the threshold, were
    the spread per pair what these pairs show; MAX_PAIRS + 1 when even MAX_PAIRS would not,
    and for a sample too small to tell."""
    n, _, se = _moments(x)
    m = np.shape(x)[-2]
    sd = se * np.sqrt(n)
    target = math.log1p(threshold)
    k = np.arange(GATE_MIN_PAIRS, MAX_PAIRS + 1)
    sig, pw = _critical(k, m, error)
    # need(k) <= target for every k from the first one on (it only falls as k grows).
    with np.errstate(invalid="ignore"):
        need = np.maximum((sig + pw)[None, :] * sd.reshape(-1, 1) / np.sqrt(k),
                          floor(threshold) + pw[None, :] * sd.reshape(-1, 1) / np.sqrt(k))
    ok = need <= target
    first = np.where(ok.any(axis=1), k[np.argmax(ok, axis=1)], MAX_PAIRS + 1)
    first = np.where(np.asarray(n).reshape(-1) >= GATE_MIN_PAIRS, first, MAX_PAIRS + 1)
    return first.reshape(np.shape(n))


def interval(x, error):
    """(low, high) of each metric's mean log worsening, two-sided at Holm's first level: its
    low end is above 0 exactly when the metric's p is below error / m."""
    n, mean, se = _moments(x)
    sig, _ = _critical(n, np.shape(x)[-2], error)
    return mean - sig * se, mean + sig * se


@dataclass
class Gate:
    """The gate's verdict on one A/B folder. needed: the pairs with which every gated metric
    would reach the threshold (MAX_PAIRS + 1: more than MAX_PAIRS)."""
    pairs: int
    rows: list = field(default_factory=list)
    needed: int = 0

    @property
    def failed(self):
        return [r for r in self.rows if r.verdict == "REGRESSION"]

    @property
    def blind(self):
        """Gated metrics that could not have caught a regression of the threshold."""
        return [r for r in self.rows if r.verdict in ("too noisy", "too few pairs")]


def judge(rows, n_pairs, threshold, error):
    """Gives every gated row (ab_rows.AbRow with .gated) its verdict, p, ratio, interval and
    detectable; returns the Gate."""
    gated = [r for r in rows if r.gated]
    if not gated:
        return Gate(n_pairs)
    x = np.array([r.worse for r in gated], dtype=float).reshape(len(gated), -1)
    n, mean, _ = _moments(x)
    flagged = regressed(x, threshold, error)
    better = holm(p_worse(-x), error) & (-mean > floor(threshold))
    adjusted = holm_adjusted(p_worse(x))
    seen = detectable(x, threshold, error)
    low, high = interval(x, error)
    for i, r in enumerate(gated):
        turn = (lambda w: math.exp(-w)) if r.kind == "higher" else math.exp  # to B/A
        r.pairs, r.p, r.detectable = int(n[i]), float(adjusted[i]), float(seen[i])
        r.ratio = turn(mean[i]) if n[i] else math.nan
        r.low, r.high = sorted((turn(low[i]), turn(high[i]))) if n[i] >= GATE_MIN_PAIRS else (math.nan,) * 2
        if n[i] < GATE_MIN_PAIRS:
            r.verdict, r.note = "too few pairs", f"{n[i]} pairs with a ratio, {GATE_MIN_PAIRS} needed"
        elif flagged[i]:
            r.verdict = "REGRESSION"
        elif better[i]:
            r.verdict = "improved"
        else:
            r.verdict = "ok" if seen[i] <= threshold else "too noisy"
    needed = int(np.max(pairs_needed(x, threshold, error)))
    return Gate(n_pairs, gated, needed)
