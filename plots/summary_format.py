"""Formatting and loading shared by summary.py's sections: every cell is a value the C++ wrote,
shown in the unit its column names."""

import math
import os

import gbjson
import stage_table


NO_CAUSE = "no cause known to the tool"  # a finding's reason where the files give none


def finite(*vs):
    return all(isinstance(v, float) and math.isfinite(v) for v in vs)


def pct(v):
    return f"{v * 100:+.1f}%"


def fmt(v, digits=3):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:.{digits}f}"


def mega(v):
    """Bytes as the C++ wrote them, shown in MB (1e6 bytes)."""
    return "n/a" if v is None or math.isnan(v) else f"{v / 1e6:.3f}"


def ms(v):
    """Seconds as the C++ wrote them, shown in milliseconds."""
    return "n/a" if v is None or math.isnan(v) else f"{v * 1e3:.2f}"


def spread_text(pick, metric, show):
    """ " [lo, hi]" over the repetitions behind a median, formatted by `show`; "" for one run."""
    if pick is None or pick.repetitions <= 1:
        return ""
    lo, hi = pick.spread(metric)
    if math.isnan(lo) or math.isnan(hi):
        return ""
    return f" [{show(lo)}, {show(hi)}]"


def timed(pick, metric, show):
    """A timing cell: the median as the C++ wrote it, then its spread over repetitions."""
    return show(value(pick, metric)) + spread_text(pick, metric, show)


def repetitions_line(picks):
    """Says how many repetitions the timings rest on, when more than one."""
    reps = sorted({p.repetitions for p in picks if p is not None})
    if not reps or reps[-1] <= 1:
        return []
    count = str(reps[0]) if len(reps) == 1 else f"{reps[0]} to {reps[-1]}"
    return [f"- Timings: median of {count} repetitions, [lowest, highest] in brackets.", ""]


def count_text(n):
    """7e9 -> "7B", 2e6 -> "2M": a parameter count the way papers write it."""
    scale, suffix = next(((sc, sf) for sc, sf in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"))
                          if n >= sc), (1, ""))
    return f"{n / scale:.3g}{suffix}"


def size_text(n):
    for scale, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def load_with_context(results, name):
    """(context, {run_name: pick}) for one Google Benchmark file, or (None, None) when absent."""
    path = os.path.join(results, name)
    if not os.path.isfile(path):
        return None, None
    context, runs = gbjson.load_gb(path)
    return context, gbjson.representative(runs)


def load(results, name):
    """{run_name: pick} for one Google Benchmark file, or None when it is absent."""
    return load_with_context(results, name)[1]


def stage_order(results, names, picks):
    """(the stage table, stage names in order, a note) for picks read from the files `names`.

    The table comes from the first of those files that carries one; without any (older
    files), the stages keep the order the picks first name them in, and the note says so."""
    table = None
    for name in names:
        context, _ = load_with_context(results, name)
        if context is not None:
            table = stage_table.parse(os.path.join(results, name), context)
            if table:
                break
    seen = [p.params.get("stage") for p in picks if p is not None]
    note = "" if table else (f"- No stage table in {' or '.join(names)} (written before results carried "
                             "one): stages in the order the file names them; formulas and collectives n/a.")
    return table, stage_table.order(table, seen), note


def by_stage(picks):
    out = {}
    for p in (picks or {}).values():
        out.setdefault(p.params.get("stage"), p)
    return out


def value(pick, metric):
    return pick.value(metric) if pick is not None else math.nan


def wrong_cell(pick):
    """A `wrong` cell: the worst repetition's count. Elements that differ from the reference in
    one repetition are a bug however many others had none, and their median would say 0."""
    return fmt(pick.spread("wrong")[1] if pick is not None else math.nan, 0)
