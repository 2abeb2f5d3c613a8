// Where a prediction and a measured step part: every collective, wait and compute of the
// predicted step lined up against the same one in the measured step's trace (zb_zero
// --trace), and the differences summed by cause, largest first (zb_predict --explain).
#pragma once

#include <string>
#include <vector>

#include "harness/core/status.h"
#include "harness/predict/simulate.h"

namespace zb {

// One rank's step from a zb_zero (or zb_pipeline) Chrome trace, seconds from its origin.
struct MeasuredStep {
  int rank = 0;
  bool comm_only = false;  // the round with communication alone (zb_zero --trace-round=comm)
  double exposed_s = 0;  // the rank's own total (its process args' exposed_us)
  struct Compute {
    std::string name;  // "forward L3", "backward L3", "optimizer U0"
    double start_s, end_s;
  };
  struct Coll {
    std::string name;
    int64_t log = -1;
    double issue_s, start_s, end_s, bytes;
    bool in_place = false;  // its result over its input (CollRecord::in_place)
  };
  struct Wait {
    int64_t awaits = -1;  // log entry
    double start_s, end_s, skew_s = 0;
    int late_rank = -1;
  };
  std::vector<Compute> compute;  // in program order
  std::vector<Coll> colls;       // in issue order
  std::vector<Wait> waits;       // in program order, a wait's two parts joined
};

// The rank of `path` that waited longest (the one exposed_comm_s reports), or `rank` >= 0.
Status read_measured_step(const std::string& path, int rank, MeasuredStep* out);

// Measured minus predicted, each summed over the step, in seconds.
struct Explanation {
  double exposed_predicted_s = 0, exposed_measured_s = 0;
  double compute_s = 0;     // compute the replay leaves out or times otherwise
  double collective_s = 0;  // collectives longer on the stream than the sweep says
  double late_start_s = 0;  // collectives that started after they could have (peers, the thread)
  double skew_s = 0;        // waits until a late rank had issued, beyond the replay's skew_wait_s
  double handoff_s = 0;     // blocked waits woken later after their collective than modelled
  std::string table;        // every collective and wait, predicted beside measured
  std::string causes;       // one line: the largest differences, named
};
// `predicted` is the slowest rank's timeline; `whole` (optional) the replay's totals, whose
// exposed and skew waits are the rank that waits longest (RankSkew), as the measured rank is.
Explanation explain(const std::vector<OpTiming>& predicted, const MeasuredStep& measured, double handoff_s,
                    const StepPrediction* whole = nullptr);

}  // namespace zb
