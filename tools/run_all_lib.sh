# Sourced by run_all.sh: how it launches one benchmark and records it (logs/LABEL.log, a line
# of logs/runs.tsv for the manifest, the failure count). The functions read run_all.sh's
# settings ($out, $bin, $backend, launch, rep_args, wire_env, wire_mca, wire_note, extra).
# shellcheck shell=bash disable=SC2154

now_us() { echo "${EPOCHREALTIME/[.,]/}"; }
# since T0_US: elapsed seconds with one decimal
since() { local d=$(($(now_us) - $1)); printf '%d.%d' $((d / 1000000)) $((d / 100000 % 10)); }
# run_bench LABEL JSON SETTINGS CMD...: one benchmark; its log in logs/LABEL.log. SETTINGS
# (algorithm settings given on the command line) goes to the manifest with the command.
run_bench() {
  local label=$1 json=$2 settings=$3
  shift 3
  local t0 status=ok
  t0=$(now_us)
  if "$@" >"$out/logs/$label.log" 2>&1; then
    log "$label: done in $(since "$t0") s -> ${json:-(no JSON)}"
  else
    status=failed
    log "$label: FAILED after $(since "$t0") s; last lines of logs/$label.log:"
    log_tail "$out/logs/$label.log"
    failures=$((failures + 1))
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$json" "$status" "$(since "$t0")" "$settings" "$*" \
    >>"$runs_tsv"
}
# log_tail FILE: the last lines of a log without the launcher's boxed banners (the lines
# between two rules of dashes), which would otherwise hide the benchmark's own message.
log_tail() {
  awk '/^----------+$/ { inbox = !inbox; next } !inbox && NF' "$1" | tail -n 8 | sed 's/^/    /' >&2
}
# skip LABEL WHY: a benchmark not run, said on stderr and in the manifest.
skip() {
  log "$1: skipped: $2"
  printf '%s\t\tskipped\t0\t%s\t\n' "$1" "$2" >>"$runs_tsv"
}
mpi_bench() {  # mpi_bench LABEL BINARY ARGS...: launched on every rank, JSON in LABEL.json
  local label=$1 binary=$bin/$2
  shift 2
  extra_for "$label"
  [[ -x $binary ]] || { skip "$label" "$binary not built"; return; }
  run_bench "$label" "$label.json" "" "${launch[@]}" "$binary" --backend="$backend" --json="$out/$label.json" \
    "${rep_args[@]}" "$@" "${more[@]}"
}
# extra_for LABEL: that run's --extra-args words in more[], split on spaces, never globbed.
extra_for() { more=(); read -ra more <<<"${extra[$1]:-}"; }
# wire_bench LABEL BINARY ARGS...: over the socket transport, so volumes are measured at the
# sockets; skipped with one rank, where nothing crosses a wire.
wire_bench() {
  local label=$1 binary=$bin/$2
  shift 2
  [[ -n $wire_note ]] && { skip "$label" "$wire_note"; return; }
  [[ -x $binary ]] || { skip "$label" "$binary not built"; return; }
  local prefix=()
  ((${#wire_env[@]})) && prefix=(env "${wire_env[@]}")
  extra_for "$label"
  run_bench "$label" "$label.json" "${wire_env[*]:-${wire_mca[*]}}" "${prefix[@]}" "${launch[@]}" \
    "${wire_mca[@]}" "$binary" --backend="$backend" --json="$out/$label.json" "${rep_args[@]}" "$@" "${more[@]}"
}
