"""summary.md's "check these" list, its predictions: a prediction whose error lies outside its
tolerance (plots/tolerances.py), with the reason the results files themselves give for it (a
host that changed speed between the sweep and the step, a late rank, CPU ranks sharing cores,
a late finish, the sweep's warm buffers, in-place gathers priced from one footprint short of
their reuse distance, or the run's own noise: the measured step's repetitions and the sweep's
bare calls).

Reads what the C++ wrote and compares; it measures nothing.
"""

import collections
import math
import os
import re
import statistics

import gbjson
import tolerances as tol
from summary_format import NO_CAUSE, finite, pct


def _sweep(results, ctx):
    """The sweep zb_predict read, as its command line names it (else predict_sweep.json): the
    file's name, context and runs; "", {} and [] without one."""
    m = re.search(r"--sweep=(\S+)", (ctx or {}).get("command_line", ""))
    names = [os.path.basename(m.group(1))] if m else []
    for name in names + ["predict_sweep.json"]:
        path = os.path.join(results, name)
        if os.path.isfile(path):
            return (name, *gbjson.load_gb(path))
    return "", {}, []


def _sweep_noise(runs):
    """How far a sweep's bare call moved between two runs of itself at a typical size: the median
    over its sizes of |bare_repeat_ratio - 1|, each size's the median over its repetitions of how
    far each moved (a ratio of 0.8 and one of 1.25 both moved; their median, 1.02, would not
    say so); NaN without one. Not the
    largest: over a hundred sizes one nearly always moves past 10% on a shared machine, which
    says nothing of the sizes a stage's collectives were priced at. The bare call's and not ours
    (ours_repeat_ratio), though ours is what is priced: the bare call's two runs are back to
    back, ours stand either side of them, so a steady drift moves ours three times as far."""
    moved = [p.median_of(lambda r: abs(r - 1), "bare_repeat_ratio") for p in gbjson.representative(runs).values()]
    moved = [m for m in moved if finite(m)]
    return statistics.median(moved) if moved else math.nan


def _spread_reaches(m, exposed, predicted):
    """Whether the measured step's own repetitions reach the prediction: it lies within their
    [lowest, highest] widened by the tolerance (10% each way for comm_s; for the exposed time
    what each end's own tolerance allows). Where it does, the error is no larger than the step
    moved by itself."""
    if m is None or m.repetitions < 2 or not finite(predicted):
        return False
    lo, hi = m.spread("exposed_comm_s" if exposed else "comm_s")
    if not finite(lo, hi):
        return False
    if exposed:
        return lo - _exposed_allowed(lo) <= predicted <= hi + _exposed_allowed(hi)
    return lo * (1 - tol.PREDICTION_COMM_REL) <= predicted <= hi * (1 + tol.PREDICTION_COMM_REL)


def _sweep_noise_reaches(p, exposed, noise):
    """Whether the sweep's own noise (a relative move of its calls) takes the prediction past its
    bar and reaches its error: for comm_s the move itself, for the exposed time the move times
    how far the exposed time follows the collectives (`exposed_per_comm`, at least 1), against
    its bar of 25% or 1 ms. A noise of 12% does not explain an error of 200%."""
    if not finite(noise):
        return False
    if exposed:
        pe, me = p.value("exposed_comm_s_predicted"), p.value("exposed_comm_s_measured")
        k = p.value("exposed_per_comm")
        if not finite(pe, me):
            return False
        moved = noise * max(1.0, k if finite(k) else 1.0) * me
        allowed = _exposed_allowed(me)
        return moved > allowed and abs(pe - me) <= allowed + moved
    c = p.value("comm_error")
    return noise > tol.PREDICTION_COMM_REL and finite(c) and abs(c) <= tol.PREDICTION_COMM_REL + noise


def _noise_why(p, m, exposed, sweep, sweep_runs, predicted):
    """The run's own noise as the reason for an error, where it reaches the error; "" where it
    does not. Two measurements of it: the measured step's repetitions, and the sweep's bare
    calls against themselves. One text for every stage it applies to, so that they share a
    line (each stage's range stands beside its error)."""
    said = []
    if _spread_reaches(m, exposed, predicted):
        said.append("the measured step's own repetitions ([lowest, highest] beside each), widened by the bar, "
                    "reach the prediction")
    noise = _sweep_noise(sweep_runs)
    if _sweep_noise_reaches(p, exposed, noise):
        said.append(f"the sweep's bare calls moved {noise:.0%} between two runs of the same call at a typical size "
                    f"(the median over its sizes of how far `bare_repeat_ratio` moved in each repetition, in "
                    f"{sweep})")
    return "; ".join(said) + ": this machine's noise is above the bar" if said else ""


