// The TCP control plane of an environment launch: rank 0 listens at the rendezvous address,
// every other rank connects and says who it is, and rank 0 welcomes them once all have come.
// A round is each rank's part to rank 0 and rank 0's answer back on those connections. No MPI.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "harness/core/clock.h"
#include "harness/core/parse.h"
#include "harness/driver/control.h"
#include "harness/driver/tcp_link.h"

namespace zb {
namespace {

// A hello is its fields joined by NUL, which no environment variable can hold: the rank, the
// world size, the job's id, the host.
std::string join0(const std::vector<std::string>& fields) {
  std::string out;
  for (const std::string& f : fields) out += f + '\0';
  return out;
}

std::vector<std::string> split0(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t nul; (nul = text.find('\0', at)) != std::string::npos; at = nul + 1)
    out.push_back(text.substr(at, nul - at));
  return out;
}

// "1", "1, 3", "1, 2, 3, 4, 5, 6, 7, 8 and 9 more"
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 8) out += " and " + std::to_string(ranks.size() - 8) + " more";
  return out;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// Refusals: 'R' another job's rendezvous (the peer tries again: its own rank 0 comes later),
// 'F' a contradiction (the peer ends, exit 2).
constexpr char kRetry = 'R', kFatal = 'F';

class TcpControlPlane final : public ControlPlane {
 public:
  TcpControlPlane(const Launch& launch, double timeout_s) : ControlPlane(timeout_s), launch_(launch) {}
  ~TcpControlPlane() override {
    if (listener_ >= 0) close(listener_);
  }
  int rank() const override { return launch_.rank; }
  int size() const override { return launch_.size; }
  std::string local_address() const override { return address_; }

  Status rendezvous(bool* contradiction) {
    if (size() == 1) {
      address_ = "127.0.0.1";
      return Status::ok();
    }
    return rank() == 0 ? hub_rendezvous(contradiction) : peer_rendezvous(contradiction);
  }

  void abort() override {
    const double by = now_seconds() + 0.5;
    for (auto& p : peers_)
      if (p) p->write({FrameType::abort, rounds_, ""}, by);  // best effort: the job ends anyway
  }

  bool ended_by_rank_0() override {
    if (!ended_ && hub_) {
      Frame f;
      bool complete = false;
      ended_ = hub_->read(&f, &complete) && complete && f.type == FrameType::abort;
    }
    return ended_;
  }

 protected:
  Status round(const std::string& part, const Answer& answer, std::string* answer_out,
               const std::string& what) override {
    const uint64_t r = rounds_++;
    if (size() == 1) return answer({part}, answer_out);
    return rank() == 0 ? hub_round(part, answer, answer_out, what, r) : peer_round(part, answer_out, what, r);
  }

 private:
  Status hub_rendezvous(bool* contradiction);
  Status peer_rendezvous(bool* contradiction);
  Status hub_round(const std::string& part, const Answer& answer, std::string* answer_out,
                   const std::string& what, uint64_t r);
  Status peer_round(const std::string& part, std::string* answer_out, const std::string& what, uint64_t r);
  std::string where() const { return "the rendezvous at " + launch_.address(); }

  Launch launch_;
  int listener_ = -1;
  std::vector<std::unique_ptr<Link>> peers_;  // rank 0: one per rank (none for itself)
  std::unique_ptr<Link> hub_;                 // the others: to rank 0
  std::string address_;
  uint64_t rounds_ = 0;
  bool ended_ = false;
};

