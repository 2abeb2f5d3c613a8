// zb_collectives: all_reduce, reduce_scatter, all_gather (and all_to_all on request) over a
// size sweep, checked element by element, held against the bare library call, with bus
// bandwidth and wire bytes by the ring formula and measured.
#include <algorithm>
#include <cstdio>

#include "bench/collectives_bench.h"
#include "harness/driver/driver.h"
#include "harness/driver/sweep.h"
#include "harness/driver/table.h"

namespace {

enum class Placement { out, in };

struct Options {
  std::vector<zb::CollOp> ops{{zb::Coll::all_reduce}, {zb::Coll::reduce_scatter}, {zb::Coll::all_gather}};
  uint64_t min_bytes = 1024, max_bytes = 64ull << 20;
  double step_factor = 2;
  zb::DType dtype = zb::DType::bf16;
  bool batch = true, check = true, bare = true, serial = false, node_groups = false;
  double serial_idle_us = 0;
  std::vector<uint64_t> footprints{0};      // 0: one buffer
  std::vector<uint64_t> gather_footprints;  // more, for the all-gathers alone
  std::vector<zb::CollOp> footprint_ops;  // empty: every op
  zb::Progress progress = zb::Progress::caller;
  std::vector<zb::Group> groups{zb::Group::world};
  std::vector<Placement> placements{Placement::out};
};

struct Row {
  std::string op;  // "all_reduce", "all_reduce in place"
  zb::CollResult r;
};

void print_table(const std::vector<Row>& rows, zb::DType dtype) {
  zb::Table table({"op", "size(B)", "count(elts)", "type", "time(us)", "bare(us)", "overhead",
                   "algbw(GB/s)", "busbw(GB/s)", "wrong", "wire formula(B)", "wire measured(B)",
                   "inter-node formula(B)", "measured(B)"});
  double busbw_sum = 0, wrong = 0;
  for (const auto& [op, r] : rows) {
    table.add_row({op, std::to_string(r.bytes), std::to_string(r.count), zb::dtype_name(dtype),
                   zb::fmt(r.time_s * 1e6, 1), zb::fmt(r.bare_s * 1e6, 1), zb::fmt(r.time_s / r.bare_s, 3),
                   zb::fmt(r.algbw, 3), zb::fmt(r.busbw, 3), zb::fmt(r.wrong, 0), zb::fmt(r.wire_formula, 0),
                   zb::fmt(r.wire_measured, 0), zb::fmt(r.inter_formula, 0), zb::fmt(r.inter_measured, 0)});
    busbw_sum += r.busbw;
    wrong += r.wrong;
  }
  table.print(stdout);
  // What the elements said, not the exit code: a results file that failed to write is not a
  // wrong element, and says so on its own line.
  std::printf("# Wrong elements       : %s\n", wrong == 0 ? "0 OK" : (zb::fmt(wrong, 0) + " FAILED").c_str());
  std::printf("# Avg bus bandwidth    : %s GB/s\n", zb::fmt(busbw_sum / double(rows.size()), 3).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  zb::Driver driver("zb_collectives",
                    "All-reduce, reduce-scatter and all-gather over a size sweep: time, algbw, "
                    "busbw, correctness, and wire bytes by the ring formula and measured.");
  Options opt;
  auto& f = driver.flags();
  f.add_list("ops", &opt.ops, "collectives to run; all_to_all: every rank a block to every rank (MPI_Alltoall, "
             "NCCL send/receive pairs); hier_all_reduce: reduce-scatter within each node, all-reduce across "
             "nodes, all-gather within the node", zb::coll_op_choices());
  f.add_bytes("min-bytes", &opt.min_bytes, "smallest full buffer (K, M, G suffixes)", 1);
  f.add_bytes("max-bytes", &opt.max_bytes, "largest full buffer", 1);
  f.add_double("step-factor", &opt.step_factor, "size multiplier between steps", 1.0, 1024);
  f.add_choice("dtype", &opt.dtype, "element type (sums in FP32, BF16 rounded to nearest even)",
               zb::dtype_choices());
  f.add_bool("check", &opt.check, "check every element of every size (--no-check to skip)");
  f.add_choice("timing", &opt.batch, "batch: --iters collectives back to back, one completion at "
               "the end (nccl-tests, IMB); per-iter: each completed and timed alone, with p50 and p99",
               zb::Choices<bool>{{"batch", true}, {"per-iter", false}});
  f.add_choice("progress", &opt.progress, "mpi backend: caller runs each collective on the calling "
               "thread; thread hands it to the communication thread (what overlap uses)",
               zb::Choices<zb::Progress>{{"caller", zb::Progress::caller}, {"thread", zb::Progress::thread}});
  f.add_bool("bare", &opt.bare, "also time the bare library call in the same run (overhead_ratio)");
  f.add_bool("serial", &opt.serial, "also time each collective completed before the next is issued, the "
             "whole timed once (serial_s): what a step waiting for each one pays, hand-off included; "
             "zb_predict prices a wait that blocks from it");
  f.add_double("serial-idle-us", &opt.serial_idle_us, "with --serial, also time each collective issued after "
               "this many microseconds idle, as after a layer's compute (serial_idle_s, the median): what waking "
               "the communication thread and the cores adds; zb_predict charges it to a collective issued to "
               "an idle stream (default 0: not timed)", 0, 1e6);
  f.add_bytes_list("footprint", &opt.footprints, "spread each size's calls over buffers of at least this many "
                   "bytes in all, each call the next part (0: the same buffers every call, as nccl-tests does): a "
                   "step's collectives each find their own data in the caches, not the last call's. Out of place "
                   "only the inputs are spread: the output is one buffer every call reuses, as a step's gathers "
                   "into its transient buffers. A list (0,16M) times each op at each; names gain /footprint:B "
                   "where B is above 0");
  f.add_bytes_list("gather-footprint", &opt.gather_footprints, "further footprints for the all-gathers alone, "
                   "after --footprint's (default: none): z1's and z2's gathers into their whole weights meet the "
                   "gradients as well as the weights between two uses of a layer, hpz's read each block once a "
                   "step, and zb_predict prices a gather at its reuse distance, between the footprints swept");
  f.add_list("footprint-ops", &opt.footprint_ops, "the ops --footprint spreads; the others reuse one buffer "
             "(default: every op). A step's gathers read weights last touched a step before, its reductions "
             "gradients the backward has just written (in the round with communication alone, none wrote them)",
             zb::coll_op_choices());
  f.add_list("groups", &opt.groups, "the ranks each collective runs over: world, node (each node's ranks) or "
             "cross (the ranks at one place on every node); names gain /group:G beyond world",
             zb::Choices<zb::Group>{{"world", zb::Group::world}, {"node", zb::Group::node}, {"cross", zb::Group::cross}});
  f.add_list("placement", &opt.placements, "out: the result in a buffer of its own (nccl-tests' out-of-place); "
             "in: over the input, as a step's buckets reduce (nccl-tests' in-place: a reduce-scatter into the "
             "rank's block of its input, an all-gather from the rank's block of its output), where a library "
             "may skip a copy; names gain /placement:in; all_reduce, reduce_scatter and all_gather only",
             zb::Choices<Placement>{{"out", Placement::out}, {"in", Placement::in}});
  f.add_bool("node-groups", &opt.node_groups, "where the ranks span several nodes, also sweep the node and cross "
             "groups (what zb_predict prices hsdp, hpz and the quantized passes from); nothing more on one node");
  driver.use_reference_collective();  // zb_predict holds the steps' against it
  int code = driver.parse(argc, argv);
  if (code >= 0) return code;
  if (opt.min_bytes > opt.max_bytes)
    return driver.bad_flag(zb::Status::error("--min-bytes (" + std::to_string(opt.min_bytes) +
                                             ") is larger than --max-bytes (" + std::to_string(opt.max_bytes) + ")"));
  if (opt.serial_idle_us > 0 && !opt.serial)
    return driver.bad_flag(zb::Status::error("--serial-idle-us times the --serial collectives after idling; "
                                             "add --serial"));
  for (uint64_t b : opt.gather_footprints)
    if (b == 0 || std::find(opt.footprints.begin(), opt.footprints.end(), b) != opt.footprints.end())
      return driver.bad_flag(zb::Status::error("--gather-footprint=" + std::to_string(b) + ": each is a footprint "
                                               "above 0 that --footprint does not already time"));
  driver.set_thread_progress(opt.progress == zb::Progress::thread);
  code = driver.start();
  if (code >= 0) return code;

  zb::Communicator& comm = driver.comm();
  const int n = comm.size();
  if (opt.node_groups && driver.topology().nodes > 1)
    for (zb::Group g : {zb::Group::node, zb::Group::cross})
      if (std::find(opt.groups.begin(), opt.groups.end(), g) == opt.groups.end()) opt.groups.push_back(g);
  for (const zb::CollOp& op : opt.ops)
    if (op.hier && !driver.topology().uniform())
      // Each node would pad to its own S, and the ranks would disagree on the buffer.
      return driver.bad_flag(zb::Status::error("--ops=hier_all_reduce needs the same number of ranks on every "
                                               "node; these nodes differ (see --ranks-per-node)"));
  zb::Status s = comm.set_progress(opt.progress);
  if (!s) driver.abort_job(s);
  std::string why_not;
  const bool measurable = zb::socket_transport(zb::backend_name(comm.backend()), n, &why_not);
  std::vector<Row> rows;
  auto spread = [&](const zb::CollOp& op) {
    return opt.footprint_ops.empty() ||
           std::find(opt.footprint_ops.begin(), opt.footprint_ops.end(), op) != opt.footprint_ops.end();
  };

  for (zb::Group group : opt.groups)
    for (Placement placement : opt.placements)
      for (zb::CollOp op : opt.ops) {
        const bool in_place = placement == Placement::in;
        if (op.hier && group != zb::Group::world) continue;  // it picks its own groups
        if (in_place && (op.hier || op.op == zb::Coll::all_to_all)) continue;  // no in-place form here
        std::vector<uint64_t> footprints = spread(op) ? opt.footprints : std::vector<uint64_t>{0};
        if (spread(op) && op.op == zb::Coll::all_gather)
          footprints.insert(footprints.end(), opt.gather_footprints.begin(), opt.gather_footprints.end());
        for (uint64_t footprint : footprints) {
          for (uint64_t bytes : zb::size_sweep(opt.min_bytes, opt.max_bytes, opt.step_factor)) {
            zb::CollSetup setup{op.op, op.hier, group, opt.dtype, bytes, opt.batch, opt.bare, opt.check, measurable,
                                opt.serial, opt.serial_idle_us * 1e-6, footprint, in_place};
            const int pad_ranks = op.hier ? comm.group_size(zb::Group::node) : comm.group_size(group);
            const uint64_t full_bytes =
                zb::padded_count(op.op, opt.dtype, bytes, pad_ranks, op.hier) * zb::dtype_size(opt.dtype);
            const std::string group_part =
                group == zb::Group::world ? "" : std::string("/group:") + zb::group_name(group);
            const std::string name = std::string(zb::coll_op_name(op)) + "/bytes:" + std::to_string(full_bytes) +
                                     "/dtype:" + zb::dtype_name(opt.dtype) + group_part +
                                     (in_place ? "/placement:in" : "") +
                                     (footprint > 0 ? "/footprint:" + std::to_string(footprint) : "");
            const std::string label = std::string(zb::coll_op_name(op)) + (in_place ? " in place" : "") +
                                      (footprint > 0 ? " spread" : "");
            driver.add(name, [&, setup, name, label](zb::Run& run) -> zb::Status {
              zb::CollResult r;
              ZB_RETURN_IF_ERROR(zb::run_collective_benchmark(run, setup, &r));
              if (r.wrong > 0) driver.mark_failed(name + ": " + zb::fmt(r.wrong, 0) + " wrong elements");
              rows.push_back({label, r});
              return zb::Status::ok();
            });
          }
        }
      }

  code = driver.run();
  if (driver.root() && !rows.empty()) {
    std::printf("\n# zb_collectives: %d ranks, backend %s, %s, timing %s, progress %s\n", n,
                zb::backend_name(comm.backend()), comm.library_version().c_str(),
                opt.batch ? "batch" : "per-iter", opt.progress == zb::Progress::caller ? "caller" : "thread");
    print_table(rows, opt.dtype);
    if (!measurable)
      std::printf("# wire measured: n/a: %s\n", why_not.c_str());
    else
      std::printf("# wire measured: bytes written to sockets per iteration (/proc/self/io wchar), busiest rank\n");
  }
  return code;
}
