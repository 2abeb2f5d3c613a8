"""The offload figures and summary section on crafted zb_offload results: each CSV holds exactly
the counters of the JSON, summary.md shows them cell by cell, and missing data is skipped."""

import csv

import pytest

from results_fixture import aggregate, doc, row, run_tool, write

COMPUTE_US = (100, 300, 1000, 3000)
# hidden_frac per slot count over COMPUTE_US: two slots first reach 0.9 at 1000 µs.
HIDDEN = {1: (0.1, 0.2, 0.4, 0.5), 2: (0.3, 0.7, 0.95, 0.99), 3: (0.4, 0.9, 0.97, 0.99)}
HIDE_S = 0.0005
LABEL = "copy: host-to-host"
REPEATED = "offload_grads/params:4000000/layers:8/microbatches:2/chunks:8/slots:2/optimizer_on:host/grad:bf16/compute:sleep:300"


def grads_name(slots, us, optimizer_on="host"):
    return (f"offload_grads/params:4000000/layers:8/microbatches:2/chunks:8/slots:{slots}"
            f"/optimizer_on:{optimizer_on}/grad:bf16/compute:sleep:{us}")


def counters(slots, hidden, us, **extra):
    copy = 0.004
    c = dict(slots=slots, compute_per_chunk_s=us / 1e6, hide_condition_s=HIDE_S, copy_s=copy,
             exposed_copy_s=copy * (1 - hidden), hidden_frac=hidden, step_s=0.01 + us / 1e5,
             device_bytes_per_param_measured=2.5 + slots * 0.25 + 0.004, device_bytes_per_param_formula=2.5 + slots * 0.25,
             host_bytes_per_param_measured=14.0, d2h_GBps=11.5, h2d_GBps=12.25, copy_limit_GBps=13.0,
             copy_limit_d2h_GBps=12.5, copy_limit_h2d_GBps=13.0, copy_limit_both_GBps=20.0,
             host_accumulate_GBps=8.0, wrong=0)
    c.update(extra)
    return c


def labelled(r):
    r["label"] = LABEL
    return r


def sweep(hidden=HIDDEN):
    rows = []
    for slots, fracs in hidden.items():
        for us, h in zip(COMPUTE_US, fracs):
            name = grads_name(slots, us)
            if name == REPEATED:
                # Three repetitions and GB's aggregates: the median row is drawn, the spread shaded.
                for rep, e in enumerate((0.0013, 0.0011, 0.0016)):
                    rows.append(labelled(row(name, 20.0, "ms", rep=rep, reps=3,
                                             **counters(slots, h, us, exposed_copy_s=e))))
                rows.append(labelled(aggregate(name, "mean", 20.0, "ms", **counters(slots, h, us))))
                rows.append(labelled(aggregate(name, "median", 20.0, "ms",
                                               **counters(slots, h, us, exposed_copy_s=0.0012))))
            else:
                rows.append(labelled(row(name, 20.0, "ms", **counters(slots, h, us))))
    return doc(rows)


def memory():
    rows = []
    for slots in (1, 2, 3):
        rows.append(labelled(row(grads_name(slots, 1000), 20.0, "ms", **counters(slots, 0.9, 1000))))
        w = f"offload_weights/params:4000000/layers:8/slots:{slots}/compute:sleep:1000"
        rows.append(labelled(row(w, 15.0, "ms", **counters(slots, 0.8, 1000, device_bytes_per_param_measured=1.0 * slots,
                                                              device_bytes_per_param_formula=0.999 * slots,
                                                              host_bytes_per_param_measured=16.0))))
    return doc(rows)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("offload")
    docs = {"offload_sweep.json": sweep(), "offload.json": memory()}
    for name, d in docs.items():
        write(out / name, d)
    for tool in ("zbplot.py", "summary.py"):
        r = run_tool(tool, out)
        assert r.returncode == 0, r.stdout + r.stderr
    return out, docs


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def drawn_row(d, name):
    """The JSON row a figure draws: the median aggregate where there is one, else the run."""
    rows = [b for b in d["benchmarks"] if b["run_name"] == name]
    return next((b for b in rows if b.get("aggregate_name") == "median"), rows[0])


