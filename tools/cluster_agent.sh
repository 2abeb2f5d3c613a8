#!/usr/bin/env bash
# cluster_agent.sh: Open MPI's remote launch agent for tools/cluster.sh, in place of ssh. Open
# MPI calls it as `cluster_agent.sh HOST COMMAND...` to start its daemon on HOST; it runs the
# command, as ssh's remote shell would, inside HOST's network namespace and under HOST's name
# (Open MPI names shared-memory files and session folders after the host).
set -uo pipefail
while [[ ${1:-} == -* ]]; do shift; done  # options meant for ssh
host=${1:?usage: cluster_agent.sh HOST COMMAND...}
shift
# Hosts are NAME-n<i> and live in namespace zbc-NAME-n<i> (tools/cluster.sh up).
[[ $host =~ ^[a-z][a-z0-9]{0,7}-n[0-9]+$ ]] || { echo "cluster_agent.sh: '$host' is not a cluster node name" >&2; exit 2; }
ns=zbc-$host
[[ -e /run/netns/$ns ]] || { echo "cluster_agent.sh: no namespace $ns (is the cluster up?)" >&2; exit 1; }
exec ip netns exec "$ns" unshare --uts -- /bin/sh -c 'hostname "$0" && exec /bin/sh -c "$1"' "$host" "$*"
