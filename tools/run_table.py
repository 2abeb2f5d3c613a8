#!/usr/bin/env python3
"""Loads and checks tools/run_table.toml, the one table of run_all.sh's runs; every reader imports
this module. As a command: `check` validates the table, `families` and `labels` print the names
for bash callers (tools/ab.sh), one line, space-separated."""

import os
import re
import sys
from dataclasses import dataclass, field

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    tomllib = None

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.path.join(HERE, "run_table.toml")
LAUNCHES = ("ranks", "wire", "single")
NAME = re.compile(r"^[a-z][a-z0-9_]*$")
PLACEHOLDER = re.compile(r"\{([a-z_]*)\}")


class TableError(Exception):
    """The table is malformed; the message is one line naming the entry."""


@dataclass(frozen=True)
class Run:
    label: str
    family: str
    binary: str
    about: str
    json: str
    launch: str
    repetitions: bool
    figures: tuple
    traces: tuple
    needs: tuple
    optional: tuple               # ((file, args template), ...)
    min_ranks: int                # skipped, and said so, below this many ranks
    args: dict = field(repr=False)  # size -> backend -> tuple of words, {out} still in them

    def argv(self, size, backend, out):
        """The run's own arguments for this size and backend, with the results folder filled in."""
        return [w.replace("{out}", out) for w in self.args[size][backend]]

    def optional_argv(self, out):
        """Arguments whose file exists in the results folder."""
        words = []
        for name, text in self.optional:
            if os.path.isfile(os.path.join(out, name)):
                words += [w.replace("{out}", out) for w in text.split()]
        return words


@dataclass(frozen=True)
class Table:
    sizes: tuple
    backends: tuple
    repetitions: dict
    machine: dict
    cost: dict
    runs: tuple

    def families(self):
        """--only names, in the order their first run runs."""
        return list(dict.fromkeys(r.family for r in self.runs))

    def labels(self):
        return [r.label for r in self.runs]

    def run(self, label):
        return next(r for r in self.runs if r.label == label)

    def outputs(self):
        """Every results file a run writes (traces with their * as written in the table)."""
        return [r.json for r in self.runs if r.json] + [t for r in self.runs for t in r.traces]

    def figures(self):
        return list(dict.fromkeys(f for r in self.runs for f in r.figures))


def _need(cond, msg):
    if not cond:
        raise TableError(msg)


def _strings(v):
    return isinstance(v, list) and all(isinstance(x, str) and x for x in v)


def _expand(text, shared, where):
    """{name} -> shared[name] (itself free of placeholders); {out} stays."""
    def sub(m):
        name = m.group(1)
        if name == "out":
            return "{out}"
        _need(name in shared, f"{where}: unknown placeholder {{{name}}}")
        return shared[name]
    out = PLACEHOLDER.sub(sub, text)
    _need("{" not in out.replace("{out}", "") and "}" not in out.replace("{out}", ""),
          f"{where}: unbalanced braces in {text!r}")
    return tuple(out.split())


def _run(i, d, sizes, backends, shared):
    where = f"run #{i + 1}"
    _need(isinstance(d, dict), f"{where}: not a table")
    known = {"label", "family", "binary", "about", "json", "launch", "repetitions", "figures", "traces",
             "needs", "optional", "args", "min_ranks"}
    _need(not set(d) - known, f"{where}: unknown keys {sorted(set(d) - known)}")
    for key in ("label", "family", "binary", "about", "launch"):
        _need(isinstance(d.get(key), str) and d[key], f"{where}: '{key}' must be a non-empty string")
    label = d["label"]
    where = f"run {label}"
    _need(NAME.match(label), f"{where}: a label is snake_case")
    _need(NAME.match(d["family"]), f"{where}: a family is snake_case")
    _need(re.match(r"^zb_[a-z_]+$", d["binary"]), f"{where}: binary must be a zb_ program name")
    _need(d["launch"] in LAUNCHES, f"{where}: launch must be one of {', '.join(LAUNCHES)}")
    json = d.get("json", None)
    _need(json in ("", f"{label}.json"), f"{where}: json must be '{label}.json' or empty")
    _need(isinstance(d.get("repetitions", True), bool), f"{where}: repetitions must be true or false")
    min_ranks = d.get("min_ranks", 1)
    _need(isinstance(min_ranks, int) and not isinstance(min_ranks, bool) and min_ranks >= 1,
          f"{where}: min_ranks must be a whole number of 1 or more")
    for key in ("figures", "traces", "needs"):
        _need(_strings(d.get(key, [])), f"{where}: '{key}' must be a list of names")
    optional = d.get("optional", {})
    _need(isinstance(optional, dict) and all(isinstance(v, str) and v for v in optional.values()),
          f"{where}: 'optional' maps a file name to arguments")
    args = d.get("args")
    _need(isinstance(args, dict) and set(args) == set(sizes),
          f"{where}: args needs exactly the sizes {', '.join(sizes)}")
    table = {}
    for size in sizes:
        _need(isinstance(args[size], dict) and set(args[size]) == set(backends),
              f"{where}: args.{size} needs exactly the backends {', '.join(backends)}")
        table[size] = {}
        for b in backends:
            text = args[size][b]
            _need(isinstance(text, str) and text.strip(), f"{where}: args.{size}.{b} must be a non-empty string")
            words = _expand(text, shared[size][b], f"{where}: args.{size}.{b}")
            _need(all(w.startswith("--") for w in words), f"{where}: args.{size}.{b}: every word is a --flag")
            table[size][b] = words
    for name in optional:
        _expand(optional[name], {}, f"{where}: optional {name}")
    return Run(label=label, family=d["family"], binary=d["binary"], about=d["about"], json=json,
               launch=d["launch"], repetitions=d.get("repetitions", True),
               figures=tuple(d.get("figures", [])), traces=tuple(d.get("traces", [])),
               needs=tuple(d.get("needs", [])), optional=tuple(optional.items()), min_ranks=min_ranks,
               args=table)


