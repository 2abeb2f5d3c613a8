"""The pipeline figure and summary table on crafted zb_pipeline results: the CSV holds exactly
the formula and measured values of the JSON, and summary.md shows them cell by cell."""

import csv

import pytest

from results_fixture import NAN, doc, row, run_tool, write

FORMULA_GRAD = {"dp": 2.0, "z1": 2.0, "z2": 1.5}


def pipeline(measured):
    rows = []
    for stage in ("dp", "z1", "z2"):
        for m in (2, 4, 8):
            vol = m + 1.0 if stage == "z2" else 2.0
            name = f"pipeline/stage:{stage}/params:2000000/microbatches:{m}/chunks:2/pp:2/pp_rank:0"
            rows.append(row(name, 5.0 + m, "ms", ranks=2, params=1e6, microbatches=m,
                            volume_psi_accounted=vol, volume_psi_formula=vol,
                            volume_psi_measured=(vol * 1.0002 if measured and stage != "z1" else NAN),
                            bytes_per_param_formula=16.0, bytes_per_param_measured=16.01,
                            grad_bytes_per_param_formula=FORMULA_GRAD[stage],
                            grad_bytes_per_param_measured=FORMULA_GRAD[stage] + 0.003,
                            step_s=0.005 + m / 1e3,
                            exposed_comm_s=0.001, tail_comm_s=0.0005, wrong=0))
    return doc(rows)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("pipeline")
    docs = {"pipeline.json": pipeline(False), "pipeline_wire.json": pipeline(True)}
    for name, d in docs.items():
        write(out / name, d)
    for tool in ("zbplot.py", "summary.py"):
        r = run_tool(tool, out)
        assert r.returncode == 0, r.stdout + r.stderr
    return out, docs


def test_figure_written_one_column_wide(folder):
    out, _ = folder
    import matplotlib.image
    for ext in ("png", "pdf", "csv"):
        assert (out / "figures" / f"pipeline_microbatches.{ext}").stat().st_size > 0
    image = matplotlib.image.imread(out / "figures" / "pipeline_microbatches.png")
    assert image.shape[1] == pytest.approx(1050, abs=2)
    # Nothing drawn in the first columns: the axis labels are inside the figure.
    assert (image[:, :3, :3] > 0.9).all()


def test_csv_equals_the_socket_run(folder):
    out, docs = folder
    src = {b["run_name"]: b for b in docs["pipeline_wire.json"]["benchmarks"]}
    with open(out / "figures" / "pipeline_microbatches.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 9
    for r in rows:
        b = src[r["benchmark"]]
        assert float(r["microbatches"]) == b["microbatches"]
        assert float(r["volume_psi_formula"]) == b["volume_psi_formula"]
        assert float(r["grad_bytes_per_param_formula"]) == b["grad_bytes_per_param_formula"]
        assert float(r["grad_bytes_per_param_measured"]) == b["grad_bytes_per_param_measured"]
        # The sockets' value where it was measured, else the accounted one, and it says which.
        # The legend says which too: an accounted volume sits on the formula by construction and
        # is not labelled a measurement.
        if r["stage"] == "z1":
            assert r["volume_source"] == "accounted" and r["volume_legend"] == "z1 accounted"
            assert float(r["volume_psi_drawn"]) == b["volume_psi_accounted"]
        else:
            assert r["volume_source"] == "sockets" and r["volume_legend"] == f"{r['stage']} measured"
            assert float(r["volume_psi_drawn"]) == b["volume_psi_measured"]


def test_summary_table_cell_by_cell(folder):
    out, docs = folder
    text = (out / "summary.md").read_text()
    assert "## Pipeline" in text
    lines = [l for l in text.splitlines() if l.startswith("| z2 | 8 |")]
    assert len(lines) == 1
    cells = [c.strip() for c in lines[0].strip("|").split("|")]
    assert cells[2:8] == ["16.000", "16.010", "1.500", "1.503", "9.0000", f"{9 * 1.0002:.4f}"]
    assert cells[8] == "13.00" and cells[9] == "1.00" and cells[10] == "0.50"
    assert cells[11] == "0 / 0"
