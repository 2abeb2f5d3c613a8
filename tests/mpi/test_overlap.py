"""Overlap at 2 ranks, checked on the schedule itself, never on a duration: the trace of one
step shows every collective, each z3 gather issued before the compute it must hide behind
ends, each reduction issued the moment its bucket fills, no overlap at all when serialised,
each z1/z2 weight gather issued as its unit is updated, every wait a wait for a collective
in flight, compute's waits for communication adding up to the exposed time the step
reports, and the step drawn run as the timed ones are, a straggler's lateness carried in."""
import json
import math
import os
import tempfile

import pytest

from zbrun import benchmarks, drawn_and_candidates, run_json

# 16 layers, one bucket per layer, so unit i is layer i in every stage.
LAYERS = 16
MODEL = ["--params=8e6", f"--layers={LAYERS}", "--bucket-mb=0.9", "--optimizer=momentum"]
MCA = ["--bind-to", "none"]


def spans(trace, rank, tid):
    return sorted((e for e in trace["traceEvents"]
                   if e["ph"] == "X" and e["pid"] == rank and e["tid"] == tid),
                  key=lambda e: e["ts"])


def end(e):
    return e["ts"] + e["dur"]


@pytest.fixture(scope="module", params=["on", "off"])
def traces(request):
    """One traced step of every stage, overlapped or serialised: {stage: trace}."""
    overlap = request.param
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        data, _ = run_json(2, "zb_zero", [*MODEL, "--compute=sleep:500", f"--overlap={overlap}",
                                          "--iters=2", "--warmup=1", f"--trace={path}"], mca=MCA)
        out = {}
        for stage in ("dp", "z1", "z2", "z3"):
            with open(os.path.join(tmp, f"trace_{stage}.json")) as f:
                out[stage] = json.load(f)
    return overlap, out, data


def test_trace_holds_every_collective(traces):
    _, by_stage, _ = traces
    want = {"dp": (LAYERS, 0, 0), "z1": (0, LAYERS, LAYERS), "z2": (0, LAYERS, LAYERS),
            "z3": (0, LAYERS, 2 * LAYERS)}
    want_in_place = {"dp": {"all_reduce"}, "z1": {"reduce_scatter", "all_gather"}, "z2": {"all_gather"}, "z3": set()}
    for stage, trace in by_stage.items():
        meta = trace["zerobench"]
        assert meta["stage"] == stage and meta["ranks"] == 2
        assert tuple(meta["collectives"][op] for op in ("all_reduce", "reduce_scatter", "all_gather")) \
            == want[stage]
        for rank in (0, 1):
            comm = spans(trace, rank, 1)
            for op, count in meta["collectives"].items():
                assert sum(e["name"].startswith(op + " ") for e in comm) == count, (stage, op)
            # Each marked with its placement: dp's and z1's reductions over the gradients, z1's
            # and z2's gathers into the whole weights; z2's and z3's from slots, z3's into a layer.
            placed = {(e["name"].split()[0], e["args"]["in_place"]) for e in comm}
            assert placed == {(op, op in want_in_place[stage]) for op, n in meta["collectives"].items() if n}, \
                (stage, rank)


def test_z3_gathers_are_issued_before_the_compute_they_hide_behind_ends(traces):
    overlap, by_stage, _ = traces
    z3 = by_stage["z3"]
    for rank in (0, 1):
        compute = {e["name"]: e for e in spans(z3, rank, 0)}
        gathers = [e for e in spans(z3, rank, 1) if e["name"].startswith("all_gather")]
        first = {u: min((g for g in gathers if g["args"]["unit"] == u), key=lambda g: g["args"]["issued_us"])
                 for u in range(LAYERS)}
        early = 0
        for i in range(LAYERS - 1):
            # The forward gather of layer i+1 (its first gather) against forward of layer i.
            early += first[i + 1]["args"]["issued_us"] < end(compute[f"forward L{i}"])
        # Backward starts with the last layer again: its second gather, against forward's
        # last layer.
        again = max((g for g in gathers if g["args"]["unit"] == LAYERS - 1),
                    key=lambda g: g["args"]["issued_us"])
        early += again["args"]["issued_us"] < end(compute[f"forward L{LAYERS - 1}"])
        # Prefetched: every next gather is issued while this layer computes; serialised: only
        # after it.
        assert early == (LAYERS if overlap == "on" else 0), (rank, early)


