#!/usr/bin/env bash
# Run one benchmark and keep its whole output with what it ran on, for docs/data/.
#
#     benchmarks/record.sh docs/data/cpu_load_run1.txt .venv/bin/python benchmarks/load.py --sessions 20 --renders 6
#
# Writes: the date (UTC), the commit and whether the tree had local changes, the exact command, nproc, the CPU
# model, the load averages (`uptime`) before and after, the command's stdout and stderr as they came, its exit
# code and wall time. The load averages are there because other processes (test suites) may share the machine.
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 OUTFILE COMMAND [ARGS...]" >&2
  exit 2
fi
out=$1
shift
{
  echo "# date (UTC): $(date -u '+%Y-%m-%d %H:%M:%S')"
  echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes in the tree)')"
  echo "# command: $*"
  echo "# nproc: $(nproc)"
  echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "# python: $("${PYTHON:-.venv/bin/python}" --version 2>&1)"
  echo "# load before: $(uptime)"
  echo "# ---- output ----"
} > "$out"
start=$(date +%s.%N)
"$@" >> "$out" 2>&1
rc=$?
end=$(date +%s.%N)
{
  echo "# ---- end of output ----"
  echo "# exit code: $rc"
  echo "# wall time: $(echo "$end - $start" | bc) s"
  echo "# load after: $(uptime)"
} >> "$out"
cat "$out"
exit $rc