Status TcpControlPlane::hub_rendezvous(bool* contradiction) {
  const double deadline = now_seconds() + timeout_s();
  ZB_RETURN_IF_ERROR(listen_on(launch_.port, &listener_).context("rank 0: " + where()));
  peers_.resize(size_t(size()));
  std::vector<std::unique_ptr<Link>> pending;  // connected, hello not read yet
  std::vector<std::string> from(static_cast<size_t>(size()));
  int arrived = 1;
  auto refuse = [&](Link& l, char kind, const std::string& why) {
    l.write({FrameType::refuse, 0, std::string(1, kind) + why}, now_seconds() + 0.5);
  };
  while (arrived < size()) {
    while (auto l = accept_from(listener_)) pending.push_back(std::move(l));
    for (size_t i = 0; i < pending.size();) {
      Frame f;
      bool complete = false;
      Status s = pending[i]->read(&f, &complete);
      if (s && !complete) {
        ++i;
        continue;
      }
      std::unique_ptr<Link> l = std::move(pending[i]);
      pending.erase(pending.begin() + long(i));
      std::vector<std::string> fields = split0(f.payload);
      int64_t r = -1, n = -1;
      if (!s || f.type != FrameType::hello || fields.size() != 4 || !parse_int(fields[0], &r) ||
          !parse_int(fields[1], &n))
        continue;  // gone, or a stranger
      if (fields[2] != launch_.id) {
        refuse(*l, kRetry, "another job's rendezvous (its id '" + launch_.id + "', yours '" + fields[2] + "')");
        continue;
      }
      std::string bad;
      if (n != size())
        bad = "rank " + std::to_string(r) + " (" + l->peer_address() + ") says the job has " +
              std::to_string(n) + " ranks, rank 0 says " + std::to_string(size());
      else if (r < 1 || r >= size() || peers_[size_t(r)])
        bad = "two processes say they are rank " + std::to_string(r) + " (from " +
              (r >= 1 && r < size() ? from[size_t(r)] : "rank 0's own") + " and " + l->peer_address() + ")";
      if (!bad.empty()) {
        refuse(*l, kFatal, "rank 0 refused it: " + bad);
        abort();
        *contradiction = true;
        return Status::error("rank 0: " + where() + ": " + bad);
      }
      from[size_t(r)] = l->peer_address() + " (" + fields[3] + ")";
      peers_[size_t(r)] = std::move(l);
      ++arrived;
    }
    if (arrived == size()) break;
    if (now_seconds() > deadline) {
      std::vector<int> missing;
      for (int q = 1; q < size(); ++q)
        if (!peers_[size_t(q)]) missing.push_back(q);
      abort();  // the ranks that came leave quietly: this line is the job's
      return Status::error("timeout: rank 0: " + where() + " did not complete within " +
                           seconds(timeout_s()) + " s: " + std::to_string(arrived) + " of " +
                           std::to_string(size()) + " ranks arrived (rank" +
                           (missing.size() > 1 ? "s " : " ") + rank_list(missing) + " had not)");
    }
    std::vector<int> fds{listener_};
    for (auto& l : pending) fds.push_back(l->fd());
    std::vector<bool> ready;
    ZB_RETURN_IF_ERROR(wait_readable(fds, deadline, &ready));
  }
  close(listener_);  // the next job on this address may listen again
  listener_ = -1;
  for (int q = 1; q < size(); ++q)
    ZB_RETURN_IF_ERROR(peers_[size_t(q)]->write({FrameType::welcome, 0, ""}, deadline + 1)
                           .context("rank 0: " + where() + ": welcoming rank " + std::to_string(q)));
  address_ = peers_[1]->local_address();
  return Status::ok();
}

