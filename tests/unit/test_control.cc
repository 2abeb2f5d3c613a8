// The control plane's operations, on an implementation of rounds between threads: what each
// operation gives every rank, and the one line a rank that never arrives ends in. A transport
// added later (issue 25's rendezvous) gives the same answers through its own round.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "harness/driver/control.h"

namespace {

// Rounds through one shared mailbox: every rank a thread, rank 0 the hub.
struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, std::map<int, std::string>> parts;  // by round, by rank
  std::map<uint64_t, std::string> answers;
  std::map<uint64_t, bool> failed;  // rank 0 gave up on the round: the others are let go at once
};

class ThreadPlane final : public zb::ControlPlane {
 public:
  ThreadPlane(Mailbox& box, int rank, int size, double timeout_s)
      : ControlPlane(timeout_s), box_(box), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }

 protected:
  zb::Status round(const std::string& part, const Answer& answer, std::string* answer_out,
                   const std::string& what) override {
    const uint64_t r = rounds_++;
    std::unique_lock<std::mutex> lock(box_.mu);
    box_.parts[r][rank_] = part;
    box_.cv.notify_all();
    auto wait = std::chrono::duration<double>(rank_ == 0 ? hub_deadline_s() : peer_deadline_s());
    if (rank_ != 0) {
      if (!box_.cv.wait_for(lock, wait,
                            [&] { return box_.answers.count(r) || box_.failed.count(r); }))
        return late(what, peer_deadline_s(), {0});
      if (box_.failed.count(r)) return zb::Status::error("rank 0 gave up");
      *answer_out = box_.answers[r];
      return zb::Status::ok();
    }
    zb::Status s;
    if (!box_.cv.wait_for(lock, wait, [&] { return int(box_.parts[r].size()) == size_; })) {
      std::vector<int> missing;
      for (int q = 0; q < size_; ++q)
        if (!box_.parts[r].count(q)) missing.push_back(q);
      s = late(what, hub_deadline_s(), missing);
    } else {
      std::vector<std::string> all;
      for (auto& [q, p] : box_.parts[r]) all.push_back(p);
      s = answer(all, answer_out);
    }
    if (s)
      box_.answers[r] = *answer_out;
    else
      box_.failed[r] = true;
    box_.cv.notify_all();
    return s;
  }

 private:
  Mailbox& box_;
  int rank_, size_;
  uint64_t rounds_ = 0;
};

// Runs `body` on every rank of a 3-rank plane at once.
void on_three_ranks(const std::function<void(zb::ControlPlane&)>& body) {
  Mailbox box;
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      ThreadPlane plane(box, r, 3, 30);
      body(plane);
    });
  for (auto& t : ranks) t.join();
}

}  // namespace

TEST(Control, EveryOperationGivesEveryRankTheSameAnswer) {
  std::mutex mu;
  std::map<int, std::vector<double>> maxes, sums, gathered;
  std::map<int, std::string> broadcast;
  std::vector<std::string> blobs;
  on_three_ranks([&](zb::ControlPlane& c) {
    const double r = c.rank();
    std::vector<double> mx{r, -r, r == 1 ? 7.0 : 0.0}, sm{r, 1};
    std::vector<double> all;
    std::vector<std::string> got;
    std::string text = c.rank() == 0 ? "from rank 0" : "";
    ASSERT_TRUE(c.barrier(zb::Wait::barrier, "start"));
    ASSERT_TRUE(c.max(&mx, zb::Wait::reduction, "max"));
    ASSERT_TRUE(c.sum(&sm, zb::Wait::reduction, "sum"));
    ASSERT_TRUE(c.all_gather(10 * r, &all, zb::Wait::reduction, "gather"));
    ASSERT_TRUE(c.gather("rank " + std::to_string(c.rank()), &got, zb::Wait::trace, "spans"));
    ASSERT_TRUE(c.broadcast(&text, zb::Wait::barrier, "text"));
    std::lock_guard<std::mutex> lock(mu);
    maxes[c.rank()] = mx, sums[c.rank()] = sm, gathered[c.rank()] = all, broadcast[c.rank()] = text;
    if (c.rank() == 0)
      blobs = got;
    else
      EXPECT_TRUE(got.empty());
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(maxes[r], (std::vector<double>{2, 0, 7}));
    EXPECT_EQ(sums[r], (std::vector<double>{3, 3}));
    EXPECT_EQ(gathered[r], (std::vector<double>{0, 10, 20}));
    EXPECT_EQ(broadcast[r], "from rank 0");
  }
  EXPECT_EQ(blobs, (std::vector<std::string>{"rank 0", "rank 1", "rank 2"}));
}

TEST(Control, RanksThatDisagreeOnTheValuesAreAnError) {
  std::string error;
  on_three_ranks([&](zb::ControlPlane& c) {
    std::vector<double> v(size_t(c.rank() == 2 ? 2 : 1), 1.0);
    zb::Status s = c.max(&v, zb::Wait::reduction, "max");
    if (c.rank() == 0) error = s.message();
  });
  EXPECT_NE(error.find("rank 2 gave 2 values, rank 0 1"), std::string::npos) << error;
}

TEST(Control, ARankThatNeverArrivesIsNamedOnOneLine) {
  Mailbox box;
  ThreadPlane hub(box, 0, 3, 0.05);
  std::thread one([&] {
    ThreadPlane plane(box, 1, 3, 0.05);
    std::string unused;
    (void)plane.broadcast(&unused, zb::Wait::fence, "every rank in");  // its part arrives
  });
  std::string blob;
  zb::Status s = hub.broadcast(&blob, zb::Wait::fence, "every rank in");
  one.join();
  ASSERT_FALSE(s);
  EXPECT_EQ(
      s.message(),
      "timeout: rank 0: the driver's node-window fence (every rank in) did not complete within "
      "0.05 s: rank 2 had not arrived");
}