@pytest.mark.parametrize("stem", ["offload_exposed", "offload_memory"])
def test_figures_written_one_column_wide(folder, stem):
    out, _ = folder
    import matplotlib.image
    for ext in ("png", "pdf", "csv"):
        assert (out / "figures" / f"{stem}.{ext}").stat().st_size > 0
    assert matplotlib.image.imread(out / "figures" / f"{stem}.png").shape[1] == pytest.approx(1050, abs=2)


def test_exposed_csv_equals_the_sweep(folder):
    out, docs = folder
    rows = read_csv(out / "figures" / "offload_exposed.csv")
    assert len(rows) == 12
    # One series per slot count: the swept compute (compute:sleep:US) does not split them.
    assert {r["series"] for r in rows} == {"1 slot", "2 slots", "3 slots"}
    for r in rows:
        b = drawn_row(docs["offload_sweep.json"], r["benchmark"])
        for key in ("slots", "compute_per_chunk_s", "exposed_copy_s", "hide_condition_s", "hidden_frac"):
            assert float(r[key]) == b[key], key
        if r["benchmark"] == REPEATED:
            assert (float(r["exposed_copy_s_min"]), float(r["exposed_copy_s_max"])) == (0.0011, 0.0016)
            assert float(r["exposed_copy_s"]) == 0.0012 and r["repetitions"] == "3"
        else:
            assert float(r["exposed_copy_s_min"]) == float(r["exposed_copy_s_max"]) == b["exposed_copy_s"]


def test_memory_csv_equals_the_counters(folder):
    out, docs = folder
    rows = read_csv(out / "figures" / "offload_memory.csv")
    assert sorted((r["family"], int(float(r["slots"]))) for r in rows) == sorted(
        (f, s) for f in ("offload_grads", "offload_weights") for s in (1, 2, 3))
    for r in rows:
        b = drawn_row(docs["offload.json"], r["benchmark"])
        for key in ("device_bytes_per_param_measured", "device_bytes_per_param_formula",
                    "host_bytes_per_param_measured"):
            assert float(r[key]) == b[key], key
        assert r["series"] == r["family"].replace("offload_", "")


def cells(text, name):
    lines = [l for l in text.splitlines() if l.startswith(f"| {name} |")]
    assert len(lines) == 1, name
    return [c.strip() for c in lines[0].strip("|").split("|")]


def test_summary_table_cell_by_cell(folder):
    out, _ = folder
    text = (out / "summary.md").read_text()
    assert "## Offload" in text and "### gradients out" in text and "### weights in" in text
    c = cells(text, grads_name(3, 1000))
    assert c[1:] == ["3", "3.250", "3.254", "14.000", "4.00", f"{0.004 * 0.1 * 1e3:.2f}", "0.90", "11.50",
                     "12.25", "13.00", "0"]
    c = cells(text, "offload_weights/params:4000000/layers:8/slots:2/compute:sleep:1000")
    assert c[1:5] == ["2", "1.998", "2.000", "16.000"]
    assert "host-to-host" in text
    assert "`offload_exposed`" in text and "`offload_memory`" in text


def test_summary_names_where_two_slots_hide_the_copies(folder):
    out, _ = folder
    text = (out / "summary.md").read_text()
    assert ("- Two slots hide at least 90% of the copies from 1.00 ms of compute per chunk on, in every "
            "repetition: hidden 0.95 there, against a hide condition of 0.50 ms (offload_sweep.json).") in text


@pytest.mark.parametrize("fracs,line", [
    # 1 ms hid 95% but a larger compute, 3 ms, only 50%: "from 1 ms on" would be false.
    ((0.3, 0.7, 0.95, 0.5), "at no swept compute per chunk: at the largest, 3.00 ms, hidden 0.50"),
    ((0.3, 0.95, 0.5, 0.96), "from 3.00 ms of compute per chunk on, in every repetition: hidden 0.96"),
])
def test_two_slots_hide_from_a_compute_on_only_where_every_larger_one_does(tmp_path, fracs, line):
    write(tmp_path / "offload_sweep.json", sweep({2: fracs, 3: (0.4, 0.9, 0.97, 0.99)}))
    assert run_tool("summary.py", tmp_path).returncode == 0
    assert line in (tmp_path / "summary.md").read_text(), (tmp_path / "summary.md").read_text()


