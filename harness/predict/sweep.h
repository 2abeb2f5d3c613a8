// A zb_collectives results file read as the predictor needs it: one model per collective, dtype
// and group (world, or a node-aware group), and the rank count it was measured at.
#pragma once

#include <map>
#include <string>
#include <tuple>

#include "harness/comm/traffic.h"
#include "harness/predict/coll_model.h"

namespace zb {

class Sweep {
 public:
  // Google Benchmark JSON of zb_collectives: names op/bytes:B/dtype:D[/group:G]; each time
  // (real_time, serial_s) is the fastest of the file's repetitions.
  static Status load(const std::string& path, Sweep* out);

  int ranks() const { return ranks_; }
  // Settings the sweep ran with ("batch"/"per-iter", "caller"/"thread"), from its context.
  const std::string& description() const { return description_; }
  // nullptr when the sweep has no such collective.
  const CollModel* find(Coll op, DType dtype, const std::string& group = "world") const;
  // What a wait that blocks on this collective costs beyond its end: the median over the swept
  // sizes of (serial_s - the back-to-back time), each its fastest repetition, clamped at 0. The
  // hand-off back to a waiting thread does not grow with the size, and one size's difference
  // of two noisy times is noise; the median over sizes is not. 0 when the sweep was run
  // without --serial.
  double handoff_s(Coll op, DType dtype, const std::string& group = "world") const;

 private:
  int ranks_ = 0;
  std::string description_;
  std::map<std::tuple<int, int, std::string>, CollModel> models_;
  std::map<std::tuple<int, int, std::string>, double> handoff_;
};

}  // namespace zb
