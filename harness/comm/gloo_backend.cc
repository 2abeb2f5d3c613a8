// Gloo backend: host buffers over Gloo's TCP transport, one full mesh of pairs per group (the
// world, the node, the cross-node group), whose addresses the driver's control plane hands out;
// the queue, the communication thread and caller progress are the CPU stream's. All-reduce is
// Gloo's ring, all-gather its ring, all-to-all its direct exchange; reduce-scatter is a ring of
// our own over Gloo's pairs (Gloo's one, halving-doubling, sends more than the ring at N = 4).
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/context.h>
#include <gloo/transport/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "harness/comm/cpu_stream.h"
#include "harness/core/bf16.h"

namespace zb {
namespace {

using Reduce = std::function<void(void*, const void*, const void*, size_t)>;

// Gloo's element-wise sum, c = a + b: FP32, and BF16 rounded once per addition, as the MPI op.
Reduce sum_of(DType dtype) {
  if (dtype == DType::bf16)
    return [](void* c, const void* a, const void* b, size_t n) {
      auto* out = static_cast<Bf16*>(c);
      const auto *x = static_cast<const Bf16*>(a), *y = static_cast<const Bf16*>(b);
      for (size_t i = 0; i < n; ++i) out[i] = bf16_add(x[i], y[i]);
    };
  return [](void* c, const void* a, const void* b, size_t n) {
    auto* out = static_cast<float*>(c);
    const auto *x = static_cast<const float*>(a), *y = static_cast<const float*>(b);
    for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
  };
}

// A group's Gloo context: a pair to every other member, connected from the addresses that the
// control plane exchanged (in place of a Gloo store: see docs/design.md, Choices made).
class MeshContext final : public gloo::Context {
 public:
  MeshContext(int rank, int size, std::chrono::milliseconds timeout) : gloo::Context(rank, size) {
    setTimeout(timeout);
  }
  // Makes the pairs; returns this rank's addresses for the others, in group order.
  std::string listen(const std::shared_ptr<gloo::transport::Device>& device) {
    device_ = device;
    transportContext_ = device_->createContext(rank, size);
    transportContext_->setTimeout(getTimeout());
    std::string mine;
    for (int i = 0; i < size; ++i) {
      if (i == rank) continue;
      std::vector<char> a = transportContext_->createPair(i)->address().bytes();
      mine.append(a.begin(), a.end());
    }
    return mine;
  }
  // `theirs[i]`: member i's addresses for the others, in group order, each the same length.
  void connect(const std::vector<std::string>& theirs) {
    for (int i = 0; i < size; ++i) {
      if (i == rank) continue;
      const std::string& all = theirs[size_t(i)];
      const size_t each = all.size() / size_t(size - 1), at = size_t(rank > i ? rank - 1 : rank) * each;
      transportContext_->getPair(i)->connect(std::vector<char>(all.begin() + long(at), all.begin() + long(at + each)));
    }
  }
};

// Reduce-scatter as a ring over the group's pairs, rank r sending to r + 1: N - 1 steps, in
// each a rank sends one block (its own, then the partial sums it received) and adds its own to
// the block it receives, so it sends (N - 1)/N of the buffer, the ring's ideal, and after the
// last step holds its block summed over every rank.
void ring_reduce_scatter(gloo::Context& ctx, const char* send, char* recv, size_t block, DType dtype,
                         std::vector<char>* scratch, std::chrono::milliseconds timeout) {
  const int n = ctx.size, r = ctx.rank;
  const size_t elems = block / dtype_size(dtype);
  const Reduce add = sum_of(dtype);
  if (n == 1) {
    if (recv != send) std::memcpy(recv, send, block);
    return;
  }
  if (scratch->size() < 2 * block) scratch->resize(2 * block);
  char* tmp = scratch->data();
  auto in = ctx.createUnboundBuffer(const_cast<char*>(send), size_t(n) * block);
  auto parts = ctx.createUnboundBuffer(tmp, 2 * block);
  const uint64_t slot = gloo::Slot::build(0x20, 0);  // a prefix none of Gloo's collectives uses
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  for (int s = 0; s + 1 < n; ++s) {
    const size_t cur = size_t(s % 2) * block, prev = size_t((s + 1) % 2) * block;
    const size_t own = size_t((r - 2 - s + 2 * n) % n) * block;  // the block that arrives
    parts->recv(left, slot, cur, block);
    if (s == 0) {
      in->send(right, slot, size_t((r - 1 + n) % n) * block, block);
      parts->waitRecv(timeout);
      in->waitSend(timeout);
    } else {
      parts->send(right, slot, prev, block);
      parts->waitRecv(timeout);
      parts->waitSend(timeout);
    }
    add(s + 2 == n ? recv : tmp + cur, tmp + cur, send + own, elems);
  }
}

class GlooCommunicator final : public CpuStreamCommunicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::transport::Device> device,
                   std::vector<std::shared_ptr<MeshContext>> groups, const Topology& topo,
                   double timeout_s, std::chrono::milliseconds gloo_timeout)
      : CpuStreamCommunicator(topo, timeout_s), device_(std::move(device)), groups_(std::move(groups)),
        timeout_(gloo_timeout) {
    start_stream();
  }
  ~GlooCommunicator() override { stop_stream(); }