@pytest.mark.parametrize("stage", ["dp", "z1", "z2"])
def test_each_reduction_is_issued_when_its_bucket_fills(traces, stage):
    _, by_stage, _ = traces
    trace = by_stage[stage]
    for rank in (0, 1):
        compute = {e["name"]: e for e in spans(trace, rank, 0)}
        reductions = {e["args"]["unit"]: e for e in spans(trace, rank, 1)
                      if e["name"].split()[0] in ("all_reduce", "reduce_scatter")}
        assert sorted(reductions) == list(range(LAYERS))
        for u in range(LAYERS):
            issued = reductions[u]["args"]["issued_us"]
            # After the bucket's last gradient (backward of layer u) is written, and before
            # backward moves on to the next layer.
            assert issued >= end(compute[f"backward L{u}"]), (stage, rank, u)
            if u > 0:
                assert issued <= compute[f"backward L{u - 1}"]["ts"], (stage, rank, u)


@pytest.mark.parametrize("stage", ["z1", "z2"])
def test_each_weight_gather_is_issued_when_its_unit_is_updated(traces, stage):
    # z1 and z2 gather each unit's updated weights the moment the optimizer has updated it,
    # so the gathers run under the rest of the optimizer (and the next forward, which waits
    # for them unit by unit); serialised, the next update waits for the gather to end.
    overlap, by_stage, _ = traces
    trace = by_stage[stage]
    for rank in (0, 1):
        compute = {e["name"]: e for e in spans(trace, rank, 0)}
        gathers = {e["args"]["unit"]: e for e in spans(trace, rank, 1) if e["name"].startswith("all_gather")}
        assert sorted(gathers) == list(range(LAYERS))
        for u in range(LAYERS):
            issued = gathers[u]["args"]["issued_us"]
            assert issued >= end(compute[f"optimizer U{u}"]), (stage, rank, u)
            if u + 1 == LAYERS:
                continue
            following = compute[f"optimizer U{u + 1}"]
            if overlap == "on":
                assert issued <= following["ts"], (stage, rank, u)
            else:
                assert following["ts"] >= end(gathers[u]), (stage, rank, u)


def test_every_wait_is_for_a_collective_in_flight(traces):
    # Each wait names the collective it waited for (its entry in the log): that one was
    # issued before the wait began and had ended when the wait returned, so no wait is
    # counted as exposed communication without communication to wait for. Waits for the
    # previous step's collectives (forward waiting for its weights) name entries before
    # this step's trace and are left out.
    _, by_stage, _ = traces
    rounding = 0.002  # ts and dur are printed to 0.001 us
    for stage, trace in by_stage.items():
        for rank in (0, 1):
            comm = {e["args"]["log"]: e for e in spans(trace, rank, 1)}
            checked = 0
            waits = spans(trace, rank, 2)
            for i, w in enumerate(waits):
                awaits = w["args"].get("awaits")  # absent: recorded before any collective
                c = comm.get(awaits)
                if c is None:
                    assert awaits is None or awaits < min(comm), (stage, rank, w)
                    continue
                checked += 1
                assert c["args"]["issued_us"] <= w["ts"] + rounding, (stage, rank, w, c)
                # A wait drawn in two parts (until the last rank issued, then the wire) ends
                # where its wire part ends.
                after = waits[i + 1] if i + 1 < len(waits) else None
                joined = (w["args"].get("part") == "skew" and after is not None and after["args"].get("part") == "wire"
                          and after["args"].get("awaits") == awaits and abs(after["ts"] - end(w)) <= rounding)
                assert end(c) <= end(after if joined else w) + rounding, (stage, rank, w, c)
            assert checked, (stage, rank)  # the optimizer's wait for the last reduction at least


