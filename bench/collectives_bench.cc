// The zb_collectives benchmark body: buffers, the timed loops against the bare call, the check.
#include "bench/collectives_bench.h"

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "harness/comm/node_traffic.h"
#include "harness/core/stats.h"
#include "harness/driver/node_window.h"
#include "kernels/pattern.h"
#include "kernels/thread_pool.h"

namespace zb {
namespace {

// How often each slot is used before timing (run_collective_benchmark).
constexpr uint64_t kPrimeUses = 2;

// The process's minor page faults so far, every thread's.
long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// One size of one op: buffers laid out so every rank's part is whole elements.
struct Shape {
  Coll op;
  DType dtype;
  uint64_t count;  // full buffer, elements (padded to a multiple of ranks for RS/AG/A2A)
  uint64_t in_count, out_count;
  bool hier = false;
  uint64_t node_block = 0;  // hier: the block each rank reduces across nodes
  int node_rank = 0;
  uint64_t peer_block = 0;  // all-to-all: what each rank sends each rank
};

Shape shape_for(Coll op, DType dtype, uint64_t bytes, int ranks) {
  uint64_t count = padded_count(op, dtype, bytes, ranks), block = count / uint64_t(ranks);
  switch (op) {
    case Coll::all_reduce: return {op, dtype, count, count, count};
    case Coll::reduce_scatter: return {op, dtype, count, count, block};
    case Coll::all_gather: return {op, dtype, count, block, count};
    case Coll::all_to_all: {
      Shape s{op, dtype, count, count, count};
      s.peer_block = block;
      return s;
    }
  }
  return {};
}

// All-to-all: what rank `from` sends rank `to` at offset k of that block. An integer in
// [-125, 125], exact in BF16, that changes with the sender, the receiver and the offset, so a
// block from the wrong rank, for the wrong rank or at the wrong place is counted; the
// reductions' pattern repeats every 5 indices, which a block of 5m elements would not notice.
double a2a_value(int from, int to, uint64_t k) {
  return double(int64_t((uint64_t(from) * 131 + uint64_t(to) * 31 + k * 7) % 251) - 125);
}

// The host's element loops (fill, poison, check) on the rank's CPU threads: element by element
// they cost more than the collective they check at a GPU's sizes (256 MiB: 2 s on one thread).
template <class Body>
void host_elements(uint64_t count, int threads, Body&& body) {
  parallel_chunks(size_t(count), threads, 64, size_t(1) << 16, body);
}

// Fills this rank's input; the all-gather's block is its slice of the global index space.
void fill_input(const Shape& s, void* host, int rank, int ranks, int threads) {
  const size_t esz = dtype_size(s.dtype);
  const uint64_t first = s.op == Coll::all_gather ? uint64_t(rank) * s.in_count : 0;
  host_elements(s.in_count, threads, [&](size_t begin, size_t end) {
    if (s.op != Coll::all_to_all) {
      fill_pattern(static_cast<char*>(host) + begin * esz, s.dtype, end - begin, rank, first + begin, ranks);
      return;
    }
    for (uint64_t i = begin; i < end; ++i)
      store_element(host, s.dtype, i, a2a_value(rank, int(i / s.peer_block), i % s.peer_block));
  });
}

uint64_t count_wrong(const Shape& s, const void* host, int rank, int ranks, int threads) {
  std::atomic<uint64_t> wrong{0};
  host_elements(s.out_count, threads, [&](size_t begin, size_t end) {
    uint64_t here = 0;
    for (uint64_t i = begin; i < end; ++i) {
      double expect = 0;
      if (s.op == Coll::all_reduce) expect = pattern_sum(i, ranks);
      else if (s.op == Coll::reduce_scatter) expect = pattern_sum(uint64_t(rank) * s.out_count + i, ranks);
      else if (s.op == Coll::all_to_all) expect = a2a_value(int(i / s.peer_block), rank, i % s.peer_block);
      else expect = pattern_value(int(i / s.in_count), i, ranks);
      here += load_element(host, s.dtype, i) != expect;
    }
    wrong += here;
  });
  return wrong;
}

// The hierarchical all-reduce, out of place: the node's reduce-scatter leaves this rank's block
// of the node's sum at its place in `out`, the cross-node all-reduce completes it there, and
// the node's all-gather fills in the rest around it. Issued as three calls on one stream;
// `bare` issues the library's three calls the same way.
Status hier_all_reduce(Communicator& comm, const Shape& s, const void* in, void* out, bool bare) {
  char* own = static_cast<char*>(out) + uint64_t(s.node_rank) * s.node_block * dtype_size(s.dtype);
  if (bare) {
    ZB_RETURN_IF_ERROR(comm.bare(Coll::reduce_scatter, in, own, s.count, s.dtype, Group::node));
    ZB_RETURN_IF_ERROR(comm.bare(Coll::all_reduce, own, own, s.node_block, s.dtype, Group::cross));
    return comm.bare(Coll::all_gather, own, out, s.count, s.dtype, Group::node);
  }
  ZB_RETURN_IF_ERROR(comm.reduce_scatter(in, own, s.node_block, s.dtype, Group::node));
  ZB_RETURN_IF_ERROR(comm.all_reduce(own, own, s.node_block, s.dtype, Group::cross));
  return comm.all_gather(own, out, s.node_block, s.dtype, Group::node);
}

Status issue(Communicator& comm, const Shape& s, const void* in, void* out, Group group) {
  if (s.hier) return hier_all_reduce(comm, s, in, out, false);
  switch (s.op) {
    case Coll::all_reduce: return comm.all_reduce(in, out, s.count, s.dtype, group);
    case Coll::reduce_scatter: return comm.reduce_scatter(in, out, s.out_count, s.dtype, group);
    case Coll::all_gather: return comm.all_gather(in, out, s.in_count, s.dtype, group);
    case Coll::all_to_all: return comm.all_to_all(in, out, s.peer_block, s.dtype, group);
  }
  return Status::ok();
}

// The p-quantile of two runs' per-iteration times together.
double quantile_of(const Timing& a, const Timing& b, double p) {
  std::vector<double> all = a.times;
  all.insert(all.end(), b.times.begin(), b.times.end());
  return quantile(all, p);
}

}  // namespace

uint64_t padded_count(Coll op, DType dtype, uint64_t bytes, int ranks, bool hier) {
  uint64_t elem = dtype_size(dtype);
  uint64_t count = std::max<uint64_t>(1, (bytes + elem - 1) / elem);
  if (op != Coll::all_reduce || hier) count = (count + uint64_t(ranks) - 1) / uint64_t(ranks) * uint64_t(ranks);
  return count;
}

const char* coll_op_name(const CollOp& op) { return op.hier ? "hier_all_reduce" : coll_name(op.op); }

std::vector<std::pair<std::string, CollOp>> coll_op_choices() {
  std::vector<std::pair<std::string, CollOp>> out;
  for (const auto& [name, c] : coll_choices()) out.push_back({name, CollOp{c, false}});
  out.push_back({"hier_all_reduce", CollOp{Coll::all_reduce, true}});
  return out;
}

Status run_collective_benchmark(Run& run, const CollSetup& setup, CollResult* out) {
  Driver& driver = run.driver();
  Communicator& comm = driver.comm();
  // Over a group, every rank runs the collective of its own group: the patterns, the padding
  // and the expected values are the group's.
  const int n = comm.group_size(setup.group), rank = comm.group_rank(setup.group);
  Shape s = shape_for(setup.op, setup.dtype, setup.bytes, n);
  if (setup.hier) {
    const int per_node = comm.group_size(Group::node);
    s.count = s.in_count = s.out_count = padded_count(setup.op, setup.dtype, setup.bytes, per_node, true);
    s.hier = true;
    s.node_block = s.count / uint64_t(per_node);
    s.node_rank = comm.group_rank(Group::node);
  }
  const size_t esz = dtype_size(s.dtype);
  const uint64_t full_bytes = s.count * esz;
  Buffer in, out_buf, host_in, host_out;
  MemKind kind = comm.mem_kind();
  // With a footprint, `slots` copies of the input, each call the next: what a step's
  // collectives find in the caches is their own data, not the last call's. In place, a slot is
  // one buffer of the full size: the whole of it input and output of an all-reduce; a
  // reduce-scatter's output and an all-gather's input the rank's block of it. Out of place, the
  // output is one buffer every call reuses, as a step's gathers write into the few transient
  // buffers it cycles (z3's layers, hsdp's, hpz's) and read their input from the rank's shard.
  // Spread outputs made such a gather as cold as one in place, which the step's is not at 4
  // ranks (docs/measurements.md, "out of place, the input spread").
  const uint64_t in_bytes = s.in_count * esz, out_bytes = s.out_count * esz;
  const uint64_t slot_bytes = setup.in_place ? full_bytes : in_bytes;
  const uint64_t slots = std::max<uint64_t>(1, (setup.footprint + slot_bytes - 1) / slot_bytes);
  const uint64_t own_block = s.op == Coll::all_reduce ? 0 : uint64_t(rank) * std::min(in_bytes, out_bytes);
  if (!setup.in_place) ZB_RETURN_IF_ERROR(Buffer::allocate(kind, slots * in_bytes, &in));
  ZB_RETURN_IF_ERROR(Buffer::allocate(kind, setup.in_place ? slots * full_bytes : out_bytes, &out_buf));
  ZB_RETURN_IF_ERROR(Buffer::allocate(MemKind::host, in_bytes, &host_in));
  ZB_RETURN_IF_ERROR(Buffer::allocate(MemKind::host, out_bytes, &host_out));
  const int threads = driver.cpu_threads_per_rank();
  fill_input(s, host_in.data(), rank, n, threads);
  if (driver.faults().corrupt_rank == comm.rank())
    store_element(host_in.data(), s.dtype, s.in_count / 2, 1.0);  // off the pattern
  auto input = [&](uint64_t k) {
    if (!setup.in_place) return in.as<char>() + k * in_bytes;
    return out_buf.as<char>() + k * full_bytes + (s.op == Coll::all_gather ? own_block : 0);
  };
  auto output = [&](uint64_t k) {
    if (!setup.in_place) return out_buf.as<char>();
    return out_buf.as<char>() + k * full_bytes + (s.op == Coll::reduce_scatter ? own_block : 0);
  };
  // Every slot written before any call, its output too: fresh pages fault on their first
  // touch, and a call that met them would time the kernel zeroing pages, not the collective
  // (a 1 MB in-place all-gather spread over 64 MiB took 0.24 ms with its outputs untouched).
  ZB_RETURN_IF_ERROR(zero_bytes(out_buf.data(), kind, out_buf.bytes()));
  for (uint64_t k = 0; k < slots; ++k)
    ZB_RETURN_IF_ERROR(copy_bytes(input(k), kind, host_in.data(), MemKind::host, in_bytes));
  uint64_t call = 0;  // the slot of the next call is call % slots
  auto in_at = [&] { return input(call % slots); };
  auto out_at = [&] { return output(call++ % slots); };

  auto ours = [&] {
    const void* src = in_at();
    return issue(comm, s, src, out_at(), setup.group);
  };
  auto ours_done = [&] { return comm.synchronize(); };
  auto bare = [&] {
    const void* src = in_at();
    void* dst = out_at();
    return s.hier ? hier_all_reduce(comm, s, src, dst, true) : comm.bare(s.op, src, dst, s.count, s.dtype, setup.group);
  };
  auto bare_done = [&] { return comm.bare_synchronize(); };
  auto once = [&]() -> Status {
    ZB_RETURN_IF_ERROR(ours());
    return ours_done();
  };
  auto bare_once = [&]() -> Status {
    ZB_RETURN_IF_ERROR(bare());
    return bare_done();
  };
  // Ours, bare, bare, ours: a machine that drifts during the benchmark weighs on both alike,
  // so their ratio is the harness's own cost, not the drift.
  auto timed = [&](bool bare_side, Timing* t) {
    if (bare_side) return setup.batch ? run.batch(bare, bare_done, t) : run.per_iteration(bare_once, t);
    return setup.batch ? run.batch(ours, ours_done, t) : run.per_iteration(once, t);
  };
  // Every slot used kPrimeUses times before anything is timed, a pass at a time: with Open MPI's
  // shared-memory single copy a page another process reads costs more over its first two reads
  // (docs/measurements.md, "a spread sweep's first passes over its slots"), which a step's
  // long-used buffers no longer pay. The calls the log took count what was primed.
  const size_t before_priming = comm.traffic().size();
  for (uint64_t pass = 0; pass < kPrimeUses; ++pass) {
    for (uint64_t k = 0; k < slots; ++k) ZB_RETURN_IF_ERROR(ours());
    ZB_RETURN_IF_ERROR(ours_done());
  }
  out->primed_calls = double(comm.traffic().size() - before_priming) / (s.hier ? 3 : 1);
  Timing a1, b1, b2, a2;
  // The log starts empty for each benchmark, with room for all it will log (ours three times,
  // a fourth with --serial, a fifth idled, and the check), so the timed loop only appends.
  comm.traffic().clear();
  const int passes = 3 + int(setup.serial) + int(setup.serial && setup.serial_idle_s > 0);
  comm.traffic().reserve(size_t(s.hier ? 3 : 1) * size_t(passes * (driver.warmup() + driver.iterations()) + 1));
  // Against the bare call, one untimed run first: the first run timed at a new size was the
  // slow one here (median 1.023x the bare runs, against 1.012x for the last; 1.007x once a run
  // went before it: 150 runs, 4 KiB to 1 MiB, 2 ranks), which ours, bare, bare, ours would
  // charge to ours.
  if (setup.bare) {
    Timing settle;
    ZB_RETURN_IF_ERROR(timed(false, &settle));
  }
  // The node counters around the first timed run (its warm-up and timed iterations), and the
  // collectives the log holds for the same stretch.
  const size_t first_record = comm.traffic().size();
  NodeWindow window;
  const long faults_before = minor_faults();
  ZB_RETURN_IF_ERROR(measure_node_window(driver, [&] { return timed(false, &a1); }, &window));
  const long faults = minor_faults() - faults_before;
  std::vector<CollRecord> recs = comm.traffic().records();
  recs.erase(recs.begin(), recs.begin() + ptrdiff_t(first_record));
  const double window_iters = double(driver.warmup() + driver.iterations());
  if (setup.bare) {
    ZB_RETURN_IF_ERROR(timed(true, &b1));
    ZB_RETURN_IF_ERROR(timed(true, &b2));
    ZB_RETURN_IF_ERROR(timed(false, &a2));
  }
  if (setup.serial) {
    Timing serial;
    ZB_RETURN_IF_ERROR(run.batch(once, [] { return Status::ok(); }, &serial));
    out->serial_s = serial.mean_s;
  }
  if (setup.serial && setup.serial_idle_s > 0) {
    // Each rank idles alike, from the barrier every round starts with (Run::interleaved), so
    // what the median adds to serial_s is waking up: this rank's communication thread, the
    // peers' late by their own wake-up.
    auto idle = [&]() -> Status {
      std::this_thread::sleep_for(std::chrono::duration<double>(setup.serial_idle_s));
      return Status::ok();
    };
    std::vector<Timing> idled;
    ZB_RETURN_IF_ERROR(run.interleaved({{idle, once, nullptr}}, &idled));
    out->serial_idle_s = idled[0].median_s;
  }
  Timing t = a1;
  t.times.clear();
  if (setup.bare) t.mean_s = (a1.mean_s + a2.mean_s) / 2;
  run.report(t);

  // The check runs once more into a poisoned buffer, so a collective that wrote nothing
  // cannot pass on the previous iteration's result.
  if (setup.check) {
    call = 0;  // into the first slot, on the first slot's input
    host_elements(s.out_count, threads, [&](size_t begin, size_t end) {
      fill_poison(host_out.as<char>() + begin * esz, s.dtype, end - begin);
    });
    ZB_RETURN_IF_ERROR(copy_bytes(output(0), kind, host_out.data(), MemKind::host, out_bytes));
    // In place the timed calls left their results over the input: it is laid down again (an
    // all-gather's own block inside the poisoned output, the rest of which a peer must fill).
    if (setup.in_place) ZB_RETURN_IF_ERROR(copy_bytes(input(0), kind, host_in.data(), MemKind::host, in_bytes));
    ZB_RETURN_IF_ERROR(once());
    ZB_RETURN_IF_ERROR(copy_bytes(host_out.data(), MemKind::host, output(0), kind, out_bytes));
    out->wrong = driver.sum_over_ranks(double(count_wrong(s, host_out.data(), rank, n, threads)));
  }
  // The busiest rank's socket writes: a non-ring algorithm shows up as excess there.
  double measured = driver.max_over_ranks(a1.write_bytes);
  out->bytes = full_bytes;
  out->count = s.count;
  out->time_s = t.mean_s;
  out->bare_s = setup.bare ? (b1.mean_s + b2.mean_s) / 2 : NAN;
  out->wire_measured = setup.measurable && a1.write_bytes >= 0 ? measured : NAN;
  out->wire_formula = 0;
  for (const CollRecord& r : recs) out->wire_formula += ideal_wire_bytes(r.op, r.bytes(), r.ranks);
  out->wire_formula /= window_iters;
  const NodeBytes nb = ring_node_bytes(recs, driver.topology());
  out->inter_formula = driver.max_over_nodes(nb.inter) / window_iters;
  out->intra_formula = driver.max_over_nodes(nb.intra) / window_iters;
  out->inter_measured = window.inter / window_iters;
  out->intra_measured = setup.measurable ? window.intra / window_iters : NAN;
  out->page_faults = driver.max_over_ranks(double(faults)) / window_iters;
  out->footprint_bytes = double(slots * slot_bytes + (setup.in_place ? 0 : out_bytes));
  out->algbw = t.mean_s > 0 ? double(full_bytes) / t.mean_s / 1e9 : 0;
  out->busbw = out->algbw * busbw_factor(s.op, n);  // of the flat op it stands in for, when hier
  run.counter("ranks", n);
  run.counter("bytes", double(full_bytes));
  run.counter("algbw_GBps", out->algbw);
  run.counter("busbw_GBps", out->busbw);
  run.counter("wrong", out->wrong);
  run.counter("wire_bytes_formula", out->wire_formula);
  run.counter("wire_bytes_measured", out->wire_measured);
  run.counter("nodes", driver.topology().nodes);
  run.counter("ranks_per_node", driver.topology().local_size);
  run.counter("inter_node_bytes_formula", out->inter_formula);
  run.counter("inter_node_bytes_measured", out->inter_measured);
  run.counter("intra_node_bytes_formula", out->intra_formula);
  run.counter("intra_node_bytes_measured", out->intra_measured);
  run.counter("page_faults", out->page_faults);
  run.counter("footprint_bytes", out->footprint_bytes);
  run.counter("primed_calls", out->primed_calls);
  run.counter("bare_time_s", out->bare_s);
  run.counter("overhead_ratio", out->time_s / out->bare_s);
  // The bare call against itself (its second run over its first): how far the machine alone
  // moves a ratio of two runs here, the noise overhead_ratio is to be read against.
  run.counter("bare_repeat_ratio", setup.bare ? b2.mean_s / b1.mean_s : NAN);
  // Ours against itself (our run after the bare ones over our run before): a disturbance in one
  // of our two runs raises overhead_ratio and shows here, not in the bare call's repeat.
  run.counter("ours_repeat_ratio", setup.bare ? a2.mean_s / a1.mean_s : NAN);
  if (setup.serial) run.counter("serial_s", out->serial_s);
  if (setup.serial && setup.serial_idle_s > 0) run.counter("serial_idle_s", out->serial_idle_s);
  if (!setup.batch) {
    run.counter("p50_s", quantile_of(a1, a2, 0.5));
    run.counter("p99_s", quantile_of(a1, a2, 0.99));
  }
  return Status::ok();
}

}  // namespace zb