def _measured_range(results, p, exposed):
    """" [lowest, highest]" of the measured step's repetitions, in ms; "" where they agree or
    there is one."""
    m, _ = _measured_row(results, p.name)
    if m is None or m.repetitions < 2:
        return ""
    lo, hi = m.spread("exposed_comm_s" if exposed else "comm_s")
    return f" [{lo * 1e3:.2f}, {hi * 1e3:.2f}]" if finite(lo, hi) and lo < hi else ""


def _short_cpu_gatherer(ctx, p, table, off_s):
    """The stage-table row of a stage that all-gathers and was priced short on CPU ranks of one
    node (the caches' bias, which GPUs and links between nodes do not show), else None."""
    ctx = ctx or {}
    row = table.get(p.params.get("stage")) if table else None
    cpu_ranks = ctx.get("backend") in ("mpi", "gloo")  # nccl is the GPUs'
    if (cpu_ranks and str(ctx.get("nodes")) == "1" and finite(off_s) and off_s < 0 and row is not None
            and any(x.get("op") == "all_gather" for x in row.get("passes", []))):
        return row
    return None


def _warm_gathers(ctx, p, table, sweep_ctx, off_s):
    """Whether such a stage was priced from a sweep that ran each size's calls on the same
    buffers: the bias measured there (docs/predict.md), since the step's gathers each read their
    own layer's data, no longer in the caches."""
    return (_short_cpu_gatherer(ctx, p, table, off_s) is not None
            and _spread_footprints((sweep_ctx or {}).get("command_line", "")) == 0)


def _gathers_in_place(ctx, p, table, sweep_ctx, off_s):
    """Whether such a stage gathers into its whole weights in place (they are replicated, its
    optimizer state sharded: z1, z2), priced from a sweep that spread its gathers over one
    footprint: between two gathers of a layer the step's collectives move its gradients as well
    as its weights, twice that reuse distance, and there the step's in-place gathers ran at up
    to twice its time (docs/predict.md). A sweep over more footprints prices them at their own
    distance."""
    row = _short_cpu_gatherer(ctx, p, table, off_s)
    command_line = (sweep_ctx or {}).get("command_line", "")
    return (row is not None and row.get("weights") == "replicated"
            and _spread_footprints(command_line) + _spread_footprints(command_line, "gather-footprint") == 1)


def _spread_footprints(command_line, flag="footprint"):
    """How many footprints above 0 zb_collectives' --footprint (or --gather-footprint: one size
    or a list) spread calls over."""
    m = re.search(rf"--{flag}=(\S+)", command_line)
    return sum(float(re.match(r"[\d.]*", x).group() or 0) > 0 for x in m.group(1).split(",")) if m else 0


def _measured_row(results, name):
    """The zero.json (or pipeline.json) benchmark a prediction was held against, with its file's
    context; (None, {}) if absent."""
    for fname in ("zero.json", "pipeline.json"):
        path = os.path.join(results, fname)
        if os.path.isfile(path):
            try:
                ctx, runs = gbjson.load_gb(path)
            except gbjson.InputError:
                continue
            # Named alike but for how many iterations each timed (Google Benchmark's suffix).
            bare = {k.split("/iterations:")[0]: v for k, v in gbjson.representative(runs).items()}
            if name.split("/iterations:")[0] in bare:
                return bare[name.split("/iterations:")[0]], ctx or {}
    return None, {}


def _cores_outnumbered(m, m_ctx):
    """(ranks a node, cores a node) where the measured step's CPU ranks outnumbered their node's
    cores, else None."""
    cores = m_ctx.get("num_cpus")
    per_node, cores = m.value("ranks_per_node"), float(cores) if isinstance(cores, (int, float)) else math.nan
    if m_ctx.get("backend") in ("mpi", "gloo") and finite(per_node, cores) and per_node > cores > 0:
        return per_node, cores
    return None


def _exposed_allowed(measured):
    """How far a predicted exposed time may sit from the measured one, in seconds."""
    if measured < tol.PREDICTION_EXPOSED_SMALL_S:
        return tol.PREDICTION_EXPOSED_ABS_S
    return tol.PREDICTION_EXPOSED_REL * measured


