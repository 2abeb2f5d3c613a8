#!/usr/bin/env bash
# cluster.sh: a cluster of K nodes on one machine, made of Linux network namespaces joined by
# shaped links to a switch, and Open MPI jobs launched across it. Ranks of one node share
# memory as on a real node; ranks of different nodes talk over the node's link, whose transmit
# counter is the inter-node byte count the benchmarks report. run --env starts the ranks as
# plain processes with torchrun's variables instead, with no MPI. Needs root.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  cat <<'USAGE'
usage: tools/cluster.sh up --nodes=K --ranks-per-node=R [--link-gbps=G] [--link-latency-us=L]
                           [--name=NAME]
       tools/cluster.sh run [--name=NAME] [MPIRUN OPTIONS...] -- PROGRAM [ARGS...]
       tools/cluster.sh run --env [--name=NAME] [--master-port=P] -- PROGRAM [ARGS...]
       tools/cluster.sh down [--name=NAME]
       tools/cluster.sh status [--name=NAME]

up      makes K network namespaces (the nodes, hostnames NAME-n0 .. NAME-n<K-1>, addresses
        10.77.0.1 .. inside them only) and one for the switch (a bridge), joins each node to
        the switch by a veth pair (MTU 65000), and shapes each node's link in both directions:
        tbf at G Gbit/s and netem delay of L microseconds per direction (two nodes are two
        links apart: 2L one way). No shaping when the options are absent.
run     launches PROGRAM on K x R ranks with Open MPI: mpirun runs on node 0 and starts an
        orted on every other node through tools/cluster_agent.sh, which enters that node's
        namespace. Options before -- go to mpirun (e.g. --mca btl tcp,self). The ranks see
        ZB_INTER_NODE_COUNTER (the node link's tx_bytes) and ZB_INTRA_NODE_COUNTER (the node
        loopback's tx_bytes, which carries same-node traffic only over TCP).
run --env  starts the K x R ranks itself, each a plain process in its node's namespace under
        its node's hostname, with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR
        (node 0's address, 10.77.0.1) and MASTER_PORT (default 29500), as torchrun or a
        Kubernetes job would: no mpirun, no MPI at run time (the gloo or nccl backend).
down    stops every process left in the cluster's namespaces and removes all it made.
status  says whether the cluster is up and how it was made.
NAME defaults to zb; several clusters with different names can be up at once. Every exit path
of up and run (an error, Ctrl-C, a signal) removes what that command made or started.
Exit 0 on success, 1 on a failure, 2 for bad usage; run exits with the job's status.
USAGE
}

die2() { echo "cluster.sh: $*" >&2; exit 2; }
fail() { echo "cluster.sh: $*" >&2; exit 1; }

(($#)) || { usage >&2; exit 2; }
cmd=$1
shift
name=zb nodes="" rpn="" gbps="" lat_us="" env_launch=0 master_port=29500
mpirun_opts=() program=()
case $cmd in
  -h|--help) usage; exit 0 ;;
  up|down|status|run) ;;
  *) die2 "unknown command '$cmd' (use up, run, down or status; see --help)" ;;
esac
while (($#)); do
  case $1 in
    --name=*) name=${1#*=} ;;
    --nodes=*) [[ $cmd == up ]] || die2 "--nodes is an option of up"; nodes=${1#*=} ;;
    --ranks-per-node=*) [[ $cmd == up ]] || die2 "--ranks-per-node is an option of up"; rpn=${1#*=} ;;
    --link-gbps=*) [[ $cmd == up ]] || die2 "--link-gbps is an option of up"; gbps=${1#*=} ;;
    --link-latency-us=*) [[ $cmd == up ]] || die2 "--link-latency-us is an option of up"; lat_us=${1#*=} ;;
    --env) [[ $cmd == run ]] || die2 "--env is an option of run"; env_launch=1 ;;
    --master-port=*) [[ $cmd == run ]] || die2 "--master-port is an option of run"; master_port=${1#*=} ;;
    --) shift; program=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) [[ $cmd == run ]] || die2 "unknown option '$1' for $cmd (see --help)"; mpirun_opts+=("$1") ;;
  esac
  shift