def test_the_step_drawn_meets_a_straggler_as_the_timed_steps_do():
    # Rank 1 sleeps 300 ms at the end of every full step (--fault-late), so each timed step
    # begins with rank 0 that far ahead, waiting for rank 1 at its first blocking wait. The
    # drawn step runs as they do, right after an untimed step with no barrier between: on the
    # trace's one time line rank 1 begins it after rank 0 has begun that wait, drawn as a wait
    # for rank 1. A barrier before it would have them begin together.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        run_json(2, "zb_zero", [*MODEL, "--stages=dp", "--compute=sleep:100", "--iters=2", "--warmup=1",
                                "--fault-late=1:300", f"--trace={path}"], mca=MCA)
        with open(path) as f:  # one stage: the path as given
            trace = json.load(f)
    first_wait = spans(trace, 0, 2)[0]
    assert first_wait["args"].get("part") == "skew" and first_wait["args"].get("late_rank") == 1, first_wait
    assert spans(trace, 1, 0)[0]["ts"] > first_wait["ts"], (spans(trace, 1, 0)[0], first_wait)


def test_the_step_drawn_is_the_median_of_its_candidates(traces):
    # Three steps run back to back for the trace; the one drawn is the one whose slowest rank's
    # exposed time is their median (one step is one sample). The trace lists the three in the
    # order they ran; the ranks' exposed times are the drawn one's.
    _, by_stage, _ = traces
    for stage, trace in by_stage.items():
        drawn, tried = drawn_and_candidates(trace)
        assert len(tried) == 3, (stage, tried)
        assert drawn == pytest.approx(sorted(tried)[1], abs=0.002), (stage, drawn, tried)


def test_serialised_steps_never_overlap(traces):
    overlap, by_stage, _ = traces
    if overlap == "on":
        pytest.skip("the serialised schedule only")
    for stage, trace in by_stage.items():
        for rank in (0, 1):
            compute, comm = spans(trace, rank, 0), spans(trace, rank, 1)
            assert compute and comm
            for c in comm:
                hit = [k["name"] for k in compute if c["ts"] < end(k) and k["ts"] < end(c)]
                assert not hit, (stage, rank, c["name"], hit)


def test_waits_add_up_to_the_exposed_time(traces):
    # Exposed communication is measured where it happens: each wait of compute for a
    # collective is a span on track 2, and the step reports their sum.
    _, by_stage, _ = traces
    for stage, trace in by_stage.items():
        for rank in (0, 1):
            waits = spans(trace, rank, 2)
            proc = next(e for e in trace["traceEvents"]
                        if e["ph"] == "M" and e["name"] == "process_name" and e["pid"] == rank)
            exposed = proc["args"]["exposed_us"]
            # Both are printed to 0.001 us: the sum of rounded values is within that of each.
            assert math.isclose(sum(w["dur"] for w in waits), exposed, abs_tol=1e-3 * (len(waits) + 1))
            assert waits, (stage, rank)  # the optimizer waits for the last reduction at least


def test_overlap_counters_are_reported(traces):
    _, _, data = traces
    for name, b in benchmarks(data).items():
        for key in ("step_s", "comm_s", "compute_s", "exposed_comm_s", "exposed_comm_diff_s"):
            assert key in b and math.isfinite(b[key]), (name, key)
        assert b["exposed_comm_s"] >= 0, name
        assert 0 <= b["overlap_eff"] <= 1, name
        # By cause: the late finish is a part of the wire part, which is a part of the waits.
        for key in ("skew_wait_s", "wire_wait_s", "late_finish_wait_s"):
            assert key in b and math.isfinite(b[key]) and b[key] >= 0, (name, key)
        assert b["late_finish_wait_s"] <= b["wire_wait_s"], name
