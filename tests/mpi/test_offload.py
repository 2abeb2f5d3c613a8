"""zb_offload at 2, 3 and 4 ranks: gradients offloaded through 1, 2 and 3 slots end on the
single-process reference's weights bit for bit, and every loaded layer equals its host copy;
device memory measured is slots x chunk bytes; the trace shows a slot refilled only after its
copy-out (order of events only, never a duration); bad flags exit 2 with one line."""
import json
import os
import tempfile

import pytest

from zbrun import bad_flag_failures, benchmarks, is_nan, run_json

QUICK = ["--iters=1", "--warmup=0"]


def rows(data):
    """{(family, slots, compute): benchmark}."""
    out = {}
    for name, b in benchmarks(data).items():
        family, rest = name.split("/", 1)
        parts = dict(p.split(":", 1) for p in rest.split("/"))
        out[(family, int(parts["slots"]), parts["compute"])] = b
    return out


# M never a multiple of N; chunks of unequal sizes; both optimizer places, both dtypes.
CHECKED = [
    (2, ["--params=100003", "--layers=7", "--chunks=3", "--microbatches=3", "--optimizer=momentum",
         "--grad-dtype=fp32", "--optimizer-on=device"]),
    (3, ["--model=gpt:layers=4,hidden=63,vocab=997", "--chunks=2", "--microbatches=4"]),
    (4, ["--params=200009", "--layers=12", "--chunks=5", "--microbatches=3", "--optimizer-on=host"]),
]


@pytest.mark.parametrize("np,flags", CHECKED, ids=lambda v: str(v) if isinstance(v, int) else None)
def test_every_slot_count_matches_the_reference(np, flags):
    data, proc = run_json(np, "zb_offload", [*flags, "--iters=2", "--warmup=1"])
    got = rows(data)
    assert set(got) == {(f, s, "none") for f in ("offload_grads", "offload_weights") for s in (1, 2, 3)}, proc.stdout
    for key, b in got.items():
        assert b["wrong"] == 0, (key, proc.stdout)
        assert b["ranks"] == np and b["slots"] == key[1]
        assert b["label"] == "copy: host-to-host"
    assert "# zb_offload" in proc.stdout and "hidden" in proc.stdout


@pytest.mark.parametrize("params,layers,m", [(4e6, 8, 2), (8e6, 16, 5)])
def test_device_memory_is_slots_times_chunk_bytes(params, layers, m):
    data, proc = run_json(2, "zb_offload", [f"--params={params:.0f}", f"--layers={layers}", "--chunks=4",
                                            f"--microbatches={m}", "--no-check", *QUICK])
    got = rows(data)
    for (family, slots, _), b in got.items():
        formula = slots * b["chunk_bytes"] / b["params"]
        assert b["device_bytes_per_param_formula"] == pytest.approx(formula, rel=1e-12)
        assert b["device_bytes_per_param_measured"] == pytest.approx(formula, rel=0.01), (family, slots, proc.stdout)
    for slots in (1, 2, 3):
        g = got[("offload_grads", slots, "none")]
        # A chunk is a quarter of the model; BF16 gradients: 2 bytes each.
        assert g["chunk_bytes"] == pytest.approx(2 * params / 4, rel=1e-6)
        # Host: the gradient shard, FP32 master and Adam's moments, the updated BF16 block, all
        # 1/N; and one staged block per slot for the adds.
        host = (2 + 12 + 2) / 2 + slots * g["chunk_bytes"] / 2 / g["params"]
        assert g["host_bytes_per_param_measured"] == pytest.approx(host, rel=0.01), (slots, proc.stdout)
        w = got[("offload_weights", slots, "none")]
        assert w["host_bytes_per_param_measured"] == pytest.approx(2, rel=0.01)


def spans(trace, rank, tid, prefix):
    return [e for e in trace["traceEvents"]
            if e["ph"] == "X" and e["pid"] == rank and e["tid"] == tid and e["name"].startswith(prefix)]


def end(e):
    return e["ts"] + e["dur"]


@pytest.fixture(scope="module")
def traces():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        run_json(2, "zb_offload", ["--params=2e6", "--layers=8", "--chunks=4", "--microbatches=3", "--slots=1,2",
                                   "--no-check", *QUICK, f"--trace={path}"])
        out = {}
        for family in ("grads", "weights"):
            for slots in (1, 2):
                with open(os.path.join(tmp, f"trace_{family}_s{slots}.json")) as f:
                    out[(family, slots)] = json.load(f)
    return out


