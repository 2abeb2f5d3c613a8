#!/usr/bin/env bash
# run_all.sh: the command users type. Runs the whole zerobench suite through tools/run_all.py,
# which reads tools/run_table.toml, installs what is missing and builds unless --bin is given,
# prints the plan and a progress line, and writes results/<UTC stamp>_<host>/ (see --help).
set -uo pipefail
root=$(cd "$(dirname "$0")" && pwd)
cd "$root" || exit 1
# The runner is Python (3.11 or newer, for tomllib): on a fresh machine it comes with the rest
# of what zerobench needs.
if ! python3 -c 'import tomllib' >/dev/null 2>&1; then
  tools/install_deps.sh || exit 1
  python3 -c 'import tomllib' >/dev/null 2>&1 \
    || { echo "run_all.sh: needs Python 3.11 or newer (python3 -c 'import tomllib' fails)" >&2; exit 1; }
fi
exec python3 tools/run_all.py "$@"