done
[[ $name =~ ^[a-z][a-z0-9]{0,7}$ ]] || die2 "--name must be 1 to 8 lower-case letters or digits, starting with a letter, not '$name'"

# Everything the cluster makes carries its name: namespaces zbc-NAME-n<i> and zbc-NAME-sw,
# /etc/netns/zbc-NAME-n<i>/ (the hosts file ip netns exec shows inside), and the state folder.
state=/run/zbcluster/$name
sw=zbc-$name-sw
node_ns() { echo "zbc-$name-n$1"; }
node_host() { echo "$name-n$1"; }
node_ip() { echo "10.77.0.$(($1 + 1))"; }

need_root() {
  [[ $(id -u) == 0 ]] || fail "$cmd needs root (network namespaces, veth pairs, tc)"
  command -v ip >/dev/null && command -v tc >/dev/null || fail "needs iproute2 (ip, tc): apt-get install -y iproute2"
}

# What up makes is written to $state/made as it is made (a namespace, a folder), so that down,
# and up itself when it fails half-way, remove exactly that and nothing of the same name that
# was there before.
made() { echo "$1 $2" >>"$state/made"; }

teardown() {
  local kind what pid
  if [[ -f $state/made ]]; then
    while read -r kind what; do
      [[ $kind == ns ]] || continue
      for pid in $(ip netns pids "$what" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null; done
    done <"$state/made"
    sleep 0.2
    # Last made, first removed: a folder's contents before the folder.
    while read -r kind what; do
      case $kind in
        ns)
          for pid in $(ip netns pids "$what" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
          ip netns delete "$what" 2>/dev/null ;;  # its veth ends (and their peers) and bridge go too
        file) rm -f "$what" ;;
        dir) rmdir "$what" 2>/dev/null ;;
      esac
    done < <(tac "$state/made")
  fi
  rm -rf "$state"
  rmdir /run/zbcluster 2>/dev/null  # the shared parent, once no cluster is left in it
}

