#!/usr/bin/env bash
# tools/ab.sh: A/B runs of two revisions on one machine. Builds both side by side (a git
# worktree for each revision other than this checkout), runs every benchmark family of each
# alternately, pair after pair, and gates on the paired B/A ratios with plots/ab/ab.py.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

usage() {
  cat <<'USAGE'
usage: tools/ab.sh [options] BASE [HEAD] [-- run_all.sh options]

A is BASE, B is HEAD (default: this checkout's working tree as it is, uncommitted changes
included). Both are built, then every family runs once on each side per pair, A and B back
to back: A B in odd pairs, B A in even ones, so a machine that drifts steadily favours
neither. Both sides run through this checkout's run_all.sh (same command lines), each with
its own binaries. plots/ab/ab.py then writes OUT/ab.md and OUT/figures/ab_*.{png,pdf,csv}: the
gated timings of plots/compare_rules.py (GATED) judged together, so that unchanged code fails
in at most 5% of runs; every exact metric; every other timing reported, never gated.

options:
  --pairs=N          pairs of runs (default 8, from 5 to 99; an even count runs each order
                     as often)
  --out=DIR          where the runs, logs and report go (default results/ab_<stamp>_<host>)
  --only=A,B         families, as run_all.sh --only names them (default all of them; the
                     names are tools/run_table.toml's: python3 tools/run_table.py families)
  --a-args=L=ARGS    extra arguments for A's run labelled L only (run_all.sh --extra-args);
  --b-args=L=ARGS    likewise for B, e.g. --b-args=collectives=--fault-slow=all_reduce:0.2
  --build=DIR        build folder inside each source tree (default build)
  --cmake=OPTS       CMake options when a build folder is first configured (e.g. -DZB_CUDA=OFF)
  --threshold=X      the worsening the gate must catch (default in plots/compare_rules.py)
  --error=E          family-wise error: the chance that unchanged code fails (default there)
  --confidence=C     coverage of the interval of a timing only reported (default 0.98)
  --undecided=U      pass (default) or fail: exit 1 when a gated timing is too noisy to see
                     a regression of the threshold
  --tolerance=M=REL  as for plots/compare.py; repeatable
  -h, --help         this text

Options after -- go to every run_all.sh call (e.g. --quick --np=4 --repetitions=3); --out,
--only, --bin, --compare and --extra-args are ab.sh's own. Before anything is built, ab.sh
prints run_all.sh's plan of one side's run with its estimate, and the whole: pairs x 2 sides
(builds not counted). Exit code: 0 no regression, 1 a regression (or a benchmark run that
failed), 2 bad input or a revision that does not build. The worktrees live in a temporary
folder removed on every exit.

In CI (the families that hold the gated timings; docs/regression.md gives its time):
  tools/ab.sh --pairs=10 --only=collectives,zero,optimizer BASE HEAD -- --quick
USAGE
}

die2() { echo "ab.sh: $*" >&2; exit 2; }
log() { printf '[ab %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# The families and run labels are the run table's.
read -ra all_families <<<"$(python3 tools/run_table.py families)" && ((${#all_families[@]})) \
  || die2 "cannot read the families of tools/run_table.toml (python3 tools/run_table.py check)"
read -ra all_labels <<<"$(python3 tools/run_table.py labels)"
pairs=8 out="" only=$(IFS=,; echo "${all_families[*]}") build=build cmake_opts=""
revs=() pass=() a_args=() b_args=() ab_opts=()
while (($#)); do
  arg=$1
  shift
  case $arg in
    --) pass=("$@"); break ;;
    --pairs=*) pairs=${arg#*=} ;;
    --out=*) out=${arg#*=}; [[ -n $out ]] || die2 "--out needs a folder" ;;
    --only=*) only=${arg#*=} ;;
    --a-args=*) a_args+=(--extra-args="${arg#*=}") ;;
    --b-args=*) b_args+=(--extra-args="${arg#*=}") ;;
    --build=*) build=${arg#*=} ;;
    --cmake=*) cmake_opts=${arg#*=} ;;
    --threshold=*|--error=*|--confidence=*|--undecided=*|--tolerance=*) ab_opts+=("$arg") ;;
    -h|--help) usage; exit 0 ;;
    -*) die2 "unknown option '$arg' (see --help)" ;;
    *) revs+=("$arg") ;;
  esac
