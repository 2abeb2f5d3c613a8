// Node traffic: which bytes of the collectives a rank issued leave its node, by accounting
// (a ring over each collective's group, in the group's rank order) and by measurement (the
// node's own byte counters, which the launcher names in the environment).
#pragma once

#include <cstdint>
#include <vector>

#include "harness/comm/topology.h"
#include "harness/comm/traffic.h"

namespace zb {

// Bytes one rank sends, split by where the ring's next rank sits: on another node (inter) or
// on its own (intra). A ring over n ranks sends each pass's (n-1)/n to the next rank, so a
// node's inter bytes are its ranks' sends whose next rank is elsewhere: for the world's ring
// with nodes holding consecutive ranks, one rank per node; in a cross-node group, every rank.
// An all-to-all sends every other member its block directly: a block per member elsewhere is
// inter, a block per other member of its own node intra.
struct NodeBytes {
  double inter = 0, intra = 0;
};
NodeBytes ring_node_bytes(const CollRecord& rec, const Topology& topo);
NodeBytes ring_node_bytes(const std::vector<CollRecord>& recs, const Topology& topo);

// Volume (elements, the ZeRO convention) of the collectives whose group spans nodes (inter)
// and of those within one node (intra).
struct NodeVolume {
  double inter = 0, intra = 0;
};
NodeVolume node_volume(const std::vector<CollRecord>& recs, const Topology& topo);

// The environment variables a launcher sets to name this node's counters (tools/cluster.sh
// does): each a file holding a byte count that only grows, such as a network device's
// statistics/tx_bytes. Inter: what the node's link to the other nodes has sent. Intra: what
// its ranks sent each other through the node's loopback (socket transports only).
constexpr const char* kInterNodeCounterEnv = "ZB_INTER_NODE_COUNTER";
constexpr const char* kIntraNodeCounterEnv = "ZB_INTRA_NODE_COUNTER";

// The counter named by `env`; -1 when the variable is unset or the file cannot be read.
int64_t read_node_counter(const char* env);

}  // namespace zb
