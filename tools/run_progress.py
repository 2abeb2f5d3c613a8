"""What run_all.py says about time: the plan before the first benchmark, one progress line while
the runs go (in place on a terminal, a plain line at most every 10 s elsewhere), and the estimate
beside the actual time per family at the end. Every function takes the times it shows as
arguments: none reads a clock, so the tests decide what they see."""

import json
import re
from dataclasses import dataclass, field

PLAIN_EVERY_S = 10
# A Google Benchmark console row: the name, then a time with its unit (or a percentage for the
# _cv aggregate). A benchmark's rows (its repetitions, then its aggregates) come out together
# once all its repetitions have run, so a new name is a benchmark done.
# Ranks under Open MPI write to a pseudo-terminal, so Google Benchmark colours its rows.
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ROW = re.compile(r"^(\S+?)(?:_mean|_median|_stddev|_cv)?\s+(?:-?\d[\d.e+-]*\s*(?:ns|us|ms|s)|-?\d[\d.]*\s*%)\s")


def clock(seconds):
    """m:ss (h:mm:ss from an hour)."""
    s = int(round(max(seconds, 0)))
    h, m = divmod(s, 3600)
    return f"{h}:{m // 60:02d}:{m % 60:02d}" if h else f"{s // 60}:{s % 60:02d}"


def span(seconds):
    """A duration for tables: 42 s, 3 min 24 s."""
    s = int(round(max(seconds, 0)))
    return f"{s} s" if s < 100 else f"{s // 60} min {s % 60:02d} s"


class RowCounter:
    """Benchmarks done, counted from a binary's console output line by line."""

    def __init__(self):
        self.names = set()

    def feed(self, line):
        """True when the line is the first row of a benchmark not seen before."""
        m = ROW.match(ANSI.sub("", line))
        if not m or m.group(1) in ("Benchmark", "-" * len(m.group(1))):
            return False
        if m.group(1) in self.names:
            return False
        self.names.add(m.group(1))
        return True

    @property
    def done(self):
        return len(self.names)


def benchmarks_in_json(path):
    """The benchmarks a finished run's Google Benchmark JSON holds, each once (its repetitions
    and aggregates share its run_name), less any that ended in an error (`error_occurred`, as
    the console's count leaves its row out); None where the file cannot be read. What the run
    did, where the console's count can be thrown off: another process's output landing inside
    a row (the ranks' and mpirun's own share mpirun's output) splits it, and its second half
    reads as a new name."""
    try:
        with open(path, encoding="utf-8") as f:
            rows = json.load(f)["benchmarks"]
        return len({b.get("run_name", b["name"]) for b in rows if not b.get("error_occurred")})
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass
class Planned:
    """One run in the plan: its family, benchmark count and the estimate of each benchmark."""
    label: str
    family: str
    benchmarks: int
    start_s: float          # launch and start-up, before the first benchmark
    each_s: list            # per benchmark, in order (len == benchmarks)
    skip: str = ""          # why it will not run, when known before it starts

    @property
    def estimate_s(self):
        return 0.0 if self.skip else self.start_s + sum(self.each_s)


def families(planned):
    """{family: [Planned]} in run order."""
    out = {}
    for p in planned:
        out.setdefault(p.family, []).append(p)
    return out


def plan_lines(planned, note, runs_of_suite=1):
    """The plan table: per family its runs, benchmarks and estimate, then the whole."""
    rows = []
    total_b = total_s = 0
    for fam, ps in families(planned).items():
        live = [p for p in ps if not p.skip]
        b, s = sum(p.benchmarks for p in live), sum(p.estimate_s for p in live)
        skipped = f" (skips {', '.join(p.label for p in ps if p.skip)})" if len(live) < len(ps) else ""
        rows.append(f"  {fam:<12} {len(live):>4} {b:>11} {span(s):>12}{skipped}")
        total_b += b
        total_s += s
    head = [f"plan: {total_b} benchmarks in {sum(1 for p in planned if not p.skip)} runs, "
            f"about {span(total_s)} of benchmarking ({note})",
            f"  {'family':<12} {'runs':>4} {'benchmarks':>11} {'estimate':>12}"]
    tail = [f"  {'total':<12} {sum(1 for p in planned if not p.skip):>4} {total_b:>11} {span(total_s):>12}"]
    if runs_of_suite > 1:
        tail.append(f"  x {runs_of_suite} runs of the suite: about {span(total_s * runs_of_suite)}")
    return head + rows + tail


@dataclass
class Progress:
    """The state behind the progress line; `line` formats it, `due` says when to print it."""
    planned: list
    done: dict = field(default_factory=dict)      # label -> benchmarks done
    finished: dict = field(default_factory=dict)  # label -> actual seconds, once ended
    current: str = ""
    last_plain_s: float = -1e9

    def total(self):
        return sum(p.benchmarks for p in self.planned if not p.skip)

    def count(self):
        return sum(min(v, self._planned(k).benchmarks) for k, v in self.done.items())

    def _planned(self, label):
        return next(p for p in self.planned if p.label == label)

    def left_s(self, run_elapsed_s):
        """Estimate of what is left: the current run's undone benchmarks, then the runs to come,
        scaled by how the finished runs compared with their estimates (once there are some)."""
        left = 0.0
        for p in self.planned:
            if p.skip or p.label in self.finished:
                continue
            if p.label == self.current:
                k = min(self.done.get(p.label, 0), p.benchmarks)
                left += max(sum(p.each_s[k:]), p.estimate_s - run_elapsed_s if k == 0 else 0.0)
            else:
                left += p.estimate_s
        est = sum(self._planned(k).estimate_s for k in self.finished)
        act = sum(self.finished.values())
        ratio = min(max(act / est, 0.1), 50.0) if est > 0 and act > 0 else 1.0
        return left * ratio

    def line(self, elapsed_s, run_elapsed_s):
        fam = self._planned(self.current).family if self.current else "-"
        fam_total = sum(p.benchmarks for p in self.planned if p.family == fam and not p.skip)
        fam_done = sum(min(v, self._planned(k).benchmarks) for k, v in self.done.items()
                       if self._planned(k).family == fam)
        return (f"{fam} {fam_done}/{fam_total}, all {self.count()}/{self.total()} benchmarks, "
                f"{clock(elapsed_s)} elapsed, about {clock(self.left_s(run_elapsed_s))} left")

    def due(self, now_s):
        """Plain output (not a terminal): at most one line every PLAIN_EVERY_S seconds."""
        if now_s - self.last_plain_s >= PLAIN_EVERY_S:
            self.last_plain_s = now_s
            return True
        return False


def summary_lines(planned, actual):
    """The estimate beside the actual time per family; actual: label -> seconds of runs that ran."""
    rows, te, ta = [], 0.0, 0.0
    for fam, ps in families(planned).items():
        ran = [p for p in ps if p.label in actual]
        if not ran:
            continue
        e, a = sum(p.estimate_s for p in ran), sum(actual[p.label] for p in ran)
        te, ta = te + e, ta + a
        rows.append(f"  {fam:<12} {span(e):>12} {span(a):>12} {ratio(a, e):>7}")
    return (["time per family: estimate and actual",
             f"  {'family':<12} {'estimate':>12} {'actual':>12} {'ratio':>7}"] + rows
            + [f"  {'total':<12} {span(te):>12} {span(ta):>12} {ratio(ta, te):>7}"])


def ratio(a, e):
    return f"{a / e:.2f}" if e > 0 else "n/a"
