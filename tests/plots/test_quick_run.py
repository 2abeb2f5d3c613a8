"""./run_all.sh --quick end to end, on the build ZB_BIN names: the plan, a line per run, the
estimate beside the actual time, figures whose CSVs equal the JSON, summary, manifest. (Bad
options and the runner's own logic are tested without benchmarks in tests/tools/.)"""

import csv
import json
import math
import os
import subprocess
import sys

import pytest

from results_fixture import PLOTS, ROOT, run_tool

NEEDED = ("zb_collectives", "zb_zero", "zb_plan")
BIN = os.environ.get("ZB_BIN") or os.path.join(ROOT, "build", "bin")
STAGES = ("dp", "z1", "z2", "z3", "hsdp", "hpz")

sys.path.insert(0, PLOTS)
import counter_names  # noqa: E402
import gbjson  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    missing = [b for b in NEEDED if not os.access(os.path.join(BIN, b), os.X_OK)]
    if missing:
        pytest.skip(f"{BIN} lacks {', '.join(missing)}: build first (tools/build.sh build)")
    out = tmp_path_factory.mktemp("quick") / "run"
    # Two repetitions, not the quick run's three: a spread is all the summary needs, and the
    # quick run itself runs with three in CI against the baseline.
    r = subprocess.run([os.path.join(ROOT, "run_all.sh"), "--quick", "--repetitions=2", f"--bin={BIN}",
                        f"--out={out}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out, r


def has_optimizer(out):
    return os.path.isfile(os.path.join(BIN, "zb_optimizer"))


def figures(out):
    """{figure stem: the results file it is drawn from}."""
    f = {"collectives_busbw": "collectives.json", "zero_bytes_per_param": "zero.json",
         "zero_volume": "zero_wire.json", "zero_step_time": "zero.json",
         "zero_sweep_exposed": "zero_sweep.json", "plan_memory": "plan.json"}
    f.update({f"timeline_{s}": f"trace_{s}.json" for s in STAGES})
    if has_optimizer(out):
        f["optimizer_bandwidth"] = "optimizer.json"
    return f


def load(out, name):
    with open(out / name, encoding="utf-8") as f:
        return json.load(f)


def read_csv(out, stem):
    with open(out / "figures" / f"{stem}.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def same(cell, value):
    if cell == "":
        return isinstance(value, float) and math.isnan(value)
    return float(cell) == float(value)


def test_progress_one_line_per_benchmark(run):
    out, r = run
    done = [line for line in r.stderr.splitlines() if "done in" in line]
    for label in ("collectives", "zero_wire", "zero", "zero_sweep", "plan", "figures"):
        assert any(f"] {label}: done in " in line for line in done), (label, r.stderr)


def test_the_plan_comes_first_and_the_estimate_meets_the_actual_time(run):
    out, r = run
    err = r.stderr.splitlines()
    plan = next(i for i, line in enumerate(err) if "] plan: " in line)
    assert plan < next(i for i, line in enumerate(err) if ": done in " in line)
    assert any("] progress: collectives 0/18," in line for line in err)
    end = next(i for i, line in enumerate(err) if "time per family: estimate and actual" in line)
    assert [line.split("] ")[1].split()[0] for line in err[end + 2:end + 11]] == \
        ["collectives", "zero", "predict", "sweep", "optimizer", "pipeline", "offload", "plan", "total"]


def test_the_cost_model_counted_the_benchmarks_each_binary_ran(run):
    out, _ = run
    m = load(out, "manifest.json")
    for x in m["runs"]:
        if x["status"] == "ok":
            assert x["benchmarks_done"] == x["benchmarks_planned"], x["name"]
    for fam, f in m["families"].items():
        assert f["estimate_s"] > 0 and f["actual_s"] >= 0 and f["done"] == f["benchmarks"], fam
    assert m["benchmark_seconds"] > 0


def test_every_json_written(run):
    out, _ = run
    names = ["collectives.json", "zero_wire.json", "zero.json", "zero_sweep.json", "plan.json",
             "manifest.json"] + [f"trace_{s}.json" for s in STAGES]
    if has_optimizer(out):
        names.append("optimizer.json")
    for name in names:
        assert (out / name).is_file(), name
        load(out, name)
    assert (out / "logs" / "zero.log").is_file()


def test_every_figure_written(run):
    out, _ = run
    for stem in figures(out):
        for ext in ("png", "pdf", "csv"):
            path = out / "figures" / f"{stem}.{ext}"
            assert path.is_file() and path.stat().st_size > 0, path
        assert read_csv(out, stem), stem


def test_benchmark_csvs_equal_json(run):
    out, _ = run
    for stem, source in figures(out).items():
        if source == "plan.json" or source.startswith("trace_"):
            continue
        picks = gbjson.representative(gbjson.load_gb(str(out / source))[1])
        rows = read_csv(out, stem)
        checked = 0
        for r in rows:
            pick = picks[r["benchmark"]]
            # The step's parts are one repetition's, the median step's (the lower middle).
            parts = ("step_s", "compute_s", "exposed_comm_s")
            one = dict(zip(parts, pick.at_median(*parts))) if stem == "zero_step_time" else {}
            for col, cell in r.items():
                if col in ("benchmark", "series", "bar"):
                    continue
                if pick.has(col):
                    assert same(cell, one.get(col, pick.value(col))), (stem, r["benchmark"], col, cell)
                    checked += 1
        assert checked >= len(rows), stem


def test_zero_figures_hold_every_stage(run):
    out, _ = run
    for stem in ("zero_bytes_per_param", "zero_volume", "zero_step_time"):
        assert [r["bar"] for r in read_csv(out, stem)] == list(STAGES), stem
    volume = {r["bar"]: r for r in read_csv(out, "zero_volume")}
    # The socket run measures every stage's volume.
    assert all(volume[s]["volume_psi_measured"] != "" for s in STAGES)


def test_every_counter_name_obeys_the_suffix_rule(run):
    out, _ = run
    broken = {(f.name, r.name): counter_names.violations(r.counters)
              for f in sorted(out.glob("*.json")) if gbjson.is_gb(gbjson.load_json(str(f)))
              for r in gbjson.load_gb(str(f))[1] if counter_names.violations(r.counters)}
    assert not broken, broken


def test_plan_csv_equals_json(run):
    out, _ = run
    src = {(p["stage"], p["dp"]): p for p in load(out, "plan.json")["rows"]}
    rows = read_csv(out, "plan_memory")
    assert len(rows) == len(src) == len(STAGES) * 11
    for r in rows:
        assert float(r["gb_per_gpu"]) == src[(r["stage"], int(float(r["dp"])))]["gb_per_gpu"]


def test_timeline_csvs_equal_traces(run):
    out, _ = run
    for s in STAGES:
        spans = {(e["pid"], e["tid"], float(e["ts"])): e
                 for e in load(out, f"trace_{s}.json")["traceEvents"] if e.get("ph") == "X"}
        rows = read_csv(out, f"timeline_{s}")
        assert len(rows) == len(spans) > 0, s
        for r in rows:
            e = spans[(int(r["pid"]), int(r["tid"]), float(r["ts_us"]))]
            assert float(r["dur_us"]) == float(e["dur"])


def test_summary_holds_the_table(run):
    out, r = run
    text = (out / "summary.md").read_text(encoding="utf-8")
    assert text in r.stdout  # printed at the end
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| stage | bytes/param"))
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[1:-1]]
            for line in lines[head + 2:head + 2 + len(STAGES)]}
    assert list(rows) == list(STAGES)
    cols = [c.strip() for c in lines[head].split("|")[1:-1]]
    zero = {p.params["stage"]: p for p in
            gbjson.representative(gbjson.load_gb(str(out / "zero.json"))[1]).values()}
    wire = {p.params["stage"]: p for p in
            gbjson.representative(gbjson.load_gb(str(out / "zero_wire.json"))[1]).values()}
    for s in STAGES:
        row = dict(zip(cols, rows[s]))
        assert row["bytes/param formula"] == f"{zero[s].value('bytes_per_param_formula'):.3f}"
        assert row["measured"] == f"{zero[s].value('bytes_per_param_measured'):.3f}"
        assert row["volume accounted (Ψ)"] == f"{wire[s].value('volume_psi_accounted'):.4f}"
        assert row["measured (Ψ)"] == f"{wire[s].value('volume_psi_measured'):.4f}"
        # One node: nothing crosses, and no launcher named a node counter.
        assert row["inter-node MB/step accounted"] == "0.000" and row["inter-node measured"] == "n/a"
        # Timings: the median, then [lowest, highest] over the repetitions.
        lo, hi = zero[s].spread("step_s")
        assert row["step (ms)"] == f"{zero[s].value('step_s') * 1e3:.2f} [{lo * 1e3:.2f}, {hi * 1e3:.2f}]"
        assert row["exposed comm (ms)"].split(" [")[0] == f"{zero[s].value('exposed_comm_s') * 1e3:.2f}"
        assert row["overlap"].split(" [")[0] == f"{zero[s].value('overlap_eff'):.2f}"
    assert f"median of {zero['dp'].repetitions} repetitions" in text and zero["dp"].repetitions > 1
    assert "peak busbw" in text
    for op in ("all_reduce", "reduce_scatter", "all_gather"):
        assert f"| {op} |" in text


def test_manifest_fields(run):
    out, _ = run
    m = load(out, "manifest.json")
    if os.path.isdir(os.path.join(ROOT, ".git")):
        assert len(m["revision"]) == 40
    assert isinstance(m["dirty"], bool)
    assert m["size"] == "quick" and m["quick"] is True and m["backend"] == "mpi" and m["ranks"] == 2
    assert m["versions"]["mpi"].startswith("mpirun")
    hw = m["hardware"]
    assert hw["cpu_model"] and hw["cores"] >= 1 and hw["host_memory_bytes"] > 0
    assert isinstance(hw["gpus"], list)
    runs = {r["name"]: r for r in m["runs"]}
    for name in ("collectives", "zero_wire", "zero", "zero_sweep", "plan"):
        assert runs[name]["status"] == "ok", runs[name]
        assert "--json=" in runs[name]["command"]
    assert "mpirun" in runs["zero"]["command"] and "--bind-to none" in runs["zero"]["command"]
    # The socket run's algorithm settings: on the command line and as the benchmark saw them.
    assert "coll_tuned_allreduce_algorithm 4" in runs["zero_wire"]["settings"]
    seen = m["algorithm_settings"]["recorded_by_benchmarks"]
    assert "OMPI_MCA_btl=tcp,self" in seen["zero_wire.json"]


def test_compare_with_itself_passes(run, tmp_path):
    out, _ = run
    # As run_all.sh compares: bytes_per_param_measured is page-granular and moves by a page or two
    # between repetitions of one run, which an exact comparison of every repetition rejects.
    r = run_tool("compare.py", out, out, "--gate", "exact", "--tolerance=bytes_per_param_measured=0.005",
                 "--markdown", tmp_path / "c.md")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    assert "PASS" in r.stdout and "MISMATCH" not in r.stdout
    assert (tmp_path / "c.md").read_text().startswith("## Benchmark comparison")