cluster_up() {
  [[ $nodes =~ ^[1-9][0-9]*$ ]] && ((nodes <= 64)) || die2 "up needs --nodes=K, K from 1 to 64 (got '$nodes')"
  [[ $rpn =~ ^[1-9][0-9]*$ ]] || die2 "up needs --ranks-per-node=R, a positive integer (got '$rpn')"
  [[ -z $gbps || $gbps =~ ^([0-9]+([.][0-9]*)?|[.][0-9]+)$ ]] && [[ $gbps != 0 ]] \
    || die2 "--link-gbps must be a positive number of Gbit/s, not '$gbps'"
  [[ -z $lat_us || $lat_us =~ ^[0-9]+$ ]] || die2 "--link-latency-us must be a whole number of microseconds, not '$lat_us'"
  need_root
  [[ -e $state ]] && fail "a cluster named '$name' is already up (tools/cluster.sh down --name=$name)"
  # From here every exit removes what was made, unless up completes.
  trap 'teardown' EXIT
  trap 'exit 130' INT TERM
  mkdir -p "$state" || fail "cannot make $state"
  [[ -d /etc/netns ]] || { mkdir /etc/netns && made dir /etc/netns; } || fail "cannot make /etc/netns"
  ip netns add "$sw" && made ns "$sw" || fail "cannot make the network namespace $sw"
  ip -n "$sw" link add br0 type bridge || fail "cannot make the bridge in $sw"
  ip -n "$sw" link set br0 mtu 65000 up
  ip netns exec "$sw" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  local i ns hosts=""
  for ((i = 0; i < nodes; i++)); do hosts+="$(node_ip "$i") $(node_host "$i")"$'\n'; done
  for ((i = 0; i < nodes; i++)); do
    ns=$(node_ns "$i")
    ip netns add "$ns" && made ns "$ns" || fail "cannot make the network namespace $ns"
    # No IPv6: its router solicitations and the like would be counted as inter-node bytes.
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip link add uplink netns "$ns" mtu 65000 type veth peer name "p$i" netns "$sw" mtu 65000 \
      || fail "cannot make the veth pair of node $i"
    ip -n "$sw" link set "p$i" master br0 up
    ip -n "$ns" addr add "$(node_ip "$i")/24" dev uplink
    ip -n "$ns" link set uplink up
    ip -n "$ns" link set lo up
    shape "$ns" uplink || fail "cannot shape the link of node $i (tc)"
    shape "$sw" "p$i" || fail "cannot shape the switch side of node $i's link (tc)"
    mkdir "/etc/netns/$ns" && made dir "/etc/netns/$ns" && made file "/etc/netns/$ns/hosts" \
      && printf '127.0.0.1 localhost\n%s' "$hosts" >"/etc/netns/$ns/hosts" \
      || fail "cannot write /etc/netns/$ns/hosts"
  done
  # Node 0 (where mpirun runs) reaches every other node: a TCP connection to a closed port
  # is refused at once by a reachable node (no ping needed). A new bridge port may take a
  # moment to forward, so each node gets a few tries.
  local try ok
  for ((i = 1; i < nodes; i++)); do
    ok=0
    for ((try = 0; try < 20 && !ok; try++)); do
      [[ $(ip netns exec "$(node_ns 0)" timeout 1 bash -c "exec 3<>/dev/tcp/$(node_ip "$i")/9" 2>&1) \
        == *'Connection refused'* ]] && ok=1 || sleep 0.25
    done
    ((ok)) || fail "node 0 cannot reach node $i over the bridge"
  done
  printf 'nodes=%s\nranks_per_node=%s\nlink_gbps=%s\nlink_latency_us=%s\n' \
    "$nodes" "$rpn" "${gbps:-unshaped}" "${lat_us:-0}" >"$state/config"
  trap - EXIT INT TERM
  echo "cluster.sh: '$name' is up: $nodes node(s) x $rpn rank(s), link ${gbps:-unshaped} Gbit/s, ${lat_us:-0} us per direction"
}

# shape NS DEV: netem for the delay, tbf under it for the rate (as the kernel docs pair them).
shape() {
  local ns=$1 dev=$2 parent=root
  if [[ -n $lat_us && $lat_us != 0 ]]; then
    if ! tc -n "$ns" qdisc add dev "$dev" root handle 1: netem delay "${lat_us}us" limit 100000 2>/dev/null; then
      echo "cluster.sh: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), so --link-latency-us cannot be applied; leave it out" >&2
      return 1
    fi
    parent="parent 1:1"
  fi
  if [[ -n $gbps ]]; then
    # A bucket of several jumbo frames, and a queue deep enough that nothing is dropped: a
    # drop on the switch side would be sent twice and counted twice at the sender.
    tc -n "$ns" qdisc add dev "$dev" $parent handle 10: tbf rate "${gbps}gbit" burst 512kb limit 64mb \
      || return 1
  fi
}

load_state() {
  [[ -f $state/config ]] || fail "no cluster named '$name' is up (tools/cluster.sh up --name=$name ...)"
  # shellcheck disable=SC1091
  source "$state/config"
}

