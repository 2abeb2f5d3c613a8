"""Point labels (figstyle.labels_apart, as predict_vs_measured names its stages): no label covers
another or another point's marker, points drawn on top of each other share one label, and
each label stays beside its point."""

import sys

from results_fixture import PLOTS

sys.path.insert(0, PLOTS)
import figstyle  # noqa: E402

# z3 and hsdp predicted alike (one point drawn twice), hpz beside them, dp apart, z1 and z2 close.
POINTS = [("dp", 4.8, 5.6), ("z1", 6.9, 7.5), ("z2", 7.2, 7.0), ("z3", 7.79, 9.49), ("hsdp", 7.79, 9.49),
          ("hpz", 8.05, 9.82)]


def figure():
    fig, ax = figstyle.new_figure()
    ax.scatter([x for _, x, _ in POINTS], [y for _, _, y in POINTS])
    ax.set_xlim(0, 11)
    ax.set_ylim(0, 11)
    return fig, ax


def test_labels_placed_naively_cover_each_other():
    # The check itself: labels each at the same offset from their points do overlap here.
    fig, ax = figure()
    for text, x, y in POINTS:
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(3, 3), fontsize=5)
    assert ("z3", "hsdp") in figstyle.overlapping_texts(fig)


def test_labels_apart_cover_nothing_and_stay_beside_their_points():
    fig, ax = figure()
    figstyle.labels_apart(ax, POINTS)
    assert figstyle.overlapping_texts(fig) == []
    texts = {t.get_text(): t for t in ax.texts}
    assert sorted(texts) == ["dp", "hpz", "z1", "z2", "z3, hsdp"]  # one point, one label
    renderer = fig.canvas.get_renderer()
    half = renderer.points_to_pixels(3.0)
    for text, x, y in POINTS:
        label = next(t for name, t in texts.items() if text in name.split(", "))
        box = label.get_window_extent(renderer)
        px, py = ax.transData.transform((x, y))
        # Within 40 points of its point, and clear of every other point's marker.
        gap_x = max(box.x0 - px, px - box.x1, 0)
        gap_y = max(box.y0 - py, py - box.y1, 0)
        assert max(gap_x, gap_y) <= renderer.points_to_pixels(40), text
        for other, ox, oy in POINTS:
            if (ox, oy) == (x, y):
                continue
            qx, qy = ax.transData.transform((ox, oy))
            assert not (box.x0 < qx + half and box.x1 > qx - half and box.y0 < qy + half and box.y1 > qy - half), \
                (text, other)


def test_a_chain_of_overlapping_markers_is_one_label_and_a_name_is_said_once():
    # a, b and c each 1.5 half-widths of a marker from the next: a and c do not touch, but each
    # touches b, so the three read as one blob. z3 twice (its communication and its exposed
    # time on one point) is named once. The legend is kept clear too.
    fig, ax = figstyle.new_figure()
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10)
    fig.tight_layout(pad=0.3)
    fig.canvas.draw()
    step = (ax.transData.inverted().transform((figstyle.plt.rcParams["figure.dpi"], 0))[0]
            - ax.transData.inverted().transform((0, 0))[0])  # data units of one inch
    half = 3.0 / 72 * step  # 3 points, the marker's half width
    chain = [("a", 5.0, 5.0), ("b", 5.0 + 1.5 * half, 5.0), ("c", 5.0 + 3.0 * half, 5.0)]
    twice = [("z3", 2.0, 8.0), ("z3", 2.0, 8.0)]
    ax.scatter([x for _, x, _ in chain + twice], [y for _, _, y in chain + twice], label="points")
    ax.legend(loc="upper left")
    figstyle.labels_apart(ax, chain + twice)
    assert sorted(t.get_text() for t in ax.texts) == ["a, b, c", "z3"]
    assert figstyle.overlapping_texts(fig) == []
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    assert not any(t.get_window_extent(renderer).overlaps(legend) for t in ax.texts)
