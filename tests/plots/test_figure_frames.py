"""Every figure zbplot draws fits its frame: no title, label, legend or tick label reaches past
the figure's edge, on the committed quick baseline (test_zbplot checks the crafted results)."""

import os
import shutil
import sys

import pytest

from results_fixture import PLOTS, ROOT, run_tool, trace, write

sys.path.insert(0, PLOTS)
import figstyle  # noqa: E402

BASELINE = os.path.join(ROOT, "results", "baselines", "quick_cpu_2ranks")


def test_a_text_past_the_edge_is_named():
    fig, ax = figstyle.new_figure()
    ax.plot([0, 1], [0, 1])
    ax.set_xlabel("inside")
    fig.tight_layout(pad=0.3)
    assert figstyle.cut_texts(fig) == []
    fig.text(0.9, 0.5, "reaching past the right edge")
    ax.legend(["a legend above and far to the left"], loc="lower right", bbox_to_anchor=(-0.5, 1.0))
    assert figstyle.cut_texts(fig) == ["'reaching past the right edge'",
                                       "'a legend above and far to the left'"]


def drawn(folder):
    r = run_tool("zbplot.py", folder)
    assert r.returncode == 0, r.stderr
    return r


@pytest.mark.skipif(not os.path.isdir(BASELINE), reason="no committed baseline")
def test_baseline_figures_fit(tmp_path):
    folder = tmp_path / "baseline"
    shutil.copytree(BASELINE, folder)
    write(folder / "trace.json", trace(waits=True))
    r = drawn(folder)
    assert r.stdout.count("zbplot: wrote") >= 8, r.stdout + r.stderr
    assert "past its edge" not in r.stderr, r.stderr
