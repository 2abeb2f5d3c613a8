// The MPI control plane: each round as non-blocking point-to-point messages to and from rank 0,
// polled against a deadline, so no wait of the driver's sits in an MPI call it cannot leave.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <thread>

#include "harness/comm/topology.h"
#include "harness/core/clock.h"
#include "harness/driver/control.h"

namespace zb {
namespace {

// Tags cycle through the range every MPI library allows; rounds are in lock step, so a
// message can only ever be one round ahead of the one being matched.
constexpr int kTags = 32768;

// Between polls: at once at first, then sleeps doubling up to a millisecond, so a round of
// a few bytes costs microseconds and a long wait costs no core (ranks may share cores).
class Backoff {
 public:
  void pause() {
    if (++polls_ < 64) return std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
    sleep_us_ = std::min(sleep_us_ * 2, 1000);
  }

 private:
  int polls_ = 0, sleep_us_ = 10;
};

class MpiControlPlane final : public ControlPlane {
 public:
  MpiControlPlane(MPI_Comm comm, int rank, int size, double timeout_s)
      : ControlPlane(timeout_s), comm_(comm), rank_(rank), size_(size) {}
  ~MpiControlPlane() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

 protected:
  Status round(const std::string& part, const Answer& answer, std::string* answer_out,
               const std::string& what) override {
    const int tag = int(rounds_++ % kTags);
    if (part.size() > size_t(INT_MAX))
      return Status::error(what + ": " + std::to_string(part.size()) +
                           " bytes is too many for one message");
    return rank_ == 0 ? hub(part, answer, answer_out, what, tag)
                      : peer(part, answer_out, what, tag);
  }

 private:
  // Starts receiving `from`'s message once its envelope is here (which gives its size), and
  // says whether it has been received whole.
  Status poll_receive(int from, int tag, std::string* into, MPI_Request* req, bool* done) {
    *done = false;
    if (*req == MPI_REQUEST_NULL) {
      int flag = 0;
      MPI_Status st;
      ZB_MPI_CHECK(MPI_Iprobe(from, tag, comm_, &flag, &st));
      if (!flag) return Status::ok();
      int count = 0;
      ZB_MPI_CHECK(MPI_Get_count(&st, MPI_BYTE, &count));
      into->assign(size_t(count), '\0');
      ZB_MPI_CHECK(MPI_Irecv(into->data(), count, MPI_BYTE, from, tag, comm_, req));
    }
    int flag = 0;
    ZB_MPI_CHECK(MPI_Test(req, &flag, MPI_STATUS_IGNORE));
    *done = flag != 0;
    return Status::ok();
  }

  Status hub(const std::string& part, const Answer& answer, std::string* answer_out,
             const std::string& what, int tag) {
    const double start = now_seconds();
    std::vector<std::string> parts(static_cast<size_t>(size_));
    parts[0] = part;
    std::vector<MPI_Request> reqs(size_t(size_), MPI_REQUEST_NULL);
    std::vector<bool> in(size_t(size_), false);
    in[0] = true;
    Backoff backoff;
    for (;;) {
      std::vector<int> missing;
      for (int r = 1; r < size_; ++r) {
        if (in[size_t(r)]) continue;
        bool done = false;
        ZB_RETURN_IF_ERROR(poll_receive(r, tag, &parts[size_t(r)], &reqs[size_t(r)], &done));
        in[size_t(r)] = done;
        if (!done) missing.push_back(r);
      }
      if (missing.empty()) break;
      if (now_seconds() - start > hub_deadline_s()) return late(what, hub_deadline_s(), missing);
      backoff.pause();
    }
    ZB_RETURN_IF_ERROR(answer(parts, answer_out));
    // Small answers leave at once; a large one waits for its receiver, as long as a round.
    for (int r = 1; r < size_; ++r)
      ZB_MPI_CHECK(MPI_Isend(answer_out->data(), int(answer_out->size()), MPI_BYTE, r, tag, comm_,
                             &reqs[size_t(r)]));
    for (;;) {
      std::vector<int> missing;
      for (int r = 1; r < size_; ++r) {
        int flag = 0;
        ZB_MPI_CHECK(MPI_Test(&reqs[size_t(r)], &flag, MPI_STATUS_IGNORE));
        if (!flag) missing.push_back(r);
      }
      if (missing.empty()) return Status::ok();
      if (now_seconds() - start > hub_deadline_s()) return late(what, hub_deadline_s(), missing);
      backoff.pause();
    }
  }

  Status peer(const std::string& part, std::string* answer_out, const std::string& what, int tag) {
    const double start = now_seconds();
    MPI_Request send = MPI_REQUEST_NULL, recv = MPI_REQUEST_NULL;
    ZB_MPI_CHECK(MPI_Isend(part.data(), int(part.size()), MPI_BYTE, 0, tag, comm_, &send));
    bool sent = false, answered = false;
    Backoff backoff;
    for (;;) {
      if (!sent) {
        int flag = 0;
        ZB_MPI_CHECK(MPI_Test(&send, &flag, MPI_STATUS_IGNORE));
        sent = flag != 0;
      }
      if (!answered) ZB_RETURN_IF_ERROR(poll_receive(0, tag, answer_out, &recv, &answered));
      if (sent && answered) return Status::ok();
      if (now_seconds() - start > peer_deadline_s()) return late(what, peer_deadline_s(), {0});
      backoff.pause();
    }
  }

  MPI_Comm comm_;
  int rank_, size_;
  uint64_t rounds_ = 0;
};

}  // namespace

Status make_mpi_control_plane(double timeout_s, std::unique_ptr<ControlPlane>* out) {
  MPI_Comm comm = MPI_COMM_NULL;
  ZB_RETURN_IF_ERROR(dup_comm(MPI_COMM_WORLD, &comm));
  int rank = 0, size = 1;
  ZB_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ZB_MPI_CHECK(MPI_Comm_size(comm, &size));
  *out = std::make_unique<MpiControlPlane>(comm, rank, size, timeout_s);
  return Status::ok();
}

}  // namespace zb