done
((${#revs[@]} >= 1 && ${#revs[@]} <= 2)) || die2 "expected BASE [HEAD] (see --help)"
[[ $pairs =~ ^[0-9]+$ ]] && ((pairs >= 5 && pairs <= 99)) \
  || die2 "--pairs must be a whole number from 5 to 99, not '$pairs'"
[[ $build =~ ^[A-Za-z0-9._-]+$ ]] || die2 "--build must be a folder name, not '$build'"
for a in "${pass[@]}"; do
  case $a in
    --out=*|--only=*|--bin=*|--compare=*|--extra-args=*)
      die2 "run_all.sh option ${a%%=*} is set by ab.sh; use ab.sh's own" ;;
  esac
done
read -ra families <<<"${only//,/ }"
((${#families[@]})) || die2 "--only needs family names"
for f in "${families[@]}"; do
  [[ " ${all_families[*]} " == *" $f "* ]] || die2 "--only: unknown family '$f' (known: ${all_families[*]})"
done
for a in "${a_args[@]}" "${b_args[@]}"; do
  a=${a#--extra-args=}
  [[ $a == *=* && " ${all_labels[*]} " == *" ${a%%=*} "* ]] \
    || die2 "--a-args/--b-args take LABEL=ARGS with LABEL one of ${all_labels[*]}, not '$a'"
done
git rev-parse --git-dir >/dev/null 2>&1 || die2 "$root is not a git checkout"
base_sha=$(git rev-parse --verify -q "${revs[0]}^{commit}") || die2 "BASE '${revs[0]}' is not a revision here"
head_sha=""
if ((${#revs[@]} == 2)); then
  head_sha=$(git rev-parse --verify -q "${revs[1]}^{commit}") || die2 "HEAD '${revs[1]}' is not a revision here"
fi

# The plan of one side's run and the whole, before anything is built; it also checks the
# options meant for run_all.sh.
plan=$(python3 tools/run_all.py --plan --plan-runs=$((2 * pairs)) --only="$only" "${pass[@]}" 2>&1)
case $? in
  0) ;;
  2) die2 "${plan#run_all.sh: } (an option after --)" ;;
  *) die2 "cannot plan the runs: $(tail -n 1 <<<"$plan")" ;;
esac
echo "ab.sh: $pairs pairs x 2 sides of run_all.sh --only=$only ${pass[*]}" >&2
echo "$plan" >&2

stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=${out:-results/ab_${stamp}_$(hostname -s 2>/dev/null || hostname)}
mkdir -p "$out/logs" || die2 "cannot create $out"
out=$(cd "$out" && pwd)
[[ -z $(ls -A "$out/A" "$out/B" 2>/dev/null) ]] || die2 "$out already holds runs (A/, B/): use a new --out"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zb_ab.XXXXXX") || die2 "cannot create a temporary folder"
worktrees=()
cleanup() {
  for w in "${worktrees[@]}"; do git -C "$root" worktree remove --force "$w" >/dev/null 2>&1; done
  rm -rf "$tmp"
  git -C "$root" worktree prune >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# checkout SIDE SHA: a worktree of that revision; prints its path.
checkout() {
  git worktree add --detach "$tmp/$1" "$2" >"$out/logs/worktree_$1.log" 2>&1 || return 1
  worktrees+=("$tmp/$1")
}
# build SIDE SRC: configure once and build SRC/$build with the revision's own build script.
build_side() {
  local t0=$SECONDS opts=$cmake_opts
  log "building $1 in $2/$build"
  # A temporary worktree's build is only run, so it builds no tests; this checkout's build
  # folder may be the one ./run_tests.sh uses, and must keep them.
  [[ $2 == "$tmp"/* ]] && opts="-DBUILD_TESTING=OFF $opts"
  # ccache (CMakeLists.txt) finds what another checkout compiled once paths below the source
  # tree hash as relative ones: a worktree's build then costs a link, not a compile.
  # shellcheck disable=SC2086  # --cmake holds several options
  (cd "$2" && CCACHE_BASEDIR=$2 tools/build.sh "$build" $opts) >"$out/logs/build_$1.log" 2>&1 \
    || die2 "$1 does not build; see $out/logs/build_$1.log"
  [[ -d $2/$build/bin ]] || die2 "$1 built no $build/bin; see $out/logs/build_$1.log"
  log "$1 built in $((SECONDS - t0)) s"
}

tools/install_deps.sh || exit 2
checkout base "$base_sha" || die2 "cannot check out $base_sha; see $out/logs/worktree_base.log"
a_src=$tmp/base a_label="${revs[0]} ($(git rev-parse --short "$base_sha"))"
if [[ -n $head_sha ]]; then
  checkout head "$head_sha" || die2 "cannot check out $head_sha; see $out/logs/worktree_head.log"
  b_src=$tmp/head b_label="${revs[1]} ($(git rev-parse --short "$head_sha"))"
else
  b_src=$root b_label="working tree at $(git rev-parse --short HEAD)"
  [[ -n $(git status --porcelain --untracked-files=no) ]] && b_label+=" with uncommitted changes"
fi
build_side A "$a_src"
build_side B "$b_src"
# Both sides run their binaries through paths of the same length. The paths reach the
# benchmark in argv, and argv and the environment sit at the top of the stack: a longer
# path shifts every stack address, a known cause of steady differences of several percent
# between identical programs, the same way in every pair, which no number of pairs cancels.
# (Sessions here whose B was this checkout, at a shorter path than A's worktree, flagged
# only B as slower; sessions of two worktrees at equal paths flagged nothing.)
ln -s "$a_src/$build/bin" "$tmp/bin_A" && ln -s "$b_src/$build/bin" "$tmp/bin_B" \
  || die2 "cannot link the binaries into $tmp"

failed=0
# run_side SIDE PAIR FAMILY: one family on one side into OUT/SIDE/PAIR/FAMILY.
run_side() {
  local side=$1 pair=$2 fam=$3 t0=$SECONDS
  local -a extra=("${a_args[@]}")
  [[ $side == B ]] && extra=("${b_args[@]}")
  if ./run_all.sh --bin="$tmp/bin_$side" --only="$fam" --out="$out/$side/$pair/$fam" --no-figures \
      "${extra[@]}" "${pass[@]}" >"$out/logs/${pair}_${side}_$fam.log" 2>&1; then
    log "pair $pair $fam $side: done in $((SECONDS - t0)) s"
  else
    failed=$((failed + 1))
    log "pair $pair $fam $side: FAILED; see logs/${pair}_${side}_$fam.log"
  fi
}
for ((i = 1; i <= pairs; i++)); do
  pair=$(printf 'p%02d' "$i")
  order=(A B)
  ((i % 2 == 0)) && order=(B A)
  for fam in "${families[@]}"; do
    for side in "${order[@]}"; do run_side "$side" "$pair" "$fam"; done
  done
done

notes=(--note "both sides: run_all.sh ${pass[*]:-(no options)}; pairs alternate A B, B A")
((${#a_args[@]})) && notes+=(--note "A only: ${a_args[*]}")
((${#b_args[@]})) && notes+=(--note "B only: ${b_args[*]}")
python3 plots/ab/ab.py "$out" --a-label="$a_label" --b-label="$b_label" "${notes[@]}" "${ab_opts[@]}"
rc=$?
((rc == 0 && failed)) && rc=1
((failed)) && log "$failed benchmark run(s) failed; see $out/logs"
log "report: $out/ab.md (exit $rc)"
exit "$rc"