# run --env: every rank a process of its own in its node's namespace and hostname, given the
# variables torchrun gives; the job's status is the first failing rank's (0 when all succeed).
cluster_run_env() {
  ((${#mpirun_opts[@]} == 0)) || die2 "run --env starts no mpirun, so it takes no mpirun options (got '${mpirun_opts[*]}')"
  [[ $master_port =~ ^[0-9]+$ ]] && ((master_port >= 1 && master_port <= 65535)) \
    || die2 "--master-port must be a TCP port, 1 to 65535, not '$master_port'"
  local size=$((nodes * ranks_per_node)) i l r pids=() rc=0 one
  stop_ranks() {
    local pid
    for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null; done
  }
  trap 'stop_ranks; exit 130' INT TERM
  for ((i = 0; i < nodes; i++)); do
    for ((l = 0; l < ranks_per_node; l++)); do
      r=$((i * ranks_per_node + l))
      setsid ip netns exec "$(node_ns "$i")" unshare --uts -- env -u OMPI_COMM_WORLD_RANK -u PMIX_RANK \
        -u PMI_RANK RANK=$r WORLD_SIZE=$size LOCAL_RANK=$l LOCAL_WORLD_SIZE=$ranks_per_node \
        MASTER_ADDR="$(node_ip 0)" MASTER_PORT="$master_port" \
        /bin/sh -c 'hostname "$0" && exec "$@"' "$(node_host "$i")" "${program[@]}" &
      pids+=($!)
    done
  done
  for one in "${pids[@]}"; do
    wait "$one"
    r=$?
    ((rc == 0)) && rc=$r
  done
  trap - INT TERM
  return "$rc"
}

cluster_run() {
  ((${#program[@]})) || die2 "run needs -- PROGRAM [ARGS...]"
  need_root
  load_state
  export ZB_INTER_NODE_COUNTER=/sys/class/net/uplink/statistics/tx_bytes
  export ZB_INTRA_NODE_COUNTER=/sys/class/net/lo/statistics/tx_bytes
  if ((env_launch)); then
    cluster_run_env
    return $?
  fi
  local i hostlist="" n0
  for ((i = 0; i < nodes; i++)); do hostlist+="${hostlist:+,}$(node_host "$i"):$ranks_per_node"; done
  n0=$(node_ns 0)
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export ZB_INTER_NODE_COUNTER=/sys/class/net/uplink/statistics/tx_bytes
  export ZB_INTRA_NODE_COUNTER=/sys/class/net/lo/statistics/tx_bytes
  # mpirun in node 0 under node 0's hostname (Open MPI names its shared-memory files and
  # session folders after the host, so every node needs its own). The job is stopped, and
  # anything it left in the namespaces with it, on every way out.
  local job=""
  stop_job() {
    [[ -n $job ]] && kill -TERM -- "-$job" 2>/dev/null
    local ns pid
    for ((i = 0; i < nodes; i++)); do
      ns=$(node_ns "$i")
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null; done
    done
  }
  trap 'stop_job; exit 130' INT TERM
  # Open MPI polls without yielding when it thinks each rank has a core, which it does here
  # (R slots per node); on a machine with fewer cores than ranks that starves the ranks.
  local yield=()
  (( nodes * ranks_per_node > $(nproc 2>/dev/null || echo 1) )) && yield=(--mca mpi_yield_when_idle 1)
  setsid ip netns exec "$n0" unshare --uts -- /bin/sh -c 'hostname "$0" && exec "$@"' "$(node_host 0)" \
    mpirun -np $((nodes * ranks_per_node)) --host "$hostlist" \
    --mca plm rsh --mca plm_rsh_agent "$root/tools/cluster_agent.sh" --mca plm_rsh_no_tree_spawn 1 \
    -x ZB_INTER_NODE_COUNTER -x ZB_INTRA_NODE_COUNTER -x OMPI_ALLOW_RUN_AS_ROOT \
    -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM --bind-to none --oversubscribe "${yield[@]}" \
    "${mpirun_opts[@]}" "${program[@]}" &
  job=$!
  wait "$job"
  local rc=$?
  job=""
  trap - INT TERM
  # A job that ended leaves nothing behind; one that failed may leave orteds: stop them.
  for ((i = 0; i < nodes; i++)); do
    for pid in $(ip netns pids "$(node_ns "$i")" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null; done
  done
  return "$rc"
}

case $cmd in
  up) cluster_up ;;
  down) need_root; teardown; echo "cluster.sh: '$name' is down" ;;
  status)
    if [[ -f $state/config ]]; then echo "cluster.sh: '$name' is up"; cat "$state/config"
    else echo "cluster.sh: no cluster named '$name' is up"; exit 1; fi ;;
  run) cluster_run; exit $? ;;
esac
