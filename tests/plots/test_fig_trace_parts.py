"""The timeline of a trace whose waits are split by cause: the part waiting for a late rank is
its own kind in the figure and its CSV, the part on the wire stays a wait, and the figure fits
its frame with the longer legend. The step drawn is set beside the timed steps' exposed time."""

import csv
import sys

from results_fixture import PLOTS, run_tool, trace, write, zero

sys.path.insert(0, PLOTS)
import fig_trace  # noqa: E402
import zbplot  # noqa: E402


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


def drawn_step(stage="z2", round_="step", exposed_us=(738.567, 8547.121)):
    """A zb_zero trace of `stage` whose ranks' exposed times this step are `exposed_us`."""
    doc = trace(waits=True)
    doc["traceEvents"] += [{"name": "process_name", "ph": "M", "pid": r, "args": {"name": f"rank {r}",
                                                                                  "exposed_us": us}}
                           for r, us in enumerate(exposed_us)]
    doc["zerobench"] = {"stage": stage, "round": round_, "ranks": 2}
    return doc


def test_the_step_drawn_is_set_beside_the_timed_steps():
    # Its slowest rank's exposed time, as the timed steps count theirs, beside their median and
    # range: here a step three times the timed median, which a reader should not take for typical.
    assert fig_trace.step_note(drawn_step(), (0.00255, 0.00065, 0.00364)) == \
        "exposed: this step 8.55 ms, timed steps 2.55 ms\n(their repetitions 0.65 to 3.64 ms)"
    assert fig_trace.step_note(drawn_step(), (0.00255, 0.00255, 0.00255)) == \
        "exposed: this step 8.55 ms, timed steps 2.55 ms"  # one repetition: no range
    assert fig_trace.step_note(drawn_step()) == "exposed: this step 8.55 ms"
    assert fig_trace.step_note(trace(waits=True), (0.00255, 0.00065, 0.00364)) == ""  # no exposed_us


def test_the_timed_steps_are_the_traced_stages_in_zero_json(tmp_path):
    document = zero()
    for r in document["benchmarks"]:  # z2's three repetitions: 3, 5 and 4 ms exposed
        if "stage:z2" in r["name"] and r["run_type"] == "iteration":
            r["exposed_comm_s"] = (0.003, 0.005, 0.004)[r["repetition_index"]]
    write(tmp_path / "zero.json", document)
    assert zbplot._timed_exposed(str(tmp_path), drawn_step()) == (0.004, 0.003, 0.005)
    assert zbplot._timed_exposed(str(tmp_path), drawn_step(stage="z9")) is None
    assert zbplot._timed_exposed(str(tmp_path), drawn_step(round_="comm")) is None  # not the full step's
    # And drawn: the note fits the figure's frame.
    write(tmp_path / "trace_z2.json", drawn_step())
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0 and "past its edge" not in r.stderr, r.stdout + r.stderr
    assert (tmp_path / "figures" / "timeline_z2.png").is_file()
