# perf_lib.sh - sourced by the tools tests that run the perf programs
# under chorusrun and keep the last run's output in $out.

# fail WHY: the run's last lines, then why; exit 1.
fail() {
  printf '%s\n' "$out" | tail -20
  echo "FAIL: $*"
  exit 1
}

# wrong_rows: up to 3 result rows of $out with wrong results (out of place
# or in place); nothing when every row is right.
wrong_rows() {
  printf '%s\n' "$out" | awk '/^ +[0-9]+ / && ($9 != 0 || $13 != 0)' | head -3
}

# need_cpus N: skip (77) on a machine of fewer than N CPUs.
need_cpus() {
  [ "$(getconf _NPROCESSORS_ONLN)" -ge "$1" ] || { echo "skipped: fewer than $1 CPUs"; exit 77; }
}

# cpus_said: what the 2 ranks of the run in $out said of the CPUs they may
# run on (their INFO line at init), each distinct answer once.
cpus_said() {
  printf '%s\n' "$out" | sed -n 's/.*rank [01]: 2 rank(s) on this machine may run on \(.*\)/\1/p' |
    sort -u
}