@pytest.mark.parametrize("slots", [1, 2])
def test_a_slot_is_refilled_only_after_its_copy_out(traces, slots):
    trace = traces[("grads", slots)]
    assert trace["zerobench"]["slots"] == slots
    for rank in (0, 1):
        backward = {e["args"]["fill"]: e for e in spans(trace, rank, 0, "backward")}
        copied = {e["args"]["fill"]: e for e in spans(trace, rank, 3, "d2h")}
        waits = sorted(spans(trace, rank, 2, "wait slot"), key=lambda e: e["ts"])
        assert sorted(backward) == sorted(copied) == list(range(12))
        for i in range(12):
            assert backward[i]["args"]["slot"] == copied[i]["args"]["slot"] == i % slots
            # A chunk's copy-out starts after its backward wrote the slot...
            assert copied[i]["ts"] >= end(backward[i]), (rank, i)
            # ...and the slot's next fill starts only after that copy ended.
            if i >= slots:
                assert backward[i]["ts"] >= end(copied[i - slots]), (rank, i)
            # What the fill waited for, just before it: its own slot, the one fill i - S
            # used. With one slot that is the previous chunk's copy, so backward and copies
            # take turns; with two it never is, so the next chunk need not wait for it.
            before = [w for w in waits if end(w) <= backward[i]["ts"] + 0.002]  # printed to 0.001 us
            assert before and before[-1]["args"]["slot"] == i % slots, (rank, i)
            if slots == 1 and i >= 1:
                assert backward[i]["ts"] >= end(copied[i - 1]), (rank, i)


@pytest.mark.parametrize("slots", [1, 2])
def test_a_layer_loads_into_a_slot_only_after_its_last_layer_computed(traces, slots):
    trace = traces[("weights", slots)]
    for rank in (0, 1):
        forward = {e["args"]["layer"]: e for e in spans(trace, rank, 0, "forward")}
        loaded = {e["args"]["layer"]: e for e in spans(trace, rank, 3, "h2d")}
        assert sorted(forward) == sorted(loaded) == list(range(8))
        for layer in range(8):
            assert forward[layer]["ts"] >= end(loaded[layer]), (rank, layer)
            if layer >= slots:
                assert loaded[layer]["ts"] >= end(forward[layer - slots]), (rank, layer)


def test_a_corrupted_element_fails_both_checks():
    # Two steps: Adam's first step moves every weight by lr whatever the gradient's size.
    data, proc = run_json(2, "zb_offload", ["--params=10000", "--layers=4", "--chunks=2", "--slots=2", "--iters=2",
                                            "--warmup=0", "--fault-corrupt=1"], expect_rc=1)
    for key, b in rows(data).items():
        assert b["wrong"] >= 1, key
    assert "zb_offload: check failed: offload_grads slots=2" in proc.stderr  # the first failure is named


def test_a_sweep_runs_one_benchmark_per_slot_count_and_value_and_names_where_copies_hide():
    data, proc = run_json(2, "zb_offload", ["--params=200000", "--layers=4", "--chunks=2", "--microbatches=2",
                                            "--offload=grads", "--compute-sweep=0,300", *QUICK])
    got = rows(data)
    assert set(got) == {("offload_grads", s, f"sleep:{us}") for s in (1, 2, 3) for us in (0, 300)}
    for b in got.values():
        assert is_nan(b["wrong"])  # a sweep point is not checked
    for s in (1, 2, 3):
        assert f"# offload_grads, {s} slot(s): condition" in proc.stdout


BAD = [["--slots=0"], ["--slots=1,x"], (["--slots=2,2"], "given twice"), ["--chunks=9", "--layers=8"],
       ["--compute=gemm:4"], ["--compute-sweep=1,a"], ["--optimizer-on=gpu"], ["--offload=grads,bytes"],
       ["--microbatches=0"], ["--trace=/no/such/dir/t.json"], (["--stages=z1"], "unknown flag --stages"),
       (["--bucket-mb=1"], "unknown flag --bucket-mb")]


def test_bad_flags_exit_2_with_one_line_before_mpi():
    assert not bad_flag_failures("zb_offload", BAD)
