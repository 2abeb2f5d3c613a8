"""summary.md's offload section: zb_offload's device memory against the formula, its copies and
how much of them compute hid (offload.json), and the compute per chunk from which two slots
hide them (offload_sweep.json). Selects and formats what the C++ wrote; computes nothing."""

import gbjson
from summary_format import fmt, load, ms, repetitions_line, spread_text, table, timed, wrong_cell

FAMILIES = {"offload_grads": "gradients out (offload_grads)",
            "offload_weights": "weights in (offload_weights)"}
HEAD = ["benchmark", "slots", "device B/param formula", "measured", "host B/param", "copy (ms)",
        "exposed copy (ms)", "hidden", "D2H GB/s", "H2D GB/s", "copy limit GB/s", "wrong"]
HIDDEN = 0.9  # the share of the copies two slots should hide


def _slots(p):
    s = gbjson.number(p.params.get("slots"))
    return s if s is not None else p.value("slots")


def _compute(p):
    return p.value("compute_per_chunk_s")


def _key(p):
    """Sorts rows by slots, then compute per chunk (NaN last), then name."""
    c = _compute(p)
    return (_slots(p), c != c, 0.0 if c != c else c, p.name)


def _name(p):
    return p.name.split("/iterations:")[0].replace("|", "\\|")


def _row(p):
    two = lambda v: fmt(v, 2)  # noqa: E731
    return [_name(p), fmt(_slots(p), 0), fmt(p.value("device_bytes_per_param_formula")),
            fmt(p.value("device_bytes_per_param_measured")), fmt(p.value("host_bytes_per_param_measured")),
            *_copy_cells(p, two),
            timed(p, "d2h_GBps", two), timed(p, "h2d_GBps", two), fmt(p.value("copy_limit_GBps"), 2),
            wrong_cell(p)]


def _copy_cells(p, two):
    """Copy time, exposed copy time and the share hidden, of one repetition (the median hidden
    share's), each with its own [lowest, highest]: hidden_frac is 1 - exposed/copy within a
    repetition, and three medians could each come from another."""
    hidden, copy, exposed = p.at_median("hidden_frac", "copy_s", "exposed_copy_s")
    return [ms(copy) + spread_text(p, "copy_s", ms), ms(exposed) + spread_text(p, "exposed_copy_s", ms),
            two(hidden) + spread_text(p, "hidden_frac", two)]


def _config(p):
    """The name without the slots and the swept compute: one configuration of the sweep."""
    return "/".join(s for s in p.name.split("/iterations:")[0].split("/")
                    if s.partition(":")[0] not in ("slots", "compute"))


def hiding_lines(picks):
    """Per configuration of the sweep: the smallest swept compute per chunk from which two slots
    hid at least 90% of the copies, as the C++ measured hidden_frac: in every repetition, there
    and at every larger compute swept (a median can hide a repetition at 40%, and a larger
    compute that hid less makes "from X on" false)."""
    two = [p for p in picks.values() if p.family == "offload_grads" and _slots(p) == 2
           and _compute(p) == _compute(p)]
    configs = {}
    for p in two:
        configs.setdefault(_config(p), []).append(p)
    out = []
    for config, members in sorted(configs.items()):
        members.sort(key=_compute)
        held = [p.spread("hidden_frac")[0] >= HIDDEN for p in members]
        first = next((i for i in range(len(members)) if all(held[i:])), None)
        where = f" (`{config.replace('|', chr(92) + '|')}`)" if len(configs) > 1 else ""
        if first is not None:
            p = members[first]
            hidden, condition = p.at_median("hidden_frac", "hide_condition_s")
            out.append(f"- Two slots hide at least {HIDDEN:.0%} of the copies from "
                       f"{ms(_compute(p))} ms of compute per chunk on, in every repetition{where}: hidden "
                       f"{fmt(hidden, 2)}{spread_text(p, 'hidden_frac', lambda v: fmt(v, 2))} there, "
                       f"against a hide condition of {ms(condition)} ms (offload_sweep.json).")
        else:
            p = members[-1]
            out.append(f"- Two slots hide {HIDDEN:.0%} of the copies at no swept compute per chunk"
                       f"{where}: at the largest, {ms(_compute(p))} ms, hidden "
                       f"{fmt(p.value('hidden_frac'), 2)} (offload_sweep.json).")
    return out


def offload_section(results):
    picks, sweep = load(results, "offload.json"), load(results, "offload_sweep.json")
    if picks is None and sweep is None:
        return []
    out = ["## Offload: gradients out and weights in through device slots (zb_offload)", ""]
    shown = []
    for family, title in FAMILIES.items():
        rows = sorted((p for p in (picks or {}).values() if p.family == family), key=_key)
        if rows:
            out += [f"### {title}", "", table(HEAD, [_row(p) for p in rows]), ""]
            shown += rows
    if shown:
        out.append("- device B/param: device memory of the state and the slots per parameter, busiest "
                   "rank, against the formula; host B/param: the pinned host memory. Exposed copy: the "
                   "time compute waited for copies; hidden: the share of the copy time compute hid. "
                   "D2H/H2D GB/s against the copy limit measured on the same machine.")
    if any("host-to-host" in (p.label or "") for p in shown + list((sweep or {}).values())):
        out.append("- Copies here are host-to-host (a CPU run): their GB/s are a memory copy's, "
                   "not a PCIe link's.")
    out += hiding_lines(sweep or {})
    out.append("- Figures: `offload_exposed` (exposed copy time against compute per chunk per slot "
               "count, the hide condition dotted) and `offload_memory` (device bytes per parameter "
               "against slots, formula and measured).")
    return out + [""] + repetitions_line(shown)