def parse(doc):
    """A Table from the TOML document, or TableError."""
    known = {"sizes", "backends", "repetitions", "machine", "cost", "shared", "run"}
    _need(not set(doc) - known, f"unknown top-level keys {sorted(set(doc) - known)}")
    sizes, backends = doc.get("sizes"), doc.get("backends")
    _need(sizes == ["quick", "default", "full"], "sizes must be [\"quick\", \"default\", \"full\"]")
    _need(backends == ["mpi", "nccl"], "backends must be [\"mpi\", \"nccl\"]")
    reps = doc.get("repetitions", {})
    _need(isinstance(reps, dict) and set(reps) == set(sizes)
          and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in reps.values()),
          "repetitions needs a whole number >= 1 for every size")
    machine, cost = doc.get("machine", {}), doc.get("cost", {})
    _need(isinstance(machine, dict) and set(machine) == set(backends), "machine needs one table per backend")
    _need(isinstance(cost, dict) and all(isinstance(v, dict) for v in cost.values()), "cost holds tables")
    shared = doc.get("shared", {})
    _need(isinstance(shared, dict) and set(shared) == set(sizes), "shared needs one table per size")
    for size in sizes:
        _need(isinstance(shared[size], dict) and set(shared[size]) == set(backends),
              f"shared.{size} needs one table per backend")
        for b in backends:
            own = shared[size][b]
            for k, v in own.items():
                _need(isinstance(v, str), f"shared.{size}.{b}.{k} must be a string")
            plain = {k: v for k, v in own.items() if "{" not in v}
            shared[size][b] = {k: " ".join(_expand(v, plain, f"shared.{size}.{b}.{k}")) for k, v in own.items()}
            _need(all("{" not in v for v in shared[size][b].values()), f"shared.{size}.{b}: {{out}} is for runs' args")
    runs = doc.get("run", [])
    _need(isinstance(runs, list) and runs, "the table has no [[run]]")
    parsed = tuple(_run(i, d, sizes, backends, shared) for i, d in enumerate(runs))
    labels = [r.label for r in parsed]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    _need(not dup, f"labels used twice: {', '.join(dup)}")
    for r in parsed:
        for need in r.needs:
            _need(need in [x.json for x in parsed[:labels.index(r.label)]],
                  f"run {r.label}: needs {need}, which no earlier run writes")
    table = Table(sizes=tuple(sizes), backends=tuple(backends), repetitions=dict(reps), machine=machine,
                  cost=cost, runs=parsed)
    sys.path.insert(0, HERE)
    import run_cost  # noqa: E402  (the model checks its own terms)
    errors = run_cost.check_terms(table)
    _need(not errors, errors[0] if errors else "")
    return table


def load(path=PATH):
    """The checked table; TableError (one line) when it is malformed."""
    if tomllib is None:
        raise TableError("reading tools/run_table.toml needs Python 3.11 or newer (tomllib)")
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        raise TableError(f"cannot read {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise TableError(f"{os.path.basename(path)}: {e}") from None
    return parse(doc)


def main(argv):
    if len(argv) != 1 or argv[0] not in ("check", "families", "labels"):
        print("usage: run_table.py check|families|labels", file=sys.stderr)
        return 2
    try:
        table = load()
    except TableError as e:
        print(f"run_table.py: {e}", file=sys.stderr)
        return 1
    if argv[0] == "families":
        print(" ".join(table.families()))
    elif argv[0] == "labels":
        print(" ".join(table.labels()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
