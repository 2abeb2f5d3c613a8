"""The summary's section of zb_predict's quantized configurations and its figure, on crafted
results (predict_quantized.json): each configuration's step at the link rates predicted and
the rate below which it beats its stage unquantized, drawn into quantized_crossing and its
CSV; no crossing, no figure."""

import csv

import pytest

from results_fixture import NAN, doc, manifest, row, run_tool, write


@pytest.fixture
def folder(tmp_path):
    write(tmp_path / "manifest.json", manifest())
    return tmp_path


# predict_quantized.json: z3 and z3+qw:int8 at three link rates, the quantized one crossing at
# 2.5 Gbit/s; zpp (weighed against hpz) faster at none.
QUANT_NAME = "zero/stage:{}/params:2000000/layers:16/compute:sleep:500/overlap:on/link_gbps:{}"


def quantized_doc():
    rows = []
    for rate, plain, quant in ((0.5, 0.146, 0.098), (2, 0.038, 0.031), (8, 0.024, 0.029)):
        rows.append(row(QUANT_NAME.format("z3", rate), 1.0, "ms", ranks=4, nodes=2, link_gbps=rate,
                        step_s_predicted=plain))
        rows.append(row(QUANT_NAME.format("z3/quantize_weights:int8", rate), 1.0, "ms", ranks=4, nodes=2,
                        link_gbps=rate, step_s_predicted=quant, quantize_s_predicted=0.0055,
                        beats_unquantized_below_gbps=2.5))
        rows.append(row(QUANT_NAME.format("zpp", rate), 1.0, "ms", ranks=4, nodes=2, link_gbps=rate,
                        step_s_predicted=0.5, quantize_s_predicted=0.007, beats_unquantized_below_gbps=NAN))
    return doc(rows)


def test_the_quantized_section_gives_each_crossing(folder):
    write(folder / "predict_quantized.json", quantized_doc())
    r = run_tool("summary.py", folder)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (folder / "summary.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    at = lines.index("## Quantized configurations against the link rate (zb_predict)")
    table = [line for line in lines[at:at + 8] if line.startswith("| ")]
    assert table[0].startswith("| configuration | step at 0.5 Gbit/s (ms) | step at 8 Gbit/s (ms) |")
    assert "| z3 | 146.00 | 24.00 | - | - |" in table
    assert "| z3+qw:int8 | 98.00 | 29.00 | 5.50 | 2.500 |" in table
    assert "| zpp | 500.00 | 500.00 | 7.00 | - |" in table
    assert "4 ranks on 2 nodes" in text


def test_the_crossing_figure_draws_every_configuration_into_its_csv(folder):
    write(folder / "predict_quantized.json", quantized_doc())
    r = run_tool("zbplot.py", folder)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "wrote figures/quantized_crossing.{png,pdf,csv}" in r.stdout
    with open(folder / "figures" / "quantized_crossing.csv", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["benchmark", "configuration", "drawn", "link_gbps", "step_s_predicted",
                       "quantize_s_predicted", "beats_unquantized_below_gbps"]
    got = {(r[1], float(r[3])): (float(r[4]), r[6]) for r in rows[1:]}
    assert len(got) == 9
    assert got[("z3+qw:int8", 2.0)] == (0.031, "2.5")
    assert got[("z3", 8.0)][0] == 0.024
    # Every configuration in the CSV, and which of them the figure draws.
    assert {(r[1], r[2]) for r in rows[1:]} == {("z3", "1"), ("z3+qw:int8", "1"), ("zpp", "1")}


def test_the_crossing_csv_says_which_configurations_are_drawn(folder):
    """A configuration of two quantizations is in the CSV, not on the figure: its drawn cell
    says so, so that the CSV is the numbers drawn and the rest, told apart."""
    d = quantized_doc()
    for rate in (0.5, 2, 8):
        d["benchmarks"].append(row(QUANT_NAME.format("z3/quantize_weights:int8/quantize_grads:int4", rate), 1.0,
                                   "ms", ranks=4, nodes=2, link_gbps=rate, step_s_predicted=0.03,
                                   quantize_s_predicted=0.006, beats_unquantized_below_gbps=4.0))
    write(folder / "predict_quantized.json", d)
    r = run_tool("zbplot.py", folder)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(folder / "figures" / "quantized_crossing.csv", encoding="utf-8") as f:
        drawn = {(x["configuration"], x["drawn"]) for x in csv.DictReader(f)}
    assert ("z3+qw:int8+qg:int4", "0") in drawn and ("z3+qw:int8", "1") in drawn, drawn


def test_no_crossing_no_figure(folder):
    # Every configuration unquantized: nothing to mark, so the figure is skipped with a note.
    d = quantized_doc()
    d["benchmarks"] = [b for b in d["benchmarks"] if "beats_unquantized_below_gbps" not in b]
    write(folder / "predict_quantized.json", d)
    r = run_tool("zbplot.py", folder)
    assert r.returncode == 0 and "quantized_crossing" not in r.stdout
    assert "no quantized configuration predicted at several link rates" in r.stderr
