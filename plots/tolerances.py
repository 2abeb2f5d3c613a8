"""How far a value may sit from what it is held against before summary.md lists it under
"check these": each tolerance once, with why it is that wide. Where compare_rules.py already
states the same fact, it is taken from there."""

from compare_rules import DEFAULT_TOLERANCES, EXACT_REL_TOL

# `wrong` counts elements that differ from the single-process reference: any is a bug.
WRONG_MAX = 0

# A prediction (zb_predict) against what zero.json measured. Communication alone (comm_s) is
# the model's own test and the sweep's repeatability bounds it: |predicted / measured - 1| at
# most 10%, the bar set for a cost model worth planning with. Exposed communication also carries
# what no sweep times (a late rank, a wake-up): within 25%, or within 1 ms where the measured
# value is under 4 ms, since a small exposed time is a few wake-ups and its ratio means little.
PREDICTION_COMM_REL = 0.10
PREDICTION_EXPOSED_REL = 0.25
PREDICTION_EXPOSED_ABS_S = 1e-3
PREDICTION_EXPOSED_SMALL_S = 4e-3

# Resident memory against the formula. Both independent observers (resident-set growth,
# cudaMemGetInfo) count whole pages and see the allocator's own bookkeeping: the quick run's
# states sit 1 to 4 pages above their formulas, so a small state is allowed a few pages more
# than the relative bar; the mpi tests hold the measured value to the same 1%.
MEMORY_REL = 0.01
MEMORY_SLACK_BYTES = 16 * 4096

# The harness's own books (the memory tracker, the traffic log) against the formula: they
# count what the code allocated and sent, so any difference beyond rounding is a bug.
BOOKS_REL = EXACT_REL_TOL

# Bytes at the sockets against the traffic log: the transport adds a few bytes of its own, the
# same allowance compare_rules gives two runs of volume_psi_measured.
SOCKET_REL = DEFAULT_TOLERANCES["volume_psi_measured"]

# Bytes at a node's link (inter-node) or its loopback (intra-node) against the rings' books:
# the payload plus TCP/IP headers and the fences' few hundred bytes, so never below and at
# most 2% above, the allowance compare_rules gives two runs of it (tests/cluster/test_cluster.py
# holds the same bounds).
LINK_BELOW, LINK_ABOVE = 0.0, DEFAULT_TOLERANCES["inter_node_bytes_measured"]

# zerobench's time for a collective over the bare library call (overhead_ratio): the harness
# may add this much before it is worth a look; each call against itself (bare_repeat_ratio,
# ours_repeat_ratio) says whether the machine alone moves that much.
OVERHEAD_REL = 0.10