Status TcpControlPlane::peer_rendezvous(bool* contradiction) {
  const double start = now_seconds(), reach_by = start + timeout_s(), welcome_by = start + peer_deadline_s();
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  const std::string hello = join0({std::to_string(rank()), std::to_string(size()), launch_.id, host});
  const std::string me = "rank " + std::to_string(rank()) + ": ";
  for (;;) {
    Status s = connect_to(launch_.host, launch_.port, reach_by, &hub_);
    if (!s)
      return Status::error("timeout: " + me + "could not reach " + where() + " within " +
                           seconds(timeout_s()) + " s (" + s.message() + ")");
    s = hub_->write({FrameType::hello, 0, hello}, welcome_by);
    Frame f;
    bool complete = false;
    while (s && !complete && now_seconds() < welcome_by) {
      std::vector<bool> ready;
      s = wait_readable({hub_->fd()}, welcome_by, &ready);
      if (s) s = hub_->read(&f, &complete);
    }
    if (s && complete && f.type == FrameType::welcome) {
      address_ = hub_->local_address();
      return Status::ok();
    }
    if (s && complete && f.type == FrameType::abort) {
      ended_ = true;
      return Status::error(me + "rank 0 ended the job during " + where());
    }
    if (s && complete && f.type == FrameType::refuse && !f.payload.empty() && f.payload[0] == kFatal) {
      *contradiction = true;
      return Status::error(me + where() + ": " + f.payload.substr(1));
    }
    if (s && !complete)
      return Status::error("timeout: " + me + where() + " did not complete within " +
                           seconds(peer_deadline_s()) + " s: rank 0 did not welcome this rank");
    // Another job's rank 0, or one that went away: again, until this rank's time is up.
    hub_.reset();
    if (now_seconds() + 0.1 > reach_by)
      return Status::error("timeout: " + me + "could not reach " + where() + " within " +
                           seconds(timeout_s()) + " s (" +
                           (s ? f.payload.substr(std::min<size_t>(1, f.payload.size())) : s.message()) + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Status TcpControlPlane::hub_round(const std::string& part, const Answer& answer, std::string* answer_out,
                                  const std::string& what, uint64_t r) {
  const double deadline = now_seconds() + hub_deadline_s();
  std::vector<std::string> parts(static_cast<size_t>(size()));
  std::vector<bool> in(size_t(size()), false);
  parts[0] = part;
  in[0] = true;
  for (;;) {
    std::vector<int> missing, fds;
    for (int q = 1; q < size(); ++q) {
      if (in[size_t(q)]) continue;
      Frame f;
      bool complete = false;
      Status s = peers_[size_t(q)]->read(&f, &complete);
      if (s && complete && (f.type != FrameType::part || f.round != r))
        s = Status::error("it sent what the round did not expect");
      if (!s)
        return Status::error("rank 0: rank " + std::to_string(q) + " left the job (" + s.message() +
                             ") during " + what);
      if (complete) {
        parts[size_t(q)] = std::move(f.payload);
        in[size_t(q)] = true;
      } else {
        missing.push_back(q);
        fds.push_back(peers_[size_t(q)]->fd());
      }
    }
    if (missing.empty()) break;
    if (now_seconds() > deadline) return late(what, hub_deadline_s(), missing);
    std::vector<bool> ready;
    ZB_RETURN_IF_ERROR(wait_readable(fds, deadline, &ready));
  }
  ZB_RETURN_IF_ERROR(answer(parts, answer_out));
  for (int q = 1; q < size(); ++q) {
    Status s = peers_[size_t(q)]->write({FrameType::answer, r, *answer_out}, deadline + 1);
    if (!s)
      return Status::error("rank 0: rank " + std::to_string(q) + " left the job (" + s.message() +
                           ") during " + what);
  }
  return Status::ok();
}

Status TcpControlPlane::peer_round(const std::string& part, std::string* answer_out, const std::string& what,
                                   uint64_t r) {
  const double deadline = now_seconds() + peer_deadline_s();
  const std::string me = "rank " + std::to_string(rank()) + ": ";
  Status s = hub_->write({FrameType::part, r, part}, deadline);
  Frame f;
  bool complete = false;
  while (s && !complete) {
    if (now_seconds() > deadline) return late(what, peer_deadline_s(), {0});
    std::vector<bool> ready;
    s = wait_readable({hub_->fd()}, deadline, &ready);
    if (s) s = hub_->read(&f, &complete);
  }
  if (s && f.type == FrameType::abort) {
    ended_ = true;
    return Status::error(me + "rank 0 ended the job during " + what);
  }
  if (s && (f.type != FrameType::answer || f.round != r)) s = Status::error("it sent what the round did not expect");
  if (!s) return Status::error(me + "rank 0's connection failed (" + s.message() + ") during " + what);
  *answer_out = std::move(f.payload);
  return Status::ok();
}

}  // namespace

Status make_tcp_control_plane(const Launch& launch, double timeout_s, std::unique_ptr<ControlPlane>* out,
                              bool* contradiction) {
  *contradiction = false;
  auto plane = std::make_unique<TcpControlPlane>(launch, timeout_s);
  Status s = plane->rendezvous(contradiction);
  *out = std::move(plane);  // even after a failure: it says whether rank 0 ended the job
  return s;
}

}  // namespace zb
