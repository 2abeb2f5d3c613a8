"""Launches run_all.py's runs one by one: each run's output to logs/<label>.log, its benchmarks
counted from the console as they stream (and from its JSON once it ends), the progress line
kept up to date, a line as it ends (with the tail of its log when it failed), and its record for
manifest.json."""

import os
import queue
import subprocess
import sys
import threading
import time

import run_launch
import run_progress

TICK_S = 1.0  # how often the progress line is refreshed while a run is quiet


def log(msg):
    Display.current.say(f"[run_all {time.strftime('%H:%M:%S', time.gmtime())}] {msg}")


def log_tail(path, lines=8):
    """The last lines of a log without the launcher's boxed banners (the lines between two rules
    of dashes), which would otherwise hide the benchmark's own message."""
    kept, inbox = [], False
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if line and set(line) == {"-"} and len(line) >= 10:
                    inbox = not inbox
                    continue
                if not inbox and line.split():
                    kept.append(line)
    except OSError:
        return
    for line in kept[-lines:]:
        Display.current.say(f"    {line}")


class Display:
    """stderr with one progress line: rewritten in place on a terminal (log lines go above it),
    else printed as a plain line when Progress.due allows."""
    current = None

    def __init__(self, stream, tty):
        self.stream, self.tty, self.shown, self.text = stream, tty, False, ""

    def say(self, text):
        if self.shown:
            self.stream.write("\r\033[K")
            self.shown = False
        self.stream.write(text + "\n")
        self.stream.flush()

    def progress(self, text, now_s, progress):
        if self.tty:
            if not (self.shown and text == self.text):
                self.stream.write("\r\033[K" + text)
                self.stream.flush()
            self.shown, self.text = True, text
        elif progress.due(now_s):
            self.say(f"[run_all {time.strftime('%H:%M:%S', time.gmtime())}] progress: {text}")

    def clear(self):
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


Display.current = Display(sys.stderr, sys.stderr.isatty())


class Runner:
    """Runs the planned runs of the table in order."""

    def __init__(self, table, options, launch, out, planned, repetitions):
        self.table, self.o, self.launch, self.out = table, options, launch, out
        self.planned, self.reps = planned, repetitions
        self.progress = run_progress.Progress(planned)
        self.records, self.failures = {}, 0
        self.t0 = time.monotonic()

    def skip(self, label, why):
        log(f"{label}: skipped: {why}")
        self.records[label] = {"name": label, "json": None, "status": "skipped", "seconds": 0.0, "why": why,
                               "benchmarks_planned": 0, "benchmarks_done": 0}

    def run_all(self):
        for p in self.planned:
            run = self.table.run(p.label)
            missing = [n for n in run.needs if not os.path.isfile(os.path.join(self.out, n))]
            if p.skip:
                self.skip(p.label, p.skip)
            elif missing:
                self.skip(p.label, f"no {', '.join(missing)} (its run failed or was skipped)")
            else:
                self.one(run, p)
        Display.current.clear()

    def one(self, run, p):
        words = run.argv(self.o.size, run_launch.table_backend(self.launch.backend), self.out) + run.optional_argv(self.out)
        json_path = os.path.join(self.out, run.json) if run.json else ""
        cmd = self.launch.command(run, words, json_path, self.reps, self.o.extra.get(run.label, []))
        env = self.launch.environment(run, os.environ)
        logpath = os.path.join(self.out, "logs", f"{run.label}.log")
        counter = run_progress.RowCounter()
        self.progress.current = run.label
        start = time.monotonic()
        Display.current.progress(self.progress.line(start - self.t0, 0.0), start - self.t0, self.progress)
        with open(logpath, "w", encoding="utf-8") as logf:
            try:
                proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                        text=True, errors="replace", bufsize=1)
            except OSError as e:
                logf.write(f"run_all.sh: cannot start {cmd[0]}: {e.strerror}\n")
                proc = None
            rc = self.stream(proc, logf, counter, start) if proc else 127
        seconds = round(time.monotonic() - start, 1)
        done = counter.done
        if rc == 0 and self.table.cost.get(run.binary, {}).get("counted_at_exit"):
            done = p.benchmarks  # prints no Google Benchmark table (zb_plan): counted as it ends
        elif rc == 0 and json_path and (in_json := run_progress.benchmarks_in_json(json_path)) is not None:
            done = in_json  # the file over the console's count
        self.progress.done[run.label] = done
        self.progress.finished[run.label] = seconds
        status = "ok" if rc == 0 else "failed"
        if rc == 0:
            log(f"{run.label}: done in {seconds:.1f} s -> {run.json or '(no JSON)'} "
                f"({done}/{p.benchmarks} benchmarks, estimate {run_progress.span(p.estimate_s)})")
        else:
            log(f"{run.label}: FAILED after {seconds:.1f} s; last lines of logs/{run.label}.log:")
            log_tail(logpath)
            self.failures += 1
        self.records[run.label] = {
            "name": run.label, "json": run.json or None, "status": status, "seconds": seconds,
            "settings": self.launch.settings(run.launch), "command": " ".join(cmd),
            "benchmarks_planned": p.benchmarks, "benchmarks_done": done,
            "estimate_s": round(p.estimate_s, 2)}

    def stream(self, proc, logf, counter, start):
        """Copies the run's output to its log as it comes, counting benchmarks, and refreshes the
        progress line at least every TICK_S; the run's exit code."""
        lines = queue.Queue()

        def reader():
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=reader, daemon=True).start()
        while True:
            try:
                line = lines.get(timeout=TICK_S)
            except queue.Empty:
                line = ""
            if line is None:
                break
            if line:
                logf.write(line)
                logf.flush()
                if counter.feed(line):
                    self.progress.done[self.progress.current] = counter.done
            now = time.monotonic()
            Display.current.progress(self.progress.line(now - self.t0, now - start), now - self.t0,
                                     self.progress)
        return proc.wait()
