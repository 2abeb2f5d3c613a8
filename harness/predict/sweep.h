// A sweep read as the predictor needs it: per collective, dtype and group, the time against
// size (a CollModel), the rank count and tier it was measured at, and the hand-off a blocking
// wait pays. From zb_collectives results or nccl-tests' -J output, one file or several.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "harness/comm/traffic.h"
#include "harness/predict/coll_model.h"

namespace zb {

// Where a group's ring runs: within one node, or across nodes (its slowest hops are then
// the links between nodes).
enum class Tier { intra, inter };
const char* tier_name(Tier t);

// One swept collective: an op over a group of `ranks` ranks, within a node or across nodes.
struct SweepSeries {
  Coll op = Coll::all_reduce;
  std::string dtype;   // fp32 or bf16, or nccl-tests' own name for another type
  std::string group;   // as swept: world, node or cross (nccl-tests: world)
  bool in_place = false;  // swept in place (zb_collectives --placement=in)
  // The buffers its calls were spread over (zb_collectives --footprint, named /footprint:B), so
  // that each call met them cold; 0: every call on the same buffers, warm in the caches.
  uint64_t footprint = 0;
  int ranks = 0;       // of the group
  Tier tier = Tier::intra;
  std::vector<SweepPoint> points;  // each size's fastest repetition
  CollModel model;
  double handoff_s = -1;  // measured (zb_collectives --serial); -1: not measured
  // What a collective issued after idle costs more (zb_collectives --serial-idle-us: the
  // median over sizes of serial_idle_s less serial_s), and the idle it was timed after; -1
  // and 0: not measured.
  double wake_s = -1, wake_after_s = 0;
  std::string file;
};

// Whether two series time the same collective: op, dtype, group, placement, rank count and tier
// (their footprints may differ).
bool same_collective(const SweepSeries& a, const SweepSeries& b);

// The hand-off of a blocking wait where the sweep timed none (nccl-tests never does): a host
// thread or a stream woken by a CUDA event, some microseconds. zb_predict's and zb_plan's
// --handoff-us default.
constexpr double kDefaultHandoffUs = 10;

// How far apart two times of the reference collective (zb_collectives' and zb_zero's
// reference_s) may lie before the host is taken to have run at another speed between them. On
// the 2-core guest of docs/measurements.md, whose two cores the hypervisor moves between
// sharing a cache and not for seconds at a time, one sweep's 1 MiB all-reduces over 2 ranks
// took 0.11 to 0.22 ms in one state and 0.40 to 0.71 ms in the other (medians 0.15 and 0.60).
constexpr double kHostChangedRatio = 1.5;
// The share of a sweep's benchmarks whose reference must lie within that ratio of the sweep's
// median for the sweep to have run at one speed (an odd repetition stalls).
constexpr double kHostSteadyShare = 0.95;

// Whether two times of the reference collective lie within kHostChangedRatio of each other.
bool same_host_speed(double a_s, double b_s);
// The fastest speed a host ran the reference collective at, from the times it took (each a
// set's median): the median of those within kHostChangedRatio of the fastest, so that one
// lucky set does not set a speed the host seldom runs at. NaN where there are none.
double fastest_host_speed(const std::vector<double>& times);
// Whether a repetition ran at one host speed, the fastest its run has timed: its reference
// collective before and after it at one speed, and the slower of the two at one speed with
// `fastest_s` (--host-tries runs it again where not: Driver::run_at_host_speed).
bool repetition_at_fastest_speed(double before_s, double after_s, double fastest_s);

// The reference collective over a sweep's benchmarks, each at its median repetition.
struct HostReference {
  double median_s = NAN;  // NaN: no benchmark timed it (nccl-tests, older results)
  int benchmarks = 0;     // how many timed it
  int off = 0;            // of them, how many lie more than kHostChangedRatio from the median
  bool steady() const { return off <= (1 - kHostSteadyShare) * benchmarks; }
};

class Sweep {
 public:
  // `paths`: one file or several, comma-separated, each zb_collectives results (Google
  // Benchmark JSON: names op/bytes:B/dtype:D[/group:G]; each time the fastest repetition) or
  // nccl-tests' -J output (all_reduce_perf, reduce_scatter_perf, all_gather_perf).
  // `handoff_s`: the hand-off of a blocking wait where the sweep did not measure one.
  static Status load(const std::string& paths, double handoff_s, Sweep* out);

  // The first file's world: its ranks, nodes and ranks per node (the defaults of --ranks and
  // --ranks-per-node).
  int ranks() const { return ranks_; }
  int nodes() const { return nodes_; }
  int ranks_per_node() const { return ranks_ / nodes_; }
  // The first file's cores per node where its collectives ran on a CPU backend (its
  // communication then shares them with compute: replay.h); 0 on devices or unknown.
  int host_cores() const { return host_cores_; }
  // The host's speed while the sweep ran, by its reference collective.
  const HostReference& reference() const { return reference_; }
  // What was read ("zb_collectives batch, progress thread, serial_s for the hand-off; ...").
  const std::string& description() const { return description_; }
  const std::vector<SweepSeries>& series() const { return series_; }
  // The series of `op` over a group of `ranks` ranks in `tier`, of `dtype` where swept, else of
  // another element type (priced by bytes); nullptr when none. Then the series swept in place
  // or not as `in_place` says, where swept, else the other; `group` breaks ties (world before
  // node and cross of the same size and tier), then one buffer before a spread footprint.
  const SweepSeries* find(Coll op, DType dtype, int ranks, Tier tier, const std::string& group = "world",
                          bool in_place = false) const;
  // The same collective as `warm` (op, dtype, group, placement, ranks, tier) swept spread over
  // footprints, the smallest footprint first, where `warm` is on one buffer; else empty.
  std::vector<const SweepSeries*> spreads_of(const SweepSeries& warm) const;
  // The hand-off of a blocking wait on `op`: the sweep's where measured (the median over sizes
  // of serial_s less the back-to-back time, clamped at 0; any group, any rank count, out of
  // place first), else the default given to load().
  double handoff_s(Coll op) const;
  double default_handoff_s() const { return default_handoff_s_; }
  // Whether any op's hand-off came from the default rather than the sweep.
  bool handoff_defaulted() const;
  // The series of `op` that timed its wake-up (its wake_s and wake_after_s), or nullptr:
  // nothing measured, nothing charged.
  const SweepSeries* woken(Coll op) const;

  // For tests: a sweep from series, as load() makes them (their models fitted here).
  static Status from_series(std::vector<SweepSeries> series, int ranks, int nodes, double handoff_s, Sweep* out);

 private:
  int ranks_ = 0, nodes_ = 1, host_cores_ = 0;
  std::string description_;
  std::vector<SweepSeries> series_;
  double default_handoff_s_ = 0;
  HostReference reference_;
};

}  // namespace zb
