"""plots/ab/ab_stats.py on crafted ratio samples: equal, shifted, noisy, too few; its error rates."""

import math
import random
import sys

import pytest

from results_fixture import PLOTS

sys.path.insert(0, PLOTS)
from ab_stats import coverage, decide, order_interval  # noqa: E402

T = 0.1  # the default threshold


def test_interval_coverage_is_the_binomial_one():
    assert coverage(5, 1) == 1 - 2 / 32
    assert coverage(7, 1) == 1 - 2 / 128
    assert coverage(12, 2) == 1 - 2 * 13 / 4096
    assert order_interval(7, 0.98) == (1, 1 - 2 / 128)
    assert order_interval(12, 0.98) == (2, 1 - 2 * 13 / 4096)  # (3, 96.1%) would not do
    # Too few pairs for the confidence: the widest interval, and its own coverage said.
    assert order_interval(5, 0.98) == (1, 0.9375)


def test_equal_runs_are_ok_with_nothing_hidden():
    d = decide([1.0] * 7, False, T)
    assert (d.verdict, d.ratio, d.low, d.high, d.detectable) == ("ok", 1.0, 1.0, 1.0, 0.0)


def test_twenty_percent_slower_is_a_regression():
    ratios = [1.18, 1.22, 1.2, 1.25, 1.19, 1.21, 1.17]
    d = decide(ratios, False, T)
    assert d.verdict == "REGRESSION"
    assert d.ratio == 1.2 and (d.low, d.high) == (1.17, 1.25)
    assert d.detectable == pytest.approx(1.2 / 1.17 - 1)


def test_lower_rate_is_the_same_regression():
    # busbw of the same runs: A/B turned around, same verdict and detectable change.
    ratios = [1 / r for r in (1.18, 1.22, 1.2, 1.25, 1.19, 1.21, 1.17)]
    d = decide(ratios, True, T)
    assert d.verdict == "REGRESSION" and d.ratio == pytest.approx(1 / 1.2)
    assert d.detectable == pytest.approx(1.2 / 1.17 - 1)
    assert decide(ratios, False, T).verdict == "improved"


def test_small_shift_within_threshold_is_ok():
    # Worse beyond chance (every ratio above 1), but by 5%: not a regression at 10%.
    d = decide([1.04, 1.05, 1.06, 1.05, 1.045, 1.055, 1.05], False, T)
    assert d.verdict == "ok" and d.low > 1


def test_noisy_metric_is_too_noisy_not_ok_and_not_failed():
    ratios = [0.7, 1.3, 1.0, 1.1, 0.9, 1.2, 0.8]
    d = decide(ratios, False, T)
    assert d.verdict == "too noisy"
    assert d.detectable == pytest.approx(1.0 / 0.7 - 1)
    # Quiet below, loud above: the interval still reaches past the threshold.
    assert decide([1.0, 1.0, 1.01, 1.0, 0.99, 1.0, 1.15], False, T).verdict == "too noisy"
    # A regression at the threshold hides in this noise; one far beyond it does not.
    assert decide([r * 1.15 for r in ratios], False, T).verdict == "too noisy"
    assert decide([r * 1.6 for r in ratios], False, T).verdict == "REGRESSION"


def test_one_pair_against_the_others_blocks_a_regression():
    # Six pairs 20% slower, one 5% faster: at 98% the interval reaches below 1.
    d = decide([1.2, 1.21, 1.19, 1.22, 1.2, 1.18, 0.95], False, T)
    assert d.verdict == "too noisy" and d.low < 1


def test_too_few_pairs_decides_nothing():
    d = decide([1.5] * 4, False, T)
    assert d.verdict == "too few pairs" and math.isnan(d.ratio)


def test_improvement():
    assert decide([0.8, 0.82, 0.79, 0.81, 0.8, 0.78, 0.8], False, T).verdict == "improved"


def simulate(shift, sigma, metrics=3000, pairs=7, seed=11):
    """Verdict counts over synthetic metrics: B/A = shift x lognormal noise per pair."""
    rng = random.Random(seed)
    counts = {}
    for _ in range(metrics):
        ratios = [shift * math.exp(rng.gauss(0.0, sigma)) for _ in range(pairs)]
        v = decide(ratios, False, T).verdict
        counts[v] = counts.get(v, 0) + 1
    return counts


@pytest.mark.parametrize("sigma", [0.01, 0.05, 0.2, 1.0])
def test_unchanged_metrics_are_flagged_at_most_once_per_hundred(sigma):
    # Under no change every ratio is as likely above 1 as below: P(all 7 above) = 1/128.
    counts = simulate(1.0, sigma)
    assert counts.get("REGRESSION", 0) <= 3000 // 100, counts


def test_planted_twenty_percent_is_found_in_quiet_data_and_undecided_in_loud():
    quiet = simulate(1.2, 0.02)
    assert quiet.get("REGRESSION", 0) >= 0.99 * 3000, quiet
    loud = simulate(1.2, 0.5)
    # Mostly said to be undecided; called ok only as often as the interval misses (1/128).
    assert loud.get("too noisy", 0) > 0.8 * 3000, loud
    assert loud.get("ok", 0) <= 3000 // 100, loud
