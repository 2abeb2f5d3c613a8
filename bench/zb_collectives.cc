// zb_collectives: all_reduce, reduce_scatter and all_gather over a size sweep, checked
// element by element, with bus bandwidth and wire bytes ideal and measured.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "harness/driver.h"
#include "harness/sweep.h"
#include "harness/table.h"
#include "kernels/pattern.h"

namespace {

struct Options {
  std::vector<std::string> ops{"all_reduce", "reduce_scatter", "all_gather"};
  uint64_t min_bytes = 1024, max_bytes = 64ull << 20;
  double step_factor = 2;
  std::string dtype = "bf16", timing = "batch", progress = "caller";
  bool check = true, bare = true;
};

// One size of one op: buffers laid out so every rank's part is whole elements.
struct Shape {
  zb::Coll op;
  zb::DType dtype;
  uint64_t count;      // full buffer, elements (padded to a multiple of ranks for RS/AG)
  uint64_t in_count, out_count;
};

Shape shape_for(zb::Coll op, zb::DType dtype, uint64_t bytes, int ranks) {
  uint64_t elem = zb::dtype_size(dtype);
  uint64_t count = std::max<uint64_t>(1, (bytes + elem - 1) / elem);
  if (op != zb::Coll::all_reduce) count = (count + ranks - 1) / ranks * ranks;
  uint64_t block = count / uint64_t(ranks);
  switch (op) {
    case zb::Coll::all_reduce: return {op, dtype, count, count, count};
    case zb::Coll::reduce_scatter: return {op, dtype, count, count, block};
    case zb::Coll::all_gather: return {op, dtype, count, block, count};
  }
  return {};
}

// Fills this rank's input; the all-gather's block is its slice of the global index space.
void fill_input(const Shape& s, void* host, int rank, int ranks) {
  uint64_t first = s.op == zb::Coll::all_gather ? uint64_t(rank) * s.in_count : 0;
  zb::fill_pattern(host, s.dtype, s.in_count, rank, first, ranks);
}

uint64_t count_wrong(const Shape& s, const void* host, int rank, int ranks) {
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < s.out_count; ++i) {
    double expect = 0;
    if (s.op == zb::Coll::all_reduce) expect = zb::pattern_sum(i, ranks);
    else if (s.op == zb::Coll::reduce_scatter) expect = zb::pattern_sum(uint64_t(rank) * s.out_count + i, ranks);
    else expect = zb::pattern_value(int(i / s.in_count), i, ranks);
    wrong += zb::load_element(host, s.dtype, i) != expect;
  }
  return wrong;
}

zb::Status issue(zb::Communicator& comm, const Shape& s, const void* in, void* out) {
  switch (s.op) {
    case zb::Coll::all_reduce: return comm.all_reduce(in, out, s.count, s.dtype);
    case zb::Coll::reduce_scatter: return comm.reduce_scatter(in, out, s.out_count, s.dtype);
    case zb::Coll::all_gather: return comm.all_gather(in, out, s.in_count, s.dtype);
  }
  return zb::Status::ok();
}

// The p-quantile (nearest rank) of two runs' per-iteration times together.
double quantile(const zb::Timing& a, const zb::Timing& b, double p) {
  std::vector<double> all = a.times;
  all.insert(all.end(), b.times.begin(), b.times.end());
  if (all.empty()) return NAN;
  std::sort(all.begin(), all.end());
  size_t rank = size_t(std::ceil(p * double(all.size())));
  return all[std::min(all.size() - 1, rank > 0 ? rank - 1 : 0)];
}

struct Row {
  std::string op, type;
  uint64_t bytes, count, wrong;
  double time_us, bare_us, algbw, busbw, ideal, measured;
};

}  // namespace