def _prediction_why(ctx, p, results, off_s, exposed, table=None, notes=None):
    """The reason for a prediction's error, one text for every stage it fits so that they share a
    line; a stage's own figures for it go into `notes`, to stand beside that stage's error."""
    notes = [] if notes is None else notes
    sweep, sweep_ctx, sweep_runs = _sweep(results, ctx)
    # Before any reason of the model's: whether the sweep and the step ran on one host speed.
    # One text for every stage, so that their errors share a line: the host's own line (check_host)
    # gives each step's ratio.
    if p.value("host_steady") == 0:
        where = ("the host changed speed during the sweep (`sweep_host_speed`)" if _sweep_changed(ctx) else
                 "the steps' reference collectives took other times than the sweep's (`reference_ratio`, "
                 "on the `host_steady` line)")
        return (f"the sweep and the step did not run at one host speed: {where}; the error compares two hosts, not "
                "the model; take the sweep and the step again, back to back (docs/predict.md)")
    if p.value("extrapolated") == 1:
        return "some of the step's collectives are larger than the sweep's largest size (extrapolated)"
    if p.value("modelled") == 1:
        return ("some collectives were priced from a tier's fitted link, not read off the sweep (`modelled`: "
                "more ranks or another node shape than swept)")
    m, m_ctx = _measured_row(results, p.name)
    skew = m.value("skew_wait_s") if m is not None else math.nan
    # The model predicts the skew that the kernels' rank_spread makes; older results have none.
    predicted_skew = p.value("skew_wait_s_predicted")
    if exposed and _covers_shortfall(m, p, "skew_wait_s", predicted_skew):
        late = _most_often(m, "late_rank")
        who = f", rank {late:.0f} most often" if finite(late) and late >= 0 else ""
        notes.append(f"{skew * 1e3:.2f} ms waiting for a late rank{who}; " +
                     (f"{predicted_skew * 1e3:.2f} ms of it predicted" if finite(predicted_skew)
                      else "none predicted (no `skew_wait_s_predicted`)"))
        return ("the wait for a late rank beside a stage (`skew_wait_s`; the part predicted from the kernels' "
                "`rank_spread` after it) is at least half its shortfall: the ranks drifted apart more than their "
                "kernels' speeds say")
    # The model's wire is the transfer; a rank that finished its collectives after another had
    # (its communication thread without a core) waited for something the model does not have.
    late_finish = m.value("late_finish_wait_s") if m is not None else math.nan
    shared = _cores_outnumbered(m, m_ctx) if m is not None else None
    if exposed and shared and finite(off_s) and off_s < 0:
        after = ""
        if finite(late_finish):  # zero too, so that the stages of a run share the text
            notes.append(f"late finish {late_finish * 1e3:.2f} ms")
            after = ("; the late finish beside a stage is the part of its exposed time that came after another "
                     "rank had finished the same collectives (`late_finish_wait_s`)")
        return (f"{shared[0]:.0f} CPU ranks shared {shared[1]:.0f} cores: the model runs the collectives "
                "on the cores the ranks' compute leaves and has the last ranks finish a blocking one after "
                "the first ones' busy spell, but a rank waiting for a core waits the scheduler's delay, "
                f"which differs from run to run{after} (docs/predict.md)" + _amplified(p, notes))
    if exposed and _covers_shortfall(m, p, "late_finish_wait_s"):
        return (f"{late_finish * 1e3:.2f} ms of the measured exposed time came after another rank had "
                "already finished the same collectives (`late_finish_wait_s`): this rank's own progress "
                "was behind, on CPUs its communication thread waiting for a core (docs/predict.md)")
    predicted = p.value("exposed_comm_s_predicted" if exposed else "comm_s_predicted")
    noise_why = _noise_why(p, m, exposed, sweep, sweep_runs, predicted)
    noisy = bool(noise_why)
    if not exposed and _warm_gathers(ctx, p, table, sweep_ctx, off_s):
        warm = (f"on CPU ranks of one node {sweep or 'the sweep'} ran each size's calls on the same "
                "buffers, warm in the caches, where the step's gathers each read their own layer's "
                "data: stages that gather come out short (docs/predict.md)")
        return warm + ("; and " + noise_why if noisy else "")
    if not exposed and _gathers_in_place(ctx, p, table, sweep_ctx, off_s):
        in_place = ("on CPU ranks of one node this stage gathers into its whole weights in place, and "
                    "between two gathers of a layer the step's collectives move its gradients too, where "
                    f"{sweep or 'the sweep'} spread its calls over one footprint: the step's gathers then take "
                    "up to twice the sweep's time; a second footprint for the gathers, four times the "
                    "weights (`zb_collectives --gather-footprint`), prices them at their reuse distance "
                    "(docs/predict.md; `zb_predict --explain` names them `all_gather in place`)")
        return in_place + ("; and " + noise_why if noisy else "")
    if noisy:
        return noise_why
    if exposed:
        return (NO_CAUSE + " (`zb_predict --measured=... --explain` lines the step up against its trace)"
                + _amplified(p, notes))
    return NO_CAUSE + (" (`zb_zero --trace-round=comm` traces the round with communication alone; "
                       "`zb_predict --measured=... --explain` lines it up against the replay)")


