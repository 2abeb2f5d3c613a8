"""plots/zbplot.py on a crafted results folder: every figure written, CSVs equal the JSON."""

import csv
import json
import math
import os

import pytest

from results_fixture import NAN, doc, plan, results_folder, row, run_tool, trace, write, zero

FIGURES = {
    "collectives_busbw": "collectives.json",
    "zero_bytes_per_param": "zero.json",
    "zero_volume": "zero.json",
    "zero_step_time": "zero.json",
    "zero_sweep_exposed": "zero_sweep.json",
    "optimizer_bandwidth": "optimizer.json",
    "plan_memory": "plan.json",
    "timeline": "trace.json",
}


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    folder = tmp_path_factory.mktemp("results")
    docs = results_folder(folder)
    write(folder / "trace_waits.json", trace(waits=True))  # three kinds of span: the widest legend
    r = run_tool("zbplot.py", folder)
    assert r.returncode == 0, r.stdout + r.stderr
    return folder, docs, r


def test_every_figure_fits_its_frame(drawn):
    _, _, r = drawn
    assert "timeline_waits" in r.stdout
    assert "past its edge" not in r.stderr, r.stderr


def read_csv(folder, stem):
    with open(folder / "figures" / f"{stem}.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def expected_row(gb_doc, name, whole=None):
    """The JSON row a figure should draw: GB's median aggregate, else the one repetition; for a
    figure that draws the parts of one repetition (whole: the counter they add up to), the
    repetition whose `whole` is the median (the lower middle)."""
    rows = [b for b in gb_doc["benchmarks"] if b["run_name"] == name]
    if whole:
        reps = sorted((b for b in rows if b["run_type"] == "iteration"), key=lambda b: b[whole])
        if reps:
            return reps[(len(reps) - 1) // 2]
    medians = [b for b in rows if b.get("aggregate_name") == "median"]
    if medians:
        return medians[0]
    iterations = [b for b in rows if b["run_type"] == "iteration"]
    assert len(iterations) == 1, name
    return iterations[0]


def same(cell, value):
    if cell == "":
        return isinstance(value, float) and math.isnan(value)  # NaN is not drawn
    return float(cell) == float(value)


def test_every_figure_written(drawn):
    folder, _, _ = drawn
    import matplotlib.image
    for stem in FIGURES:
        for ext in ("png", "pdf", "csv"):
            path = folder / "figures" / f"{stem}.{ext}"
            assert path.is_file() and path.stat().st_size > 0, path
        assert (folder / "figures" / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
        assert read_csv(folder, stem), stem
        # One column wide: 3.5 in at 300 dpi.
        width = matplotlib.image.imread(folder / "figures" / f"{stem}.png").shape[1]
        assert width == pytest.approx(1050, abs=2), stem


@pytest.mark.parametrize("stem", [s for s, f in FIGURES.items() if f not in
                                  ("plan.json", "trace.json")])
def test_benchmark_csv_equals_json(drawn, stem):
    folder, docs, _ = drawn
    gb_doc = docs[FIGURES[stem]]
    rows = read_csv(folder, stem)
    checked = 0
    for r in rows:
        src = expected_row(gb_doc, r["benchmark"], "step_s" if stem == "zero_step_time" else None)
        for col, cell in r.items():
            if col in src and col not in ("name", "run_name"):
                assert same(cell, src[col]), (stem, r["benchmark"], col, cell, src[col])
                checked += 1
    assert checked >= 2 * len(rows)
    names = {b["run_name"] for b in gb_doc["benchmarks"]}
    assert {r["benchmark"] for r in rows} <= names


def test_zero_figures_details(drawn):
    folder, _, _ = drawn
    step = {r["bar"]: r for r in read_csv(folder, "zero_step_time")}
    assert list(step) == ["dp", "z1", "z2", "z3"]
    # z2's parts are its median step's repetition's (12 ms of 11, 13, 12), not each part's median
    # (the aggregate's compute, 10.5 ms, and step, 12.5 ms, came from no one repetition).
    assert float(step["z2"]["compute_s"]) == 0.010
    assert float(step["z2"]["step_s"]) == 0.012
    assert float(step["z2"]["rest_s"]) == 0  # compute and exposed (0.014 s) already exceed the step
    volume = {r["bar"]: r for r in read_csv(folder, "zero_volume")}
    assert volume["z3"]["volume_psi_measured"] == ""  # NaN in the JSON: no bar drawn


def test_the_step_bar_is_the_step(tmp_path):
    """The rest of the step is what compute alone and the exposed waits leave of it."""
    write(tmp_path / "zero.json", zero(dp={"exposed_comm_s": 0.0005}, z1={"compute_s": 0.008}))
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    step = {b["bar"]: b for b in read_csv(tmp_path, "zero_step_time")}
    assert float(step["dp"]["rest_s"]) == pytest.approx(0.012 - 0.01 - 0.0005, abs=1e-12)
    assert float(step["z1"]["rest_s"]) == pytest.approx(0.013 - 0.008 - 0.003, abs=1e-12)


def test_the_step_bar_is_one_repetitions_parts(tmp_path):
    """Three repetitions (step, compute, exposed) of (10, 6, 3.5), (10.5, 9.5, 0.5) and
    (11, 6.2, 0.3) ms: the bar is the median step's, 10.5 ms of 9.5 computing and 0.5 waiting,
    0.5 ms of rest; each part's own median (6.2 and 0.5 ms) would leave a rest of 3.8 ms that no
    repetition had."""
    document = zero()
    name = next(b["run_name"] for b in document["benchmarks"] if "stage:dp/" in b["run_name"])
    kept = [b for b in document["benchmarks"] if b["run_name"] != name]
    base = next(b for b in document["benchmarks"] if b["run_name"] == name)
    for k, (st, c, e) in enumerate(((10, 6, 3.5), (10.5, 9.5, 0.5), (11, 6.2, 0.3))):
        kept.append(dict(base, run_type="iteration", repetition_index=k, repetitions=3, real_time=st,
                         step_s=st / 1e3, compute_s=c / 1e3, exposed_comm_s=e / 1e3))
    write(tmp_path / "zero.json", dict(document, benchmarks=kept))
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    dp = {b["bar"]: b for b in read_csv(tmp_path, "zero_step_time")}["dp"]
    assert [float(dp[k]) for k in ("step_s", "compute_s", "exposed_comm_s")] == [0.0105, 0.0095, 0.0005]
    assert float(dp["rest_s"]) == pytest.approx(0.0005, abs=1e-12)


def test_the_sweeps_ratio_is_each_repetitions(tmp_path):
    """A point's compute/communication ratio is the median of each repetition's: (1, 2), (3, 2)
    and (2, 4) ms give 0.5, 1.5 and 0.5, median 0.5, where the two medians (2 and 2) give 1."""
    rows = [row("zero_sweep/stage:z1/compute_us:100", 1.0, rep=k, reps=3, ranks=4, compute_s=c / 1e3,
                comm_s=m / 1e3, exposed_comm_s=1e-4, step_s=(c + m) / 1e3)
            for k, (c, m) in enumerate(((1, 2), (3, 2), (2, 4)))]
    write(tmp_path / "zero_sweep.json", doc(rows))
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    point = read_csv(tmp_path, "zero_sweep_exposed")[0]
    assert float(point["compute_over_comm"]) == 0.5, point


def test_sweep_ratio_is_from_the_json_times(drawn):
    folder, _, _ = drawn
    rows = read_csv(folder, "zero_sweep_exposed")
    assert len(rows) == 6
    for r in rows:
        assert float(r["compute_over_comm"]) == float(r["compute_s"]) / float(r["comm_s"])


def test_plan_csv_equals_json(drawn):
    folder, docs, _ = drawn
    src = {(p["stage"], p["dp"]): p for p in docs["plan.json"]["rows"]}
    rows = read_csv(folder, "plan_memory")
    assert len(rows) == len(src)
    for r in rows:
        p = src[(r["stage"], int(float(r["dp"])))]
        assert float(r["gb_per_gpu"]) == p["gb_per_gpu"]
        assert all(float(r[k]) == p[k] for k in ("tp", "pp", "ep"))


def test_trace_csv_equals_json(drawn):
    folder, docs, _ = drawn
    spans = {(e["pid"], e["tid"], e["ts"]): e for e in docs["trace.json"]["traceEvents"]
             if e["ph"] == "X"}
    rows = read_csv(folder, "timeline")
    assert len(rows) == len(spans)
    for r in rows:
        e = spans[(int(r["pid"]), int(r["tid"]), float(r["ts_us"]))]
        assert float(r["dur_us"]) == e["dur"] and r["name"] == e["name"]
        assert r["track"] == ("compute" if e["tid"] == 0 else "comm")


def test_missing_inputs_are_skipped(tmp_path):
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0
    assert "skipping" in r.stderr
    assert not (tmp_path / "figures").exists() or not os.listdir(tmp_path / "figures")
    write(tmp_path / "zero.json", results_folder(tmp_path / "all")["zero.json"])
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0
    stems = {os.path.splitext(f)[0] for f in os.listdir(tmp_path / "figures")}
    assert stems == {"zero_bytes_per_param", "zero_volume", "zero_step_time"}


def test_extra_and_missing_fields(tmp_path):
    rows = [row("zero/stage:z1/params:8/extra:1", 1.0, "ms", bytes_per_param_measured=7.0,
                new_counter=3.0, some_text="x", nested={"a": 1}),
            row("zero/stage:z3/params:8/extra:1", 1.0, "ms", bytes_per_param_measured=NAN),
            row("all_reduce/bytes:1024", 1.0)]
    d = doc(rows)
    d["context"]["new_key"] = [1, 2]
    write(tmp_path / "zero.json", d)
    write(tmp_path / "collectives.json", doc([row("all_reduce/bytes:1024", 1.0)]))
    write(tmp_path / "trace.json", [{"ph": "X", "ts": 1, "dur": 2, "pid": "a", "tid": 7},
                                    {"ph": "B", "ts": 1}])
    write(tmp_path / "plan.json", {"rows": [{"stage": "z1"}]})
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0, r.stderr
    made = set(os.listdir(tmp_path / "figures"))
    assert made == {f"{s}.{e}" for s in ("zero_bytes_per_param", "timeline")
                    for e in ("png", "pdf", "csv")}
    assert "no benchmark with busbw_GBps" in r.stderr


def test_drawn_side_by_side_or_one_at_a_time_alike(tmp_path):
    # The same figures, byte for byte, the same lines in the same order, and a figure with
    # nothing to draw skipped alike: whether each is drawn in a process of its own or not.
    made = {}
    for jobs in (1, 3):
        folder = tmp_path / f"jobs{jobs}"
        folder.mkdir()
        write(folder / "zero.json", results_folder(tmp_path / "all")["zero.json"])
        write(folder / "collectives.json", doc([row("all_reduce/bytes:1024", 1.0)]))
        r = run_tool("zbplot.py", folder, f"--jobs={jobs}")
        assert r.returncode == 0, r.stderr
        assert "no benchmark with busbw_GBps" in r.stderr
        files = {f: (folder / "figures" / f).read_bytes() for f in sorted(os.listdir(folder / "figures"))}
        made[jobs] = (r.stdout, files)
    assert made[1][0] == made[3][0] and made[1][0].count("zbplot: wrote") == 3
    assert made[1][1] == made[3][1]


def test_a_drawing_process_that_dies_is_an_error_not_a_hang(tmp_path, monkeypatch):
    import signal
    import zbplot  # run_tool has put plots/ on the path
    write(tmp_path / "zero.json", results_folder(tmp_path / "all")["zero.json"])
    killed = [(names, convert, lambda data, out: os.kill(os.getpid(), signal.SIGKILL))
              if draw.__name__ == "step_time" else (names, convert, draw)
              for names, convert, draw in zbplot.FIGURES]
    monkeypatch.setattr(zbplot, "FIGURES", killed)
    r = run_tool("zbplot.py", tmp_path, "--jobs=2")
    assert r.returncode == 1
    errors = [line for line in r.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("zbplot: error: a process drawing figures died"), r.stderr


@pytest.mark.parametrize("jobs", ["0", "-1", "two"])
def test_a_bad_jobs_value_exits_2_with_one_line(tmp_path, jobs):
    r = run_tool("zbplot.py", tmp_path, f"--jobs={jobs}")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and ": error: argument --jobs: a whole number" in r.stderr, r.stderr


@pytest.mark.parametrize("name,content", [
    ("collectives.json", "{broken"),
    ("zero.json", json.dumps({"traceEvents": []})),
    ("plan.json", json.dumps({"model": {}})),
    ("trace.json", json.dumps({"events": []})),
    ("optimizer.json", json.dumps(doc([row("adam/params:1", 1.0, "minutes")]))),
])
def test_unreadable_input_exits_2(tmp_path, name, content):
    (tmp_path / name).write_text(content)
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and name in r.stderr, r.stderr


def test_not_a_folder_exits_2(tmp_path):
    r = run_tool("zbplot.py", tmp_path / "nope")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_dense_trace_and_several_trace_files(tmp_path):
    spans = [{"name": "s", "ph": "X", "ts": 10.0 * k, "dur": 6.0, "pid": k % 4, "tid": k % 2}
             for k in range(2500)]
    write(tmp_path / "trace_z3.json", {"traceEvents": spans})
    write(tmp_path / "trace.json", {"traceEvents": spans[:10]})
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(read_csv(tmp_path, "timeline_z3")) == 2500
    assert len(read_csv(tmp_path, "timeline")) == 10


def test_a_stage_left_out_of_a_figure_is_named(tmp_path):
    """z3's benchmark stopped with an error and z2's exposed time is not a number: the step
    figure draws dp and z1 and says on stderr which stages it left out and why."""
    document = zero(z2={"exposed_comm_s": NAN})
    for b in document["benchmarks"]:
        if "stage:z3/" in b["name"]:
            b.update(error_occurred=True, error_message="out of memory")
    write(tmp_path / "zero.json", document)
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [b["bar"] for b in read_csv(tmp_path, "zero_step_time")] == ["dp", "z1"]
    assert "zbplot: note: figure zero_step_time: left out: z2 (exposed_comm_s not a number), " \
        "z3 (its benchmark stopped with an error)" in r.stderr, r.stderr


def test_a_collective_size_that_failed_breaks_its_line_and_is_named(tmp_path):
    """all_gather's 1 MiB benchmark stopped with an error: its line is not drawn straight from
    256 KiB to 4 MiB as if measured between, and zbplot names the gap."""
    rows = []
    for op in ("all_reduce", "all_gather"):
        for size in (1 << 18, 1 << 20, 1 << 22):
            r = row(f"{op}/bytes:{size}/dtype:bf16", 10.0, "us", ranks=2, bytes=size, busbw_GBps=size / 1e5)
            if op == "all_gather" and size == 1 << 20:
                r.update(error_occurred=True, error_message="timed out")
            rows.append(r)
    write(tmp_path / "collectives.json", doc(rows))
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(read_csv(tmp_path, "collectives_busbw")) == 5
    assert "zbplot: note: figure collectives_busbw: no point, the line broken, for all_gather at 1 MiB" \
        in r.stderr, r.stderr


def test_a_zero_on_the_plans_log_axis_is_named(tmp_path):
    """Sharded stages span decades, so the plan's memory axis is logarithmic: a row of 0 GB has
    no place on it, and zbplot says which rather than drop it unseen (the CSV keeps it)."""
    document = plan()
    for r in document["rows"]:
        if r["stage"] == "z3" and r["dp"] == 512:
            r["gb_per_gpu"] = 0.0
    write(tmp_path / "plan.json", document)
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "zbplot: note: figure plan_memory: not drawn on its log axis (0 GB or less): z3 at N = 512" \
        in r.stderr, r.stderr
    assert len(read_csv(tmp_path, "plan_memory")) == 16