int main(int argc, char** argv) {
  zb::Driver driver("zb_collectives",
                    "All-reduce, reduce-scatter and all-gather over a size sweep: time, algbw, "
                    "busbw, correctness, and wire bytes ideal and measured.");
  Options opt;
  auto& f = driver.flags();
  f.add_list("ops", &opt.ops, "collectives to run", {"all_reduce", "reduce_scatter", "all_gather"});
  f.add_bytes("min-bytes", &opt.min_bytes, "smallest full buffer (K, M, G suffixes)", 1);
  f.add_bytes("max-bytes", &opt.max_bytes, "largest full buffer", 1);
  f.add_double("step-factor", &opt.step_factor, "size multiplier between steps", 1.0, 1024);
  f.add_choice("dtype", &opt.dtype, "element type (sums in FP32, BF16 rounded to nearest even)",
               {"bf16", "fp32"});
  f.add_bool("check", &opt.check, "check every element of every size (--no-check to skip)");
  f.add_choice("timing", &opt.timing, "batch: --iters collectives back to back, one completion at "
               "the end (nccl-tests, IMB); per-iter: each completed and timed alone, with p50 and p99",
               {"batch", "per-iter"});
  f.add_choice("progress", &opt.progress, "mpi backend: caller runs each collective on the calling "
               "thread; thread hands it to the communication thread (what overlap uses)",
               {"caller", "thread"});
  f.add_bool("bare", &opt.bare, "also time the bare library call in the same run (overhead_ratio)");
  int code = driver.init(argc, argv);
  if (code >= 0) return code;
  if (opt.min_bytes > opt.max_bytes) {
    if (driver.root())
      std::fprintf(stderr, "zb_collectives: --min-bytes (%llu) is larger than --max-bytes (%llu)\n",
                   (unsigned long long)opt.min_bytes, (unsigned long long)opt.max_bytes);
    return 2;
  }

  zb::Communicator& comm = driver.comm();
  const int n = comm.size(), rank = comm.rank();
  zb::Status ps = comm.set_progress(opt.progress == "caller" ? zb::Progress::caller : zb::Progress::thread);
  if (!ps) driver.abort_job(ps);
  zb::DType dtype = zb::DType::bf16;
  zb::parse_dtype(opt.dtype, &dtype);
  std::string why_not;
  const bool measurable = zb::socket_transport(zb::backend_name(comm.backend()), n, &why_not);
  std::vector<Row> rows;

  for (const auto& op_name : opt.ops) {
    zb::Coll op = zb::Coll::all_reduce;
    zb::parse_coll(op_name, &op);
    for (uint64_t bytes : zb::size_sweep(opt.min_bytes, opt.max_bytes, opt.step_factor)) {
      Shape s = shape_for(op, dtype, bytes, n);
      uint64_t full_bytes = s.count * zb::dtype_size(dtype);
      std::string name = op_name + "/bytes:" + std::to_string(full_bytes) + "/dtype:" + opt.dtype;
      driver.add(name, [&, s, full_bytes, op_name](zb::Run& run) -> zb::Status {
        size_t esz = zb::dtype_size(s.dtype);
        zb::Buffer in, out, host_in, host_out;
        zb::MemKind kind = comm.mem_kind();
        ZB_RETURN_IF_ERROR(zb::Buffer::allocate(kind, s.in_count * esz, &in));
        ZB_RETURN_IF_ERROR(zb::Buffer::allocate(kind, s.out_count * esz, &out));
        ZB_RETURN_IF_ERROR(zb::Buffer::allocate(zb::MemKind::host, s.in_count * esz, &host_in));
        ZB_RETURN_IF_ERROR(zb::Buffer::allocate(zb::MemKind::host, s.out_count * esz, &host_out));
        fill_input(s, host_in.data(), rank, n);
        if (driver.faults().corrupt_rank == rank)
          zb::store_element(host_in.data(), s.dtype, s.in_count / 2, 1.0);  // off the pattern
        ZB_RETURN_IF_ERROR(zb::copy_bytes(in.data(), kind, host_in.data(), zb::MemKind::host, s.in_count * esz));

        auto ours = [&] { return issue(comm, s, in.data(), out.data()); };
        auto ours_done = [&] { return comm.synchronize(); };
        auto bare = [&] { return comm.bare(s.op, in.data(), out.data(), s.count, s.dtype); };
        auto bare_done = [&] { return comm.bare_synchronize(); };
        auto once = [&]() -> zb::Status {
          ZB_RETURN_IF_ERROR(ours());
          return ours_done();
        };
        auto bare_once = [&]() -> zb::Status {
          ZB_RETURN_IF_ERROR(bare());
          return bare_done();
        };
        // Ours, bare, bare, ours: a machine that drifts during the benchmark weighs on both
        // alike, so their ratio is the harness's own cost, not the drift.
        const bool batch = opt.timing == "batch";
        auto timed = [&](bool bare_side, zb::Timing* t) {
          if (bare_side) return batch ? run.batch(bare, bare_done, t) : run.per_iteration(bare_once, t);
          return batch ? run.batch(ours, ours_done, t) : run.per_iteration(once, t);
        };
        zb::Timing a1, b1, b2, a2;
        ZB_RETURN_IF_ERROR(timed(false, &a1));
        if (opt.bare) {
          ZB_RETURN_IF_ERROR(timed(true, &b1));
          ZB_RETURN_IF_ERROR(timed(true, &b2));
          ZB_RETURN_IF_ERROR(timed(false, &a2));
        }
        zb::Timing t = a1;
        t.times.clear();
        if (opt.bare) t.mean_s = (a1.mean_s + a2.mean_s) / 2;
        const double bare_s = opt.bare ? (b1.mean_s + b2.mean_s) / 2 : NAN;
        run.report(t);

        // The check runs once more into a poisoned buffer, so a collective that wrote
        // nothing cannot pass on the previous iteration's result.
        double wrong = 0;
        if (opt.check) {
          zb::fill_poison(host_out.data(), s.dtype, s.out_count);
          ZB_RETURN_IF_ERROR(zb::copy_bytes(out.data(), kind, host_out.data(), zb::MemKind::host, s.out_count * esz));
          ZB_RETURN_IF_ERROR(once());
          ZB_RETURN_IF_ERROR(zb::copy_bytes(host_out.data(), zb::MemKind::host, out.data(), kind, s.out_count * esz));
          wrong = driver.sum_over_ranks(double(count_wrong(s, host_out.data(), rank, n)));
        }
        // The busiest rank's socket writes: a non-ring algorithm shows up as excess there.
        double measured = driver.max_over_ranks(a1.write_bytes);
        if (!measurable || a1.write_bytes < 0) measured = NAN;
        double ideal = zb::ideal_wire_bytes(s.op, full_bytes, n);
        double algbw = t.mean_s > 0 ? double(full_bytes) / t.mean_s / 1e9 : 0;
        double busbw = algbw * zb::busbw_factor(s.op, n);
        run.counter("ranks", n);
        run.counter("bytes", double(full_bytes));
        run.counter("algbw_GBps", algbw);
        run.counter("busbw_GBps", busbw);
        run.counter("wrong", wrong);
        run.counter("wire_bytes_ideal", ideal);
        run.counter("wire_bytes_measured", measured);
        run.counter("bare_time_s", bare_s);
        run.counter("overhead_ratio", t.mean_s / bare_s);
        if (!batch) {
          run.counter("p50_s", quantile(a1, a2, 0.5));
          run.counter("p99_s", quantile(a1, a2, 0.99));
        }
        if (wrong > 0)
          driver.mark_failed(op_name + " of " + std::to_string(full_bytes) + " bytes: " +
                             zb::fmt(wrong, 0) + " wrong elements");
        rows.push_back({op_name, opt.dtype, full_bytes, s.count, uint64_t(wrong),
                        t.mean_s * 1e6, bare_s * 1e6, algbw, busbw, ideal, measured});
        return zb::Status::ok();
      });
    }
  }

  code = driver.run();
  if (driver.root() && !rows.empty()) {
    zb::Table table({"op", "size(B)", "count(elts)", "type", "time(us)", "bare(us)", "overhead",
                     "algbw(GB/s)", "busbw(GB/s)", "wrong", "wire ideal(B)", "wire measured(B)"});
    double busbw_sum = 0;
    uint64_t wrong_total = 0;
    for (const auto& r : rows) {
      table.add_row({r.op, std::to_string(r.bytes), std::to_string(r.count), r.type,
                     zb::fmt(r.time_us, 1), zb::fmt(r.bare_us, 1), zb::fmt(r.time_us / r.bare_us, 3),
                     zb::fmt(r.algbw, 3), zb::fmt(r.busbw, 3), std::to_string(r.wrong),
                     zb::fmt(r.ideal, 0), zb::fmt(r.measured, 0)});
      busbw_sum += r.busbw;
      wrong_total += r.wrong;
    }
    std::printf("\n# zb_collectives: %d ranks, backend %s, %s, timing %s, progress %s\n", n,
                zb::backend_name(comm.backend()), comm.library_version().c_str(), opt.timing.c_str(),
                opt.progress.c_str());
    table.print(stdout);
    std::printf("# Wrong elements       : %s\n",
                wrong_total == 0 ? "0 OK" : (std::to_string(wrong_total) + " FAILED").c_str());
    std::printf("# Avg bus bandwidth    : %s GB/s\n", zb::fmt(busbw_sum / double(rows.size()), 3).c_str());
    if (!measurable)
      std::printf("# wire measured: n/a: %s\n", why_not.c_str());
    else
      std::printf("# wire measured: bytes written to sockets per iteration (/proc/self/io wchar), busiest rank\n");
  }
  return code;
}
