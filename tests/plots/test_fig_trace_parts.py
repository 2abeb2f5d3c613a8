"""The timeline of a trace whose waits are split by cause: the part waiting for a late rank is
its own kind in the figure and its CSV, the part on the wire stays a wait, and the figure fits
its frame with the longer legend."""

import csv

from results_fixture import run_tool, trace, write


def split_trace():
    doc = trace(waits=True)
    events = [e for e in doc["traceEvents"] if not (e.get("ph") == "X" and e.get("tid") == 2)]
    for r in range(2):
        events.append({"name": "wait for rank 1", "ph": "X", "ts": 1950.0, "dur": 30.0, "pid": r, "tid": 2,
                       "args": {"awaits": 5, "part": "skew", "late_rank": 1}})
        events.append({"name": "wait for the wire", "ph": "X", "ts": 1980.0, "dur": 10.0 + r, "pid": r, "tid": 2,
                       "args": {"awaits": 5, "part": "wire", "late_rank": 1}})
    doc["traceEvents"] = events
    return doc


def test_a_waits_two_parts_are_drawn_and_listed_apart(tmp_path):
    write(tmp_path / "trace.json", split_trace())
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "past its edge" not in r.stderr, r.stderr
    with open(tmp_path / "figures" / "timeline.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    waits = sorted((r["pid"], r["track"], r["name"]) for r in rows if r["tid"] == "2")
    assert waits == [("0", "skew", "wait for rank 1"), ("0", "wait", "wait for the wire"),
                     ("1", "skew", "wait for rank 1"), ("1", "wait", "wait for the wire")]
