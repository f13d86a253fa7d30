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
