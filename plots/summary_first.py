"""summary.md's first screen: what each stage costs here, which stages fit a memory and the
fastest of them, what to check, and the figures. Selects and compares what the C++ wrote.

Which stages fit: the state a rank holds grows with the model, so the measured bytes per
parameter of each stage (at this run's N) times a model's parameters is that model's state per
rank. The model is --fit-params, else the run's own; the memory is --fit-memory, else this
machine's from manifest.json: the smallest GPU's on a GPU run (backend nccl), else the host's
shared by the ranks of one node. Activations and buffers come on top of the state.
"""

import glob
import math
import os

import gbjson
import summary_checks
import tolerances as tol
from summary_format import by_stage, count_text, finite, fmt, load, ms, stage_order, table, value

LINES = 60  # the first screen, before any detail


def parse_count(text, binary):
    """"7e9", "7G", "16M": decimal K/M/G/T for parameters, binary (K = 1024) for bytes; None if bad."""
    text = (text or "").strip()
    scale = 1.0
    if text[-1:].upper() in "KMGT" and text[-1:]:
        scale = (1024.0 if binary else 1000.0) ** ("KMGT".index(text[-1].upper()) + 1)
        text = text[:-1]
    try:
        v = float(text) * scale
    except ValueError:
        return None
    return v if math.isfinite(v) and v > 0 else None


def manifest(results):
    path = os.path.join(results, "manifest.json")
    if not os.path.isfile(path):
        return {}
    doc = gbjson.load_json(path)
    return doc if isinstance(doc, dict) else {}


def header(results, man):
    lines = ["# zerobench results", ""]
    if man:
        hw = man.get("hardware", {}) or {}
        gpus = hw.get("gpus") or []
        what = (f"{len(gpus)} x {gpus[0].get('name')}" if gpus
                else f"{hw.get('cpu_model', '?')}, {hw.get('cores', '?')} cores")
        rev = (man.get("revision") or "?")[:12] + (" (dirty)" if man.get("dirty") else "")
        lines.append(f"`{man.get('run_all', './run_all.sh')}` on {man.get('host', '?')} ({what}): "
                     f"backend {man.get('backend', '?')}, {man.get('ranks', '?')} ranks, "
                     f"revision {rev}.")
        for b in man.get("runs", []):
            if b.get("status") != "ok":
                why = f": {b['why']}" if b.get("why") else f" (see logs/{b['name']}.log)"
                lines.append(f"- **{b['name']} {b.get('status')}**{why}")
        lines.append("")
    return lines


def _gib(n):
    """Bytes in KiB to TiB, three digits: "8 GiB", "15.6 MiB"."""
    if not isinstance(n, (int, float)) or math.isnan(n):
        return "n/a"
    scale, unit = next(((1024.0 ** k, u) for k, u in ((4, "TiB"), (3, "GiB"), (2, "MiB"), (1, "KiB"))
                        if n >= 1024.0 ** k), (1.0, "B"))
    return f"{n / scale:.3g} {unit}"


def machine_memory(man, ranks_per_node):
    """(bytes one rank may hold, where that number comes from) or (None, why not)."""
    hw = man.get("hardware", {}) or {}
    gpus = [g.get("memory_total_bytes") for g in hw.get("gpus") or [] if isinstance(g, dict)]
    gpus = [g for g in gpus if isinstance(g, (int, float)) and g > 0]
    if man.get("backend") == "nccl":
        if gpus:
            return min(gpus), "the smallest GPU's memory, manifest.json"
        return None, "manifest.json names no GPU memory (`hardware.gpus[i].memory_total_bytes`)"
    host = hw.get("host_memory_bytes")
    if isinstance(host, (int, float)) and host > 0:
        s = ranks_per_node if isinstance(ranks_per_node, float) and ranks_per_node >= 1 else 1.0
        return host / s, f"host memory {_gib(host)} shared by {s:g} ranks per node, manifest.json"
    return None, "manifest.json has no `hardware.host_memory_bytes`"


def _state_bpp(p):
    """The bytes per parameter a rank holds: measured, else the formula; and which it was."""
    m = value(p, "bytes_per_param_measured")
    if not math.isnan(m):
        return m, "measured"
    return value(p, "bytes_per_param_formula"), "formula"


