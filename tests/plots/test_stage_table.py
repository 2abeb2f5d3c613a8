"""The stage table read from a results file's context (plots/stage_table.py): its order rules the
figures and the summary, files without one keep their own order, and a broken one is an error."""

import csv
import json
import sys

import pytest

from results_fixture import PLOTS, STAGE_TABLE, doc, run_tool, write, zero_sweep

sys.path.insert(0, PLOTS)
import gbjson  # noqa: E402
import stage_table  # noqa: E402


def test_order_is_the_tables_then_the_files():
    table = [{"name": "b"}, {"name": "a"}]
    assert stage_table.order(table, ["x", "a", None, "b", "x"]) == ["b", "a", "x"]
    assert stage_table.order(None, ["x", "a", "x"]) == ["x", "a"]
    items = [("a", 1), ("x", 2), ("b", 3), (None, 4)]
    assert stage_table.sorted_by_table(table, items, lambda t: t[0]) == [
        ("b", 3), ("a", 1), ("x", 2), (None, 4)]
    assert stage_table.sorted_by_table(None, items, lambda t: t[0]) == items


def test_collectives_in_words():
    z3, dp = STAGE_TABLE[3], STAGE_TABLE[0]
    assert stage_table.collectives_text(z3) == "reduce-scatter + all-gather x2 per layer"
    assert stage_table.collectives_text(dp) == "all-reduce per bucket"
    hpz = dict(z3, passes=[{"op": "reduce_scatter", "group": "world", "psi": 1.0},
                           {"op": "all_reduce", "group": "cross", "psi": 0.25},
                           {"op": "all_gather", "group": "world", "psi": 1.0},
                           {"op": "all_gather", "group": "node", "psi": 1.0}])
    assert stage_table.collectives_text(hpz) == ("reduce-scatter + all-reduce (cross) of 0.25 Ψ + all-gather"
                                                 " + all-gather (node) per layer")
    assert stage_table.collectives_text(None) == "n/a" and stage_table.article(None) == "n/a"


@pytest.mark.parametrize("text", ["[{oops", json.dumps({"name": "dp"}), json.dumps([{"article": "w"}]), "[]"])
def test_a_broken_table_is_an_input_error(text):
    with pytest.raises(gbjson.InputError, match="zero.json: context.stage_table"):
        stage_table.parse("zero.json", {"stage_table": text})
    assert stage_table.parse("zero.json", {}) is None


def sweep_series(folder):
    with open(folder / "figures" / "zero_sweep_exposed.csv", newline="", encoding="utf-8") as f:
        return list(dict.fromkeys(r["series"] for r in csv.DictReader(f)))


def test_figures_follow_the_table_else_the_file(tmp_path):
    d = zero_sweep()  # z1's rows, then z3's
    write(tmp_path / "zero_sweep.json", d)
    assert run_tool("zbplot.py", tmp_path).returncode == 0
    assert sweep_series(tmp_path) == ["z1", "z3"]
    write(tmp_path / "zero_sweep.json", dict(d, context=doc([], table=STAGE_TABLE[::-1])["context"]))
    assert run_tool("zbplot.py", tmp_path).returncode == 0
    assert sweep_series(tmp_path) == ["z3", "z1"]
    # No table (an older file): the order the file names the stages in, z3 first here.
    rows = ([b for b in d["benchmarks"] if "z3" in b["name"]]
            + [b for b in d["benchmarks"] if "z1" in b["name"]])
    write(tmp_path / "zero_sweep.json", doc(rows, table=False))
    assert run_tool("zbplot.py", tmp_path).returncode == 0
    assert sweep_series(tmp_path) == ["z3", "z1"]


def test_zbplot_names_a_broken_table(tmp_path):
    write(tmp_path / "zero_sweep.json", dict(zero_sweep(), context={"stage_table": "[{oops"}))
    r = run_tool("zbplot.py", tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "zero_sweep.json: context.stage_table is not JSON" in r.stderr
