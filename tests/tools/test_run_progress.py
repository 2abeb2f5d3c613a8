"""tools/run_progress.py: benchmarks counted from a console as Google Benchmark prints it, and the
plan, the progress line and the estimate-against-actual table, formatted from given times (no
clock is read: every time here is an argument)."""

import json
import os
import sys

ROOT = os.environ.get("ZB_ROOT") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from run_progress import (Planned, Progress, RowCounter, benchmarks_in_json, clock, plan_lines, span,  # noqa: E402
                          summary_lines)

CONSOLE = """\
2025-01-01T00:00:00+00:00
Running zb_zero
Run on (2 X 2000 MHz CPU s)
-------------------------------------------------------------------------------------
Benchmark                                           Time             CPU   Iterations
-------------------------------------------------------------------------------------
zero/stage:dp/params:2000000/manual_time         5.12 ms         5.00 ms            3 wrong=0
zero/stage:dp/params:2000000/manual_time         5.20 ms         5.01 ms            3 wrong=0
zero/stage:dp/params:2000000/manual_time_mean    5.16 ms         5.00 ms            2 wrong=0
zero/stage:dp/params:2000000/manual_time_median  5.16 ms         5.00 ms            2 wrong=0
zero/stage:dp/params:2000000/manual_time_stddev 0.057 ms        0.007 ms            2 wrong=0
zero/stage:dp/params:2000000/manual_time_cv      1.10 %          0.14 %             2 wrong=0
zero/stage:z1/params:2000000/manual_time          712 us          700 us            3 wrong=0
plan/stage:z1                                    1.5e+03 ns      1.4e+03 ns         1
\x1b[m\x1b[0;32mall_reduce/bytes:1024/manual_time     \x1b[m\x1b[0;33m      9529 us         3.28 us   \x1b[m\x1b[0;36m  2\x1b[m
\x1b[m\x1b[0;32mall_reduce/bytes:1024/manual_time_cv  \x1b[m\x1b[0;33m      7.26 %         46.76 %    \x1b[m\x1b[0;36m  2\x1b[m

# zb_zero: 2 ranks (1 node(s) x 2), uniform, Psi = 2000000
stage   bytes/param formula   measured
dp      16.000                16.100
"""


def test_benchmarks_are_counted_once_each_from_the_console():
    c = RowCounter()
    firsts = [line for line in CONSOLE.splitlines() if c.feed(line)]
    assert c.done == 4
    assert [f.split()[0] for f in firsts][:3] == ["zero/stage:dp/params:2000000/manual_time",
                                                  "zero/stage:z1/params:2000000/manual_time", "plan/stage:z1"]
    assert "all_reduce/bytes:1024/manual_time" in firsts[3]  # coloured, as ranks under mpirun print


def test_a_finished_run_is_counted_from_its_json(tmp_path):
    # Two benchmarks, each with two repetitions and its aggregates: 2. The console's count of
    # the same run can be one more, where another process's line split a row (run_progress).
    rows = [{"name": f"{n}/manual_time{agg}", "run_name": f"{n}/manual_time"}
            for n in ("all_reduce/bytes:1024", "all_gather/bytes:1024")
            for agg in ("", "", "_mean", "_median", "_stddev", "_cv")]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"context": {}, "benchmarks": rows}))
    assert benchmarks_in_json(path) == 2
    # One more that ended in an error is not a benchmark done; one without a run_name is its name.
    failed = {"name": "x/manual_time", "run_name": "x/manual_time", "error_occurred": True}
    path.write_text(json.dumps({"context": {}, "benchmarks": rows + [failed, {"name": "y/manual_time"}]}))
    assert benchmarks_in_json(path) == 3
    path.write_text('{"context": {}, "benchmarks": [')  # cut short
    assert benchmarks_in_json(path) is None
    assert benchmarks_in_json(tmp_path / "none.json") is None


def planned():
    return [Planned("collectives", "collectives", 4, 1.0, [2.0] * 4),
            Planned("zero_wire", "zero", 6, 1.0, [10.0] * 6, skip="one rank moves nothing over a wire"),
            Planned("zero", "zero", 6, 2.0, [20.0] * 6),
            Planned("plan", "plan", 1, 0.5, [0.0])]


def test_the_plan_gives_each_family_its_benchmarks_and_estimate():
    assert plan_lines(planned(), "cost model") == [
        "plan: 11 benchmarks in 3 runs, about 2 min 12 s of benchmarking (cost model)",
        "  family       runs  benchmarks     estimate",
        "  collectives     1           4          9 s",
        "  zero            1           6   2 min 02 s (skips zero_wire)",
        "  plan            1           1          0 s",
        "  total           3          11   2 min 12 s",
    ]
    assert plan_lines(planned(), "x", runs_of_suite=16)[-1] == "  x 16 runs of the suite: about 35 min 04 s"


def test_the_progress_line_counts_done_benchmarks_and_the_time_left():
    p = Progress(planned())
    p.current = "collectives"
    p.done["collectives"] = 1
    # The current run's 3 undone benchmarks (6 s), then zero (122 s) and plan (0.5 s): 128.5 s.
    assert p.line(5, 3) == "collectives 1/4, all 1/11 benchmarks, 0:05 elapsed, about 2:08 left"
    p.done["collectives"], p.finished["collectives"] = 4, 18.0  # twice its estimate: the rest scales alike
    p.current = "zero"
    p.done["zero"] = 3
    assert p.line(30, 12) == "zero 3/6, all 7/11 benchmarks, 0:30 elapsed, about 2:01 left"


def test_a_run_still_starting_counts_its_elapsed_time_against_its_estimate():
    p = Progress(planned()[:1])
    p.current = "collectives"
    assert p.left_s(0) == 9.0 and p.left_s(4) == 8.0  # its benchmarks (8 s) bound it from below


def test_plain_lines_come_at_most_every_10_seconds():
    p = Progress(planned())
    assert [t for t in (0, 3, 9.9, 10, 12, 25, 34.9, 35) if p.due(t)] == [0, 10, 25, 35]


def test_the_end_puts_the_estimate_beside_the_actual_time():
    lines = summary_lines(planned(), {"collectives": 12.0, "zero": 150.0})
    assert lines == [
        "time per family: estimate and actual",
        "  family           estimate       actual   ratio",
        "  collectives           9 s         12 s    1.33",
        "  zero           2 min 02 s   2 min 30 s    1.23",
        "  total          2 min 11 s   2 min 42 s    1.24",
    ]


def test_durations():
    assert [span(s) for s in (0, 42.4, 99.6, 204)] == ["0 s", "42 s", "1 min 40 s", "3 min 24 s"]
    assert [clock(s) for s in (0, 65, 3725)] == ["0:00", "1:05", "1:02:05"]
