"""The stage table as the C++ wrote it into a results file (context.stage_table): stage order,
the article's formulas and the collectives of a step. Python never restates it.

A results file written before the table was (an older run) has no stage_table: stages are then
ordered as the file first names them, and formulas and collectives are not known here.
"""

import json

import gbjson

# How the table's collectives and groups read in a sentence; every other name reads as written.
OP_TEXT = {"all_reduce": "all-reduce", "reduce_scatter": "reduce-scatter", "all_gather": "all-gather"}
UNIT_TEXT = {"buckets": "per bucket", "layers": "per layer"}


def parse(path, context):
    """[{stage row}, ...] from a Google Benchmark context, or None when it holds no table.

    Raises InputError when the table is there but is not a JSON list of stages with names,
    since a summary read against a broken table would be silently wrong."""
    text = (context or {}).get("stage_table")
    if text is None:
        return None
    try:
        rows = json.loads(text) if isinstance(text, str) else text
    except ValueError as e:
        raise gbjson.InputError(f"{path}: context.stage_table is not JSON: {e}") from e
    if not (isinstance(rows, list) and rows and all(
            isinstance(r, dict) and isinstance(r.get("name"), str) for r in rows)):
        raise gbjson.InputError(f"{path}: context.stage_table is not a list of stages with names")
    return rows


def by_name(table):
    """{stage name: row} of a parsed table ({} without one)."""
    return {r["name"]: r for r in table or []}


def order(table, seen):
    """Stage names in the table's order, then any the table lacks in the order `seen` first
    names them; without a table, `seen`'s order alone."""
    out = [r["name"] for r in table or []]
    for s in seen:
        if s is not None and s not in out:
            out.append(s)
    return out


def position(names, stage):
    """Where `stage` sorts among `names` (an order from order()): unknown ones last."""
    return names.index(stage) if stage in names else len(names)


def sorted_by_table(table, items, stage_of):
    """`items` stably sorted into the table's stage order; those with a stage the table lacks,
    or none, keep their order after the rest. Without a table, `items` unchanged."""
    if not table:
        return list(items)
    rank = {name: i for i, name in enumerate(order(table, []))}
    return sorted(items, key=lambda it: rank.get(stage_of(it), len(rank)))


def collectives_text(row):
    """A stage's step in words from its passes: "reduce-scatter + all-gather x2 (node) per layer"."""
    if not row or not isinstance(row.get("passes"), list):
        return "n/a"
    parts = []
    for p in row["passes"]:
        if not isinstance(p, dict):
            continue
        text = OP_TEXT.get(p.get("op"), str(p.get("op")))
        group = p.get("group")
        if group not in (None, "world"):
            text += f" ({group})"
        psi = p.get("psi")
        if isinstance(psi, (int, float)) and psi != 1:
            text += f" of {psi:g} Ψ"
        if parts and parts[-1][0] == text:
            parts[-1][1] += 1
        else:
            parts.append([text, 1])
    words = " + ".join(t if n == 1 else f"{t} x{n}" for t, n in parts) or "none"
    unit = UNIT_TEXT.get(row.get("units"))
    return f"{words} {unit}" if unit and parts else words


def article(row):
    """The article's resident bytes per parameter for a stage ("w+(g+o)/N"), or n/a."""
    return row.get("article", "n/a") if row else "n/a"


# A benchmark name's quantization segments and how a configuration's label writes them (the
# C++ config_label: "z3+qw:int8", "hpz+qg:int4"; zpp quantizes as its own row says).
QUANT_SEGMENTS = (("quantize_weights", "qw"), ("quantize_grads", "qg"))


def config_label(params):
    """The configuration a benchmark ran, from its name's parameters: z3, z3+qw:int8, zpp."""
    label = params["stage"]
    for key, short in QUANT_SEGMENTS:
        if key in params:
            label += f"+{short}:{params[key]}"
    return label

