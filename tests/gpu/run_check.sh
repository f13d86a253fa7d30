#!/bin/bash
# run_check.sh - runs one line of checks.tsv (CTest calls it; see
# CMakeLists.txt here for how a line becomes a test).
#
#   run_check.sh NAME GPUS HOW TIMEOUT EXPECT CHORUSRUN PROGRAM [ARGS...]
#
# GPUS   "N": needs N GPUs; "N-M": needs N, uses as many as are visible up
#        to M ({G} in ARGS becomes that count).
# HOW    "g": one process drives the GPUs (the program's own -g, or all
#        visible GPUs); "procs": one process per GPU, started by CHORUSRUN;
#        "hostsH": H hosts of one process per GPU each (H x GPUs ranks,
#        chorusrun --hosts H: NCCL_HOSTID per block, GPUs dealt out across
#        all ranks); "ghostsH": H hosts of one process each, which drives
#        the GPUs ({G} in ARGS for its -g); "splitH": one process per GPU,
#        the processes split into H hosts (GPUs / H ranks each, none shared).
# EXPECT "-", or a grep pattern (basic regular expression) that the output
#        must contain; then the program's exit status is not looked at, as
#        a check for an error message expects the program to fail.
# CHORUS_CHECK_GPUS=N: as if N GPUs were visible (ranks share GPUs).
# In ARGS, {E} becomes $CHORUS_CHECK_E (default 1M: the matrix's largest
# size; gpu.sh full sets 16M). A setting (from the test's ENVIRONMENT) whose
# value is {rank} is set to each process's rank (procs only), for checks of
# settings that differ across ranks.
#
# Exit status: the program's (0 passes; the perf programs fail on any row
# with wrong elements), 77 (skipped) with fewer GPUs than needed or without
# compute-sanitizer, 124 when the program outran TIMEOUT. The program's whole
# output goes to $CHORUS_CHECK_LOGS/check_NAME.log (default: check-logs/
# under the working directory); on failure this prints the rows with wrong
# elements and the output's end.
set -u
[ $# -ge 7 ] || { echo "usage: $0 NAME GPUS HOW TIMEOUT EXPECT CHORUSRUN PROGRAM [ARGS...]"; exit 2; }
name=$1 gpus=$2 how=$3 limit=$4 expect=$5 chorusrun=$6
shift 6

# GPUs this process may use: nvidia-smi's count (it ignores
# CUDA_VISIBLE_DEVICES), cut down by CUDA_VISIBLE_DEVICES as the CUDA
# runtime reads it (up to the first index that does not exist).
visible_gpus() {
  local n
  n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  [ -n "${CUDA_VISIBLE_DEVICES+set}" ] || { echo "$n"; return; }
  local count=0 d
  IFS=, read -r -a devs <<<"$CUDA_VISIBLE_DEVICES"
  for d in "${devs[@]}"; do
    if [[ $d =~ ^[0-9]+$ ]]; then
      [ "$d" -lt "$n" ] || break
    elif [ "$n" -eq 0 ]; then
      break
    fi
    count=$((count + 1))
  done
  echo "$count"
}
need=${gpus%-*} most=${gpus#*-}
have=$(visible_gpus)
# CHORUS_CHECK_GPUS=N runs the checks as on N GPUs where fewer are
# visible: ranks of a host then share GPUs (CHORUS_SHARE_GPU, slow), which
# tests the multi-GPU code paths, not their speed.
if [ -n "${CHORUS_CHECK_GPUS:-}" ] && ! [[ $CHORUS_CHECK_GPUS =~ ^[1-8]$ ]]; then
  echo "FAIL: CHORUS_CHECK_GPUS is a GPU count from 1 to 8, not '$CHORUS_CHECK_GPUS'"
  exit 2
fi
if [ -n "${CHORUS_CHECK_GPUS:-}" ] && [ "$have" -gt 0 ] && [ "$have" -lt "$CHORUS_CHECK_GPUS" ]; then
  have=$CHORUS_CHECK_GPUS
  export CHORUS_SHARE_GPU=1
fi
if [ "$have" -lt "$need" ]; then
  echo "skipped: needs $need GPU(s), $have visible"
  exit 77
fi
use=$((have < most ? have : most))

prog=$1
shift
if ! command -v "$prog" >/dev/null 2>&1; then
  # compute-sanitizer comes with the CUDA toolkit, not always on PATH
  if [ "$(basename "$prog")" = compute-sanitizer ]; then
    echo "skipped: compute-sanitizer not found"
    exit 77
  fi
  echo "FAIL: $prog not found (built?)"
  exit 1
fi
args=()
for a in "$@"; do
  a=${a//\{E\}/${CHORUS_CHECK_E:-1M}}
  args+=("${a//\{G\}/$use}")
done

# Settings that differ across ranks: each process sets its own.
per_rank=$(env | sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*\)={rank}$/\1/p' | tr '\n' ' ')
if [ -n "$per_rank" ] && [ "$how" = g ]; then
  echo "FAIL: {rank} settings ($per_rank) need one process per GPU"
  exit 2
fi
case $how in
  g) cmd=(timeout -k 5 "$((limit - 5))" "$prog" "${args[@]}") ;;
  procs)
    cmd=("$chorusrun" -n "$use" --timeout "$((limit - 10))")
    # shellcheck disable=SC2016 # expanded by each rank's shell
    [ -n "$per_rank" ] && cmd+=(sh -c 'for v in $0; do export "$v=$RANK"; done; exec "$@"' "$per_rank")
    cmd+=("$prog" "${args[@]}")
    ;;
  hosts[0-9]* | ghosts[0-9]*)
    h=${how#*hosts}
    np=$h
    [ "${how%%hosts*}" = g ] || np=$((h * use))
    cmd=("$chorusrun" -n "$np" --hosts "$h" --timeout "$((limit - 10))")
    # shellcheck disable=SC2016 # expanded by each rank's shell
    [ -n "$per_rank" ] && cmd+=(sh -c 'for v in $0; do export "$v=$RANK"; done; exec "$@"' "$per_rank")
    cmd+=("$prog" "${args[@]}")
    ;;
  split[0-9]*)
    cmd=("$chorusrun" -n "$use" --hosts "${how#split}" --timeout "$((limit - 10))" "$prog" "${args[@]}")
    ;;
  *) echo "FAIL: how is g, procs, hostsH, ghostsH or splitH, not $how"; exit 2 ;;
esac

logs=${CHORUS_CHECK_LOGS:-check-logs}
mkdir -p "$logs"
log=$logs/check_$name.log
echo "$gpus GPU(s), using $use: $(printf '%q ' "${cmd[@]}")"
[ "$expect" = - ] || echo "expecting: $expect"
"${cmd[@]}" >"$log" 2>&1
rc=$?
if [ "$expect" != - ]; then
  if grep -a -q -e "$expect" "$log"; then
    rc=0
  else
    echo "not found in the output: $expect"
    rc=1
  fi
fi
if [ "$rc" -eq 0 ]; then
  echo "ok ($log)"
elif [ "$rc" -eq 77 ]; then
  tail -3 "$log"
else
  echo "FAIL: exit $rc ($log)"
  # rows with wrong elements (#wrong: the 9th and 13th columns), then the end
  grep -a -E '^ +[0-9]+ +[0-9]+ ' "$log" | awk '$9 != "0" || $13 != "0"' | head -8 | sed 's/^/  /'
  tail -5 "$log" | sed 's/^/  /'
fi
exit "$rc"