def stages_section(results, man, fit_params=None, fit_memory=None):
    """The stage rows and the which-fits lines."""
    z, w = by_stage(load(results, "zero.json")), by_stage(load(results, "zero_wire.json"))
    for picks in (z, w):
        picks.pop(None, None)  # benchmarks without a stage
    if not z and not w:
        return ["No ZeRO stage in zero.json or zero_wire.json: nothing to say per stage.", ""]
    wire = w or None
    _, order, note = stage_order(results, ["zero.json", "zero_wire.json"],
                                 list(z.values()) + list(w.values()))
    first = next(iter(z.values() or w.values()))
    volume_from = "zero_wire.json" if wire is not None else "zero.json"
    params = fit_params or value(first, "params")
    whose = "given" if fit_params else "the run's"
    rpn = value(first, "ranks_per_node")
    if math.isnan(rpn) and isinstance(man.get("ranks"), (int, float)):
        rpn = float(man["ranks"])  # no node counter: every rank on this host
    if fit_memory:
        memory, source = fit_memory, "given"
    else:
        memory, source = machine_memory(man, rpn)
    rows, fits, needs = [], [], {}
    for stage in order:
        t, v = z.get(stage), w.get(stage)
        if t is None and v is None:
            continue
        mem = t if t is not None else v  # memory: the timed run, else the socket run
        vol = v if v is not None else t  # volume: the socket run, else the timed run
        bpp, how = _state_bpp(mem)
        need = bpp * params if not math.isnan(params) else math.nan
        needs[stage] = need
        fit = memory is not None and not math.isnan(need) and need <= memory
        if fit:
            fits.append((stage, value(t, "step_s"), t.spread("step_s") if t is not None else (math.nan, math.nan)))
        rows.append([stage, f"{fmt(value(mem, 'bytes_per_param_measured'))} "
                            f"({fmt(value(mem, 'bytes_per_param_formula'))})",
                     f"{fmt(value(vol, 'volume_psi_measured'))} ({fmt(value(vol, 'volume_psi_accounted'))})",
                     ms(value(t, "step_s")), ms(value(t, "exposed_comm_s")), fmt(value(t, "overlap_eff"), 2),
                     _gib(need) + ("" if how == "measured" else " (formula)"),
                     "n/a" if memory is None or math.isnan(need) else ("yes" if fit else "no")])
    model = "n/a parameters" if math.isnan(params) else f"{count_text(params)} parameters"
    head = ["stage", "B/param measured (formula)", "volume Ψ measured (accounted)", "step (ms)",
            "exposed comm (ms)", "overlap", f"state per rank, {model}", f"fits {_gib(memory)}"]
    out = ["## What each stage costs here", "",
           f"N = {fmt(value(first, 'ranks'), 0)} ranks, {fmt(value(first, 'nodes'), 0)} node(s), model of "
           f"{fmt(value(first, 'params'), 0)} parameters.", "",
           table(head, rows), "",
           "- Memory: the busiest rank's state per parameter, measured (resident set or cudaMemGetInfo), "
           f"formula in brackets. Volume per step in Ψ, measured at the sockets ({volume_from}), the rings' "
           "books in brackets (n/a measured: no socket transport). Step, exposed communication (the time "
           "compute waited) and overlap: zero.json medians."]
    if note:
        out.append(note)
    out.append(fit_line(fits, needs, memory, source, model, whose))
    return out + [""]


def _and(names):
    """'a', 'a and b', 'a, b and c'."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def fit_line(fits, needs, memory, source, model, whose):
    """fits: [(stage, step seconds, (lowest, highest) over the repetitions)] of the stages that
    fit; needs: {stage: bytes per rank}. The fastest is the lowest median; a stage whose
    repetitions reach into the fastest's range is named beside it, not ranked behind it."""
    if memory is None:
        return f"- **Which fits**: unknown, {source}; give `--fit-memory`."
    where = f"{_gib(memory)} per rank ({source})"
    if not fits:
        known = {s: n for s, n in needs.items() if not math.isnan(n)}
        least = min(known, key=known.get) if known else None
        smallest = f": the smallest, {least}, needs {_gib(known[least])}" if least else ""
        return f"- **Which fits** {where}, {whose} model of {model}: none of the stages measured{smallest}."
    timed = [f for f in fits if not math.isnan(f[1])]
    best = min(timed, key=lambda f: f[1]) if timed else None
    fastest = (f"; **fastest of them: {best[0]}** ({ms(best[1])} ms per step, at the run's model)"
               if best else "; no step time to rank them (no zero.json)")
    if best:
        top = best[2][1] if finite(best[2][1]) else best[1]
        close = [f for f in timed if f is not best and (f[2][0] if finite(f[2][0]) else f[1]) <= top]
        if close:
            def spread(f):
                ranged = finite(*f[2]) and f[2][0] < f[2][1]
                return f"{ms(f[1])} [{ms(f[2][0])}, {ms(f[2][1])}]" if ranged else ms(f[1])

            # With one repetition (or repetitions that agree) the fastest's range is its one time.
            reach = "reached into that range" if finite(*best[2]) and best[2][0] < best[2][1] else "took no longer"
            fastest = (f"; **fastest of them: {best[0]}** ({spread(best)} ms per step, lowest and highest repetition "
                       f"in brackets, at the run's model), but {_and(f'{f[0]} ({spread(f)})' for f in close)} "
                       f"{reach}: this run does not tell them apart")
            # Where time cannot choose, memory can: the least state leaves the most room for
            # activations and batch. Measured states as close as the measurement is to its formula
            # (tolerances.MEMORY_REL: z3 and hsdp on one node differ by a page or two) are one:
            # the first in the stage table's order names them.
            named = {best[0], *(f[0] for f in close)}
            tied = [f[0] for f in fits if f[0] in named and not math.isnan(needs.get(f[0], math.nan))]
            if len(tied) > 1:
                floor = min(needs[s] for s in tied)
                least = next(s for s in tied if needs[s] <= floor * (1 + tol.MEMORY_REL))
                fastest += f"; of them, {least} holds the least state per rank ({_gib(needs[least])})"
    return (f"- **Which fits** {where}, {whose} model of {model}, state only: "
            f"{', '.join(f[0] for f in fits)}{fastest}.")


def figures_section(results):
    pngs = sorted(glob.glob(os.path.join(glob.escape(results), "figures", "*.png")))
    if not pngs:
        return []
    names = [os.path.relpath(p, results) for p in pngs]
    return ["## Figures", "", "PNG, PDF and the CSV of the numbers drawn, in `figures/`: "
            + ", ".join(f"[{os.path.basename(n)[:-4]}]({n})" for n in names) + ".", ""]


def first_screen(results, fit_params=None, fit_memory=None):
    """(the first screen's lines, every finding, whether the check list was cut to fit)."""
    man = manifest(results)
    # A table is one string of many lines: count what the file will hold.
    top = "\n".join(header(results, man) + stages_section(results, man, fit_params, fit_memory)).split("\n")
    figs = figures_section(results)
    found = summary_checks.findings(results)
    budget = max(3, LINES - len(top) - len(figs) - 3)
    checks, cut = summary_checks.first_screen_lines(found, budget)
    return top + ["## Check these", ""] + checks + [""] + figs, found, cut
