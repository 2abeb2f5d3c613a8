"""The paired A/B decision for one metric: B/A ratios per pair -> median, interval, verdict.

Each pair is one run of A and one of B taken close together, so whatever the machine did
at that moment slows both; their ratio cancels it. The interval of the median ratio is the
distribution-free one of the sign test (order statistics of the sorted ratios, coverage
from the binomial distribution): exact for any shape of noise, for as few as 5 pairs, and
with no random resampling, so the same data always give the same verdict.
"""

import math
from dataclasses import dataclass

MIN_PAIRS = 5
DEFAULT_CONFIDENCE = 0.98  # two-sided: at most 1% of unchanged metrics flagged by chance

# Verdicts that fail the gate, and those that decide nothing (reported, never silent).
FAILING = {"REGRESSION", "MISMATCH", "MISSING", "ERROR"}
UNDECIDED = {"too noisy", "too few pairs"}


def coverage(n, k):
    """Probability that [x_(k), x_(n+1-k)] of n samples (1-based, sorted) holds the median."""
    outside = sum(math.comb(n, i) for i in range(k)) / 2.0 ** n
    return 1.0 - 2.0 * outside


def order_interval(n, confidence):
    """(k, coverage): the narrowest order-statistic interval with coverage >= confidence.

    With too few samples for the confidence, the widest one (min, max) and its lower
    coverage, which the report states.
    """
    best = 1
    for k in range(1, (n + 1) // 2 + 1):
        if coverage(n, k) >= confidence:
            best = k
    return best, coverage(n, best)


@dataclass
class Decision:
    """One metric's A/B result. Ratios are B/A; "worse" turns them so that > 1 is worse."""
    pairs: int
    ratio: float        # median B/A
    low: float          # interval of the median B/A
    high: float
    coverage: float     # of that interval
    detectable: float   # smallest worsening (relative) these data could have flagged
    verdict: str
    note: str = ""


def _median(sorted_values):
    n = len(sorted_values)
    mid = n // 2
    return sorted_values[mid] if n % 2 else 0.5 * (sorted_values[mid - 1] + sorted_values[mid])


def decide(ratios, higher_is_better, threshold, confidence=DEFAULT_CONFIDENCE):
    """The verdict on paired B/A ratios (finite and > 0) of one metric.

    Works on logarithms of the worsening (B/A for a time, A/B for a rate), so a 20% slower
    time and the matching lower bandwidth get the same verdict.
      REGRESSION     the interval lies above 1 (worse beyond chance) and the median worsening
                     exceeds the threshold
      improved       the same the other way
      ok             the interval ends below a worsening of the threshold: none that large
                     is hiding in these data
      too noisy      none of these: the interval holds both "no change" and a worsening
                     beyond the threshold, so the data cannot tell
    detectable, the smallest worsening these data could flag, is the distance from the
    median down to the interval's lower end: a shift of the whole sample by more than that
    (and more than the threshold) would have made it a REGRESSION.
    """
    n = len(ratios)
    if n < MIN_PAIRS:
        return Decision(n, math.nan, math.nan, math.nan, math.nan, math.nan, "too few pairs",
                        f"{n} pairs with a ratio, {MIN_PAIRS} needed")
    sign = -1.0 if higher_is_better else 1.0
    worse = sorted(sign * math.log(r) for r in ratios)
    k, cov = order_interval(n, confidence)
    mid, lo, hi = _median(worse), worse[k - 1], worse[n - k]
    limit = math.log1p(threshold)
    detectable = math.expm1(mid - lo)
    if lo > 0 and mid > limit:
        verdict = "REGRESSION"
    elif hi < 0 and mid < -limit:
        verdict = "improved"
    elif hi <= limit:
        verdict = "ok"
    else:
        verdict = "too noisy"
    to_ratio = (lambda w: math.exp(w)) if sign > 0 else (lambda w: math.exp(-w))
    low, high = sorted((to_ratio(lo), to_ratio(hi)))
    return Decision(n, to_ratio(mid), low, high, cov, detectable, verdict)