def _covers_shortfall(m, p, part, predicted_part=math.nan):
    """Whether a part of the measured exposed time (skew_wait_s, late_finish_wait_s), beyond what
    was predicted of it, is at least half the prediction's shortfall, in more than half the
    measured step's repetitions: each repetition's part against its own exposed time, since
    two medians can come from two repetitions. A repetition's exposed time is taken as far
    from the prediction's measured value (the step's median) as it lay from its own median."""
    pe, me = p.value("exposed_comm_s_predicted"), p.value("exposed_comm_s_measured")
    if m is None or not finite(pe, me):
        return False
    center = m.value("exposed_comm_s")
    each = [(me + e - center, x) for e, x in m.each("exposed_comm_s", part) if finite(center)]
    if not each:
        return False
    known = predicted_part if finite(predicted_part) else 0.0
    held = [pe < e and x - known >= (e - pe) / 2 for e, x in each]
    return sum(held) > len(held) / 2


def _most_often(m, metric):
    """The value the step's repetitions give most often (a rank number: their median can name a
    rank none of them named), NaN where two tie or none gives one."""
    values = [v for (v,) in m.each(metric)]
    if not values:
        return math.nan
    counts = collections.Counter(values).most_common()
    return counts[0][0] if len(counts) == 1 or counts[0][1] > counts[1][1] else math.nan


def _sweep_changed(ctx):
    """zb_predict's word on the sweep's own host speed where it changed during the sweep, else ""."""
    speed = (ctx or {}).get("sweep_host_speed", "")
    return speed if speed.startswith("changed") else ""


def check_host(ctx, p):
    """A prediction whose sweep and step did not run at one host speed (zb_predict's
    host_steady 0): the run's timings mix two hosts, whatever its errors. Either the sweep's own
    speed changed (one line for the file) or the step ran at another (its reference_ratio)."""
    if p.value("host_steady") != 0:
        return
    mix = ("this run's timings mix two hosts (a virtual machine whose cores moved): read them as two hosts' "
           "(docs/predict.md)")
    if _sweep_changed(ctx):
        yield (4, "the host changed speed during the sweep the predictions were priced from (`host_steady` 0)", "",
               f"zb_predict says `sweep_host_speed` {_sweep_changed(ctx)}; {mix}")
        return
    ratio = p.value("reference_ratio")
    yield (4, "the host ran the sweep and the step at two speeds (`host_steady` 0)",
           f"reference {ratio:.2f}x" if finite(ratio) else "",
           f"the step's reference collective (`reference_s`) took that many times the sweep's; {mix}")


def check_prediction(ctx, p, results, table=None):
    c = p.value("comm_error")
    if finite(c) and abs(c) > tol.PREDICTION_COMM_REL:
        pm, mm = p.value("comm_s_predicted"), p.value("comm_s_measured")
        notes = []
        why = _prediction_why(ctx, p, results, pm - mm if finite(pm, mm) else math.nan, False, table, notes)
        times = (f" ({pm * 1e3:.2f} ms predicted, {mm * 1e3:.2f}{_measured_range(results, p, False)} measured"
                 f"{''.join('; ' + n for n in notes)})" if finite(pm, mm) else "")
        yield (4, f"communication predicted more than {tol.PREDICTION_COMM_REL:.0%} off (`comm_error`)",
               pct(c) + times, why)
    pe, me = p.value("exposed_comm_s_predicted"), p.value("exposed_comm_s_measured")
    if finite(pe, me) and abs(pe - me) > _exposed_allowed(me):
        e = p.value("exposed_error")
        notes = []
        why = _prediction_why(ctx, p, results, pe - me, True, notes=notes)
        shown = (pct(e) + " " if finite(e) else "") + (f"({pe * 1e3:.2f} ms predicted, {me * 1e3:.2f}"
                                                       f"{_measured_range(results, p, True)} measured"
                                                       f"{''.join('; ' + n for n in notes)})")
        yield (4, f"exposed communication predicted more than {tol.PREDICTION_EXPOSED_REL:.0%} off, or more than "
               f"{tol.PREDICTION_EXPOSED_ABS_S * 1e3:g} ms where under {tol.PREDICTION_EXPOSED_SMALL_S * 1e3:g} ms "
               "(`exposed_error`)", shown, why)


def _amplified(p, notes):
    """Where the predicted exposed time moves further than the collectives' times do (zb_predict's
    exposed_per_comm above 1: the stream's backlog gains on compute), the error in the
    collectives' times while compute runs that the exposed error amounts to, into `notes`, and
    the sentence that reads it; else "". Said only where the reason given leaves the
    collectives' times open (ranks sharing cores, no cause known), not beside a reason that is
    not theirs (two hosts, a late rank)."""
    k, exposed_error = p.value("exposed_per_comm"), p.value("exposed_error")
    if not (finite(k, exposed_error) and k > 1):
        return ""
    notes.append(f"per comm {k:.1f}: collectives {pct(exposed_error / k)}")
    return ("; `per comm` beside a stage: its exposed time moves that many times as far as its collectives' "
            "times (`exposed_per_comm`), so that, to first order, collectives off by the share after it while "
            "compute ran make its error")