def test_two_slots_hide_only_where_every_repetition_did(tmp_path):
    """The repeated 300 µs point of 2 slots hid 95, 93 and 40% over its repetitions: its median
    (93%) is past 90%, but one repetition was not, so the line names the next compute."""
    d = sweep({2: (0.3, 0.93, 0.95, 0.99), 3: (0.4, 0.9, 0.97, 0.99)})
    for b in d["benchmarks"]:
        if b["run_name"] == REPEATED and b["run_type"] == "iteration":
            b["hidden_frac"] = (0.95, 0.93, 0.40)[b["repetition_index"]]
    write(tmp_path / "offload_sweep.json", d)
    assert run_tool("summary.py", tmp_path).returncode == 0
    assert "from 1.00 ms of compute per chunk on, in every repetition" in (tmp_path / "summary.md").read_text()


def test_when_two_slots_never_hide_the_summary_says_so(tmp_path):
    write(tmp_path / "offload_sweep.json", sweep({2: (0.1, 0.5, 0.8, 0.89), 3: (0.2, 0.9, 0.95, 0.99)}))
    assert run_tool("summary.py", tmp_path).returncode == 0
    text = (tmp_path / "summary.md").read_text()
    assert ("- Two slots hide 90% of the copies at no swept compute per chunk: at the largest, 3.00 ms, "
            "hidden 0.89 (offload_sweep.json).") in text
    assert "### gradients out" not in text  # no offload.json: no table


def test_absent_or_empty_inputs_are_skipped(tmp_path):
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0 and "skipping fig_offload.exposed: no offload_sweep.json" in r.stderr
    assert "skipping fig_offload.memory: no offload.json" in r.stderr
    assert run_tool("summary.py", tmp_path).returncode == 0
    assert "Offload" not in (tmp_path / "summary.md").read_text()
    # Files with no offload benchmark, or without the counters a figure needs: NoData, no figure.
    write(tmp_path / "offload.json", doc([row("zero/stage:z2/params:1000", 1.0, "ms", step_s=0.001)]))
    write(tmp_path / "offload_sweep.json", doc([row(grads_name(2, 100), 1.0, "ms", slots=2)]))
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "skipping fig_offload.exposed: offload_sweep.json: no offload_grads" in r.stderr
    assert "skipping fig_offload.memory: offload.json: no offload_grads or offload_weights" in r.stderr
    assert not (tmp_path / "figures" / "offload_exposed.png").exists()
    assert not (tmp_path / "figures" / "offload_memory.png").exists()


def test_each_line_marks_its_own_hide_condition(tmp_path):
    """The hide condition depends on the slots: one dotted mark per line, at the lower middle of
    its own benchmarks' conditions (here 0.5 ms a slot, one benchmark of each line off at 9 ms),
    not one median over every line."""
    d = sweep()
    for b in d["benchmarks"]:
        b["hide_condition_s"] = b["slots"] * 5e-4
        if b["run_name"].endswith(f"compute:sleep:{COMPUTE_US[0]}"):
            b["hide_condition_s"] = 9e-3
    write(tmp_path / "offload_sweep.json", d)
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    marks = {(row_["series"], row_["hide_condition_drawn_s"]) for row_ in read_csv(tmp_path / "figures" / "offload_exposed.csv")}
    assert marks == {("1 slot", "0.0005"), ("2 slots", "0.001"), ("3 slots", "0.0015")}, marks


def test_copy_exposed_and_hidden_cells_are_one_repetitions(tmp_path):
    """hidden_frac is 1 - exposed/copy within a repetition: (copy, exposed) of (1.03, 0.63),
    (0.79, 0.80) and (0.63, 0.64) ms hid 0.38, -0.01 and -0.01. The cells are the median hidden
    share's repetition, 0.79 and 0.80 ms, where the three medians (0.79, 0.64, -0.01) read as
    19% hidden and none at once."""
    name = grads_name(1, 10000)
    rows = [labelled(row(name, 20.0, "ms", rep=k, reps=3, **counters(1, h, 10000, copy_s=c / 1e3,
                                                                   exposed_copy_s=e / 1e3)))
            for k, (c, e, h) in enumerate(((1.03, 0.63, 0.38), (0.79, 0.80, -0.01), (0.63, 0.64, -0.01)))]
    write(tmp_path / "offload.json", doc(rows))
    assert run_tool("summary.py", tmp_path).returncode == 0
    c = cells((tmp_path / "summary.md").read_text(), name)
    assert c[5:8] == ["0.79 [0.63, 1.03]", "0.80 [0.63, 0.80]", "-0.01 [-0.01, 0.38]"], c
