"""The counter suffix rule (docs/design.md), as a check over the counters of one benchmark.

A quantity known from more than one side carries a suffix on every side, and the suffix says
which side: _formula (a closed form from the configuration), _accounted (the harness's own
books), _measured (an independent observer), _predicted (zb_predict's model). So among the
counters of one benchmark:
- a side word ends a name or is not in it (wire_bytes_measured, never wire_measured_bytes);
- the words the rule retired (_ideal, _tracked) are in no name;
- no bare name stands beside a side of the same quantity (volume_psi beside
  volume_psi_formula: the bare one must say which side it is).
"""

SIDES = ("formula", "accounted", "measured", "predicted")
RETIRED = ("ideal", "tracked")


def _side(name):
    """(stem, side) of a name ending in a side word; (name, None) otherwise."""
    for side in SIDES:
        if name.endswith("_" + side) and len(name) > len(side) + 1:
            return name[:-len(side) - 1], side
    return name, None


def violations(names):
    """Every way the counter names of one benchmark break the rule, one line each (empty: none)."""
    names = set(names)
    out = []
    stems = {stem for stem, side in map(_side, names) if side}
    for name in sorted(names):
        words = name.split("_")
        for word in RETIRED:
            if word in words:
                out.append(f"{name}: '_{word}' is retired; say which side: {', '.join(SIDES)}")
        stem, side = _side(name)
        inner = [w for w in stem.split("_") if w in SIDES]
        if inner:
            out.append(f"{name}: the side '{inner[0]}' must end the name")
        if side is None and name in stems:
            sides = sorted(s for s in SIDES if f"{name}_{s}" in names)
            out.append(f"{name}: stands bare beside {', '.join(name + '_' + s for s in sides)}; "
                       "name its side too")
    return out
