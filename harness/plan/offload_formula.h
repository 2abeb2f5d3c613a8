// Offload formulas: what moves to pinned host memory when gradients, the optimizer or the
// weights leave the GPU, and the PCIe bytes a step then copies, from the stage table.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/compute/optimizer_config.h"
#include "harness/stage/stage.h"

namespace zb {

// Each mode moves everything the one before it moves, plus one more category:
// - grads: the gradient the stage keeps lives on host; the device keeps `slots` chunk-sized
//   slots that backward fills, reduces and copies out; the optimizer stays on the GPU;
// - optimizer (ZeRO-Offload): also the FP32 master and moments; the optimizer runs on the CPU;
// - weights: also the BF16 weights, streamed in chunk by chunk for every forward and backward.
enum class Offload { none, grads, optimizer, weights };

const char* offload_name(Offload mode);
std::vector<std::pair<std::string, Offload>> offload_choices();  // for flags

// Per parameter a rank holds before sharding, for a stage sharding over n ranks, s of them on
// each node (s = 0: all n on one node), and a step of M micro-batches:
// host    the bytes that live on host: what the stage keeps of each moved category;
// freed   the same bytes, no longer resident on the device;
// d2h/h2d the bytes copied per step each way.
// With g = the gradient the stage keeps (grad bytes x its share), o = master + moments x
// the optimizer's share, u = 2 x the optimizer's share (the BF16 weights the rank updates) and
// w = 2 x the weights' share (hpz's node copy stays on the device):
//   grads:     host g;         d2h M g (each micro-batch's reduced gradient, summed on host);
//              h2d g (the summed gradient back to the optimizer on the GPU)
//   optimizer: host g + o;     d2h M g;  h2d u (the updated weights, then gathered as before)
//   weights:   host g + o + w; d2h M g;  h2d M p w, p = 2 passes (forward, backward) or 1
//              for hpz, whose backward gathers from its node copy. Where the rank holds more
//              weights than it updates (z1, z2: u < w) the others' updates reach its host copy
//              through the device: u in, gathered there, w out.
struct OffloadPerParam {
  double host = 0, freed = 0, d2h = 0, h2d = 0;
};
OffloadPerParam offload_per_param(Stage stage, Offload mode, Optimizer optimizer, int grad_bytes,
                                  int64_t n, int64_t s, int64_t microbatches);

// Device bytes of one slot per element of a chunk: a chunk's gradient, plus its BF16 weights
// where they stream in too.
double offload_slot_bytes_per_element(Offload mode, int grad_bytes);

}  // namespace zb
