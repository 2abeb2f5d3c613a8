"""plots/gbjson.py: name parsing, time units, iteration and aggregate rows."""

import math
import sys

import pytest

from results_fixture import PLOTS, aggregate, doc, row

sys.path.insert(0, PLOTS)
import gbjson  # noqa: E402


def test_parse_name():
    fam, params = gbjson.parse_name("zero/stage:z2/params:1024/compute:spin:200/real_time")
    assert fam == "zero"
    assert params == {"stage": "z2", "params": "1024", "compute": "spin:200", "real_time": ""}
    assert gbjson.number(params["params"]) == 1024.0
    assert gbjson.number(params["stage"]) is None


def test_match_key_ignores_repeats():
    assert gbjson.match_key("adam/params:8/repeats:5") == gbjson.match_key("adam/params:8")


@pytest.mark.parametrize("unit,scale", [("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3), ("s", 1.0)])
def test_time_units(unit, scale):
    _, runs = gbjson.parse_gb("x", doc([row("a/b:1", 3.0, unit)]))
    assert runs[0].real_time_s == pytest.approx(3.0 * scale)


def test_counters_nan_and_unknown_unit():
    _, runs = gbjson.parse_gb("x", doc([row("a", 1.0, busbw_GBps=math.nan, note="text",
                                            flag=True)]))
    assert math.isnan(runs[0].counters["busbw_GBps"])
    assert "note" not in runs[0].counters and "flag" not in runs[0].counters
    assert "iterations" not in runs[0].counters
    with pytest.raises(gbjson.InputError):
        gbjson.parse_gb("x", doc([row("a", 1.0, "min")]))


def test_samples_and_representative():
    rows = [row("a", 1.0, rep=0, reps=3, x=1.0), row("a", 3.0, rep=1, reps=3, x=3.0),
            row("a", 2.0, rep=2, reps=3, x=2.0), aggregate("a", "mean", 2.0, x=2.0),
            aggregate("b", "median", 7.0, x=7.5)]
    _, runs = gbjson.parse_gb("x", doc(rows))
    s = gbjson.samples(runs)
    assert [r.real_time_s for r in s["a"]] == pytest.approx([1e-9, 3e-9, 2e-9])
    # Aggregates-only output still gives one sample per benchmark.
    assert [r.counters["x"] for r in s["b"]] == [7.5]
    rep = gbjson.representative(runs)
    assert rep["a"].value("x") == 2.0 and rep["b"].value("x") == 7.5
    assert math.isnan(rep["a"].value("missing"))


def test_spread_is_the_lowest_and_highest_repetition():
    rows = [row("a", 1.0, rep=0, reps=3, x=1.0), row("a", 3.0, rep=1, reps=3, x=3.0),
            row("a", 2.0, rep=2, reps=3, x=2.5), aggregate("a", "median", 2.0, x=2.5),
            row("c", 4.0, x=4.0), aggregate("b", "median", 7.0, x=7.5)]
    rep = gbjson.representative(gbjson.parse_gb("x", doc(rows))[1])
    assert rep["a"].repetitions == 3 and rep["a"].spread("x") == (1.0, 3.0)
    assert rep["a"].value("x") == 2.5  # Google Benchmark's median row, not ours
    # One run, or aggregates alone: no spread to show.
    assert rep["c"].repetitions == 1 and rep["c"].spread("x") == (4.0, 4.0)
    assert rep["b"].repetitions == 1 and rep["b"].spread("x") == (7.5, 7.5)