  Backend backend() const override { return Backend::gloo; }
  std::string library_version() const override {
    return "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) +
           "." + std::to_string(GLOO_VERSION_PATCH) + " (tcp)";
  }

 protected:
  Status call(Coll op, Group group, const void* send, void* recv, uint64_t count, DType dtype) override {
    if (count == 0) return Status::ok();
    try {
      run(op, groups_[size_t(group)], send, recv, count, dtype);
    } catch (const std::exception& e) {
      return Status::error(std::string("gloo: ") + e.what());
    }
    return Status::ok();
  }

  Status barrier_call() override {
    try {
      gloo::BarrierOptions o(groups_[0]);
      o.setTimeout(timeout_);
      gloo::barrier(o);
    } catch (const std::exception& e) {
      return Status::error(std::string("gloo: ") + e.what());
    }
    return Status::ok();
  }

 private:
  template <typename T>
  void run_typed(Coll op, const std::shared_ptr<MeshContext>& ctx, const void* send, void* recv,
                 uint64_t count, DType dtype) {
    T* in = static_cast<T*>(const_cast<void*>(send));
    T* out = static_cast<T*>(recv);
    const size_t n = size_t(ctx->size), block = size_t(count) / n;
    switch (op) {
      case Coll::all_reduce: {
        gloo::AllreduceOptions o(ctx);
        o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
        if (in != out) o.setInput(in, count);
        o.setOutput(out, count);
        o.setReduceFunction(sum_of(dtype));
        o.setTimeout(timeout_);
        gloo::allreduce(o);
        break;
      }
      case Coll::reduce_scatter:
        ring_reduce_scatter(*ctx, static_cast<const char*>(send), static_cast<char*>(recv),
                            block * sizeof(T), dtype, &scratch_, timeout_);
        break;
      case Coll::all_gather: {
        gloo::AllgatherOptions o(ctx);
        if (in != out + size_t(ctx->rank) * block) o.setInput(in, block);  // else in place
        o.setOutput(out, block * n);
        o.setTimeout(timeout_);
        gloo::allgather(o);
        break;
      }
      case Coll::all_to_all: {
        gloo::AlltoallOptions o(ctx);
        o.setInput(in, block * n);
        o.setOutput(out, block * n);
        o.setTimeout(timeout_);
        gloo::alltoall(o);
        break;
      }
    }
  }

  void run(Coll op, const std::shared_ptr<MeshContext>& ctx, const void* send, void* recv,
           uint64_t count, DType dtype) {
    if (dtype == DType::bf16) return run_typed<uint16_t>(op, ctx, send, recv, count, dtype);
    run_typed<float>(op, ctx, send, recv, count, dtype);
  }

  std::shared_ptr<gloo::transport::Device> device_;
  std::vector<std::shared_ptr<MeshContext>> groups_;  // by Group
  std::chrono::milliseconds timeout_;
  std::vector<char> scratch_;  // reduce-scatter's two blocks in flight, kept between calls
};

// The address Gloo listens on: GLOO_SOCKET_IFNAME's (PyTorch's variable), else the one this rank
// reaches rank 0 from, else the host name's (Gloo's own default).
gloo::transport::tcp::attr device_attr(const Bootstrap& boot) {
  gloo::transport::tcp::attr a;
  const char* iface = std::getenv("GLOO_SOCKET_IFNAME");
  if (iface && *iface) a.iface = iface;
  else if (!boot.address.empty()) a.hostname = boot.address;
  return a;
}

}  // namespace

Status make_gloo_communicator(const Topology& topo, double timeout_s, const Bootstrap& boot,
                              std::unique_ptr<Communicator>* out) {
  // Gloo's own timeout backs ours up: the communicator's wait and the caller's watchdog end a
  // late collective at --timeout with the line every backend gives, before Gloo would.
  const auto gloo_timeout = std::chrono::milliseconds(int64_t((timeout_s * 1.1 + 1) * 1000));
  std::shared_ptr<gloo::transport::Device> device;
  std::vector<std::shared_ptr<MeshContext>> groups;
  try {
    device = gloo::transport::tcp::CreateDevice(device_attr(boot));
    for (Group g : {Group::world, Group::node, Group::cross}) {
      const std::vector<int> members = topo.members(g, topo.rank);
      const int me = int(std::find(members.begin(), members.end(), topo.rank) - members.begin());
      auto ctx = std::make_shared<MeshContext>(me, int(members.size()), gloo_timeout);
      // Every rank exchanges its addresses for its own group in one round of the whole world.
      std::vector<std::string> all, theirs;
      ZB_RETURN_IF_ERROR(boot.exchange(ctx->listen(device), &all,
                                       std::string("Gloo's addresses for the ") + group_name(g) + " group"));
      for (int m : members) theirs.push_back(all[size_t(m)]);
      ctx->connect(theirs);
      groups.push_back(ctx);
    }
  } catch (const std::exception& e) {
    return Status::error(std::string("rank ") + std::to_string(topo.rank) + ": connecting Gloo: " + e.what());
  }
  *out = std::make_unique<GlooCommunicator>(device, groups, topo, timeout_s, gloo_timeout);
  return Status::ok();
}

}  // namespace zb
