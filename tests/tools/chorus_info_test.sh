#!/bin/sh
# chorus_info_test.sh INFO - what chorus_info prints: every setting on one
# screen (66 lines), the rules and algorithms of both backends, an
# explanation naming the rule it took (one host and across hosts), and bad
# settings named as errors.
set -u
info=$1
fail() { echo "FAIL: $*"; exit 1; }
unset NCCL_ALGO NCCL_PROTO CHORUS_TUNE
out=$("$info") || fail "chorus_info exited $?"
lines=$(printf '%s\n' "$out" | wc -l)
[ "$lines" -le 66 ] || fail "the settings take $lines lines"
for v in NCCL_DEBUG NCCL_ALGO CHORUS_TUNE CHORUS_GPU_FIFO_BYTES CHORUS_OP_TIMEOUT; do
  printf '%s\n' "$out" | grep -q "^  $v " || fail "no line for $v"
done
printf '%s\n' "$out" | grep -q "CHORUS_GPU_FIFO_BYTES  *auto " || fail "FIFO default not auto"
CHORUS_OP_TIMEOUT=off "$info" | grep -q "CHORUS_OP_TIMEOUT  *600 =off " || fail "a set value not shown"
"$info" --algos | grep -q "^copyengine  *gpu " || fail "--algos lacks copyengine on gpu"
"$info" --rules | grep -q "allreduce:gpu:1M-16M:zerocopy" || fail "--rules lacks the zero-copy rule"
CHORUS_REPRODUCIBLE=1 "$info" --explain reducescatter 1M --host --ranks 4 | grep -q "algorithm ordered" ||
  fail "--explain does not name ordered under CHORUS_REPRODUCIBLE=1"
ex=$("$info" --explain allreduce 64K --gpu --ranks 4) || fail "--explain exited $?"
printf '%s\n' "$ex" | grep -q "default rule 12 matches: allreduce:gpu:n=3-:16K-1M:twoshot/LL" ||
  fail "--explain did not name the rule: $ex"
printf '%s\n' "$ex" | grep -q "^-> twoshot/LL" || fail "--explain did not give the choice: $ex"
ex=$(CHORUS_TUNE=allreduce:0-256K:oneshot "$info" --explain allreduce 64K --gpu --ranks 4)
printf '%s\n' "$ex" | grep -q "CHORUS_TUNE rule 1 matches" || fail "CHORUS_TUNE not first: $ex"
printf '%s\n' "$ex" | grep -q "^-> oneshot/LL" || fail "CHORUS_TUNE not taken: $ex"
ex=$("$info" --explain allreduce 8M --gpu --ranks 4 --one-process)
printf '%s\n' "$ex" | grep -q "^-> zerocopy/Simple" || fail "no zero-copy in one process: $ex"
# On 2 GPUs the ring overtakes zero-copy ReduceScatter above 256 MiB.
"$info" --explain reducescatter 256M --gpu --ranks 2 --one-process | grep -q "^-> zerocopy/" ||
  fail "2-GPU ReduceScatter of 256M not zero-copy"
"$info" --explain reducescatter 512M --gpu --ranks 2 --one-process | grep -q "^-> ring/" ||
  fail "2-GPU ReduceScatter of 512M not on the ring"
# From CHORUS_GPU_BIG_FROM the kernels may double the channels, and say so.
"$info" --explain broadcast 512M --gpu --ranks 2 | grep -q "channels (up to twice that from" ||
  fail "a 512M Broadcast chain does not say its channels may double"
"$info" --explain broadcast 64M --gpu --ranks 2 | grep -q "up to twice" &&
  fail "a 64M Broadcast chain says its channels may double"
# --cpus: 8 ranks with a core each price AllReduce at 64K by the 16-core
# fits (twoshot); on 2 cores they outnumber them (oneshot).
ex=$(CHORUS_READ_SLOWDOWN=1.6 "$info" --explain allreduce 64K --host --ranks 8 --cpus 16)
printf '%s\n' "$ex" | grep -q "^-> twoshot/Simple" || fail "8 ranks on 16 cores: $ex"
ex=$(CHORUS_READ_SLOWDOWN=1.6 "$info" --explain allreduce 64K --host --ranks 8 --cpus 2)
printf '%s\n' "$ex" | grep -q "^-> oneshot/Simple" || fail "8 ranks on 2 cores: $ex"
"$info" --explain allreduce 64K --host --cpus 0 2>/dev/null && fail "--cpus 0 accepted"
# Under maxCTAs (NCCL_MAX_CTAS, as a communicator's cap) LL lines give
# way to Simple steps past 12 KiB of a peer's lines per CTA, and the 2-GPU
# two-shot is passed over; without a cap, the defaults.
ex=$(NCCL_MAX_CTAS=8 "$info" --explain allreduce 512K --gpu --ranks 2)
printf '%s\n' "$ex" | grep -q "skipped: no protocol can run it here" || fail "capped two-shot: $ex"
printf '%s\n' "$ex" | grep -q "^-> oneshot/Simple, 8 channels" || fail "capped 512K: $ex"
NCCL_MAX_CTAS=8 "$info" --explain allreduce 64K --gpu --ranks 2 | grep -q "^-> oneshot/LL" ||
  fail "capped 64K not in LL lines"
"$info" --explain allreduce 512K --gpu --ranks 2 | grep -q "^-> twoshot/LL" ||
  fail "uncapped 512K not the LL two-shot"
# Across hosts: the cost model prices hier (with its steps and the host
# call under it) and staged, by the network's figures: a slower network
# takes hier for smaller calls; staged for what hier cannot cut; NCCL_ALGO
# names both.
ex=$("$info" --explain allreduce 1M --gpu --ranks 4 --hosts 2)
printf '%s\n' "$ex" | grep -q "^-> hier/Simple" || fail "across hosts, no hier: $ex"
printf '%s\n' "$ex" | grep -Eq "priced: hier/Simple [0-9.]+ us, staged/Simple [0-9.]+ us" ||
  fail "across hosts, not both priced: $ex"
printf '%s\n' "$ex" | grep -q "the host call across hosts (512K on 2 ranks)" || fail "hier step: $ex"
ex=$(CHORUS_NET=9.5,3.5 "$info" --explain allreduce 32K --gpu --ranks 4 --hosts 2)
printf '%s\n' "$ex" | grep -q "^-> staged/Simple" || fail "32K over loopback's figures: $ex"
ex=$(CHORUS_NET=200,0.5 "$info" --explain allreduce 32K --gpu --ranks 4 --hosts 2)
printf '%s\n' "$ex" | grep -q "^-> hier/Simple" || fail "32K over a slow network: $ex"
# One rank per host: hier without steps in the host, the whole call on lanes.
ex=$("$info" --explain allgather 4M --gpu --ranks 2 --hosts 2)
printf '%s\n' "$ex" | grep -q "^-> hier/Simple" || fail "one rank per host, no hier: $ex"
printf '%s\n' "$ex" | grep -q "one rank per host: nothing to do in the host" || fail "1/host: $ex"
printf '%s\n' "$ex" | grep -q "the host call across hosts (4M on 2 ranks)" || fail "1/host step: $ex"
ex=$("$info" --explain allreduce 1M --gpu --ranks 3 --hosts 2)
printf '%s\n' "$ex" | grep -q "skipped hier: hosts hold different numbers of ranks" || fail "uneven: $ex"
printf '%s\n' "$ex" | grep -q "^-> staged/Simple" || fail "uneven hosts not staged: $ex"
ex=$(NCCL_ALGO=staged "$info" --explain allgather 64M --gpu --ranks 8 --hosts 2)
printf '%s\n' "$ex" | grep -q "^-> staged/Simple" || fail "NCCL_ALGO=staged not taken: $ex"
printf '%s\n' "$ex" | grep -q "run as a host call on 8 ranks" || fail "staged step: $ex"
# CHORUS_NET prices the hops: 2 x 5 ms hops at least for recursive doubling
# on 4 ranks of 2 hosts; a malformed value is named.
ex=$(CHORUS_NET=5000,0.01 "$info" --explain allreduce 64K --host --ranks 4 --hosts 2)
us=$(printf '%s\n' "$ex" | sed -n 's/^modelled time: \([0-9.]*\) us/\1/p')
awk -v u="${us:-0}" 'BEGIN { exit !(u >= 10000) }' || fail "CHORUS_NET not priced: $ex"
err=$(CHORUS_NET=5,x "$info" --explain allreduce 64K --host --ranks 4 --hosts 2 2>&1) &&
  fail "a bad CHORUS_NET passed"
printf '%s\n' "$err" | grep -q 'CHORUS_NET=5,x' || fail "the bad CHORUS_NET is not named: $err"
ex=$("$info" --explain allreduce 1M --host --ranks 2)
printf '%s\n' "$ex" | grep -Eq "cost model prices (ring|oneshot|twoshot|zerocopy)/Simple cheapest" || fail "host: $ex"
# Peer reads priced as the library prices them where the kernel allows them,
# by this machine's reads against its memcpy (which wins depends on them);
# where they cost more than two copies (CHORUS_READ_DEAR), zerocopy is
# priced above them and not chosen. The ratio forced both ways
# (CHORUS_READ_SLOWDOWN), then measured.
ex=$(CHORUS_READ_SLOWDOWN=1 "$info" --explain allreduce 4M --host --ranks 2)
case $ex in
*"not measured"*) ;;
*)
  printf '%s\n' "$ex" | grep -Eq "priced: .*zerocopy/Simple [0-9.]+ us" || fail "reads cheap: $ex"
  ex=$(CHORUS_READ_SLOWDOWN=8 "$info" --explain allreduce 4M --host --ranks 2)
  printf '%s\n' "$ex" | grep -q "8.00x .* over 2.0: dearer than two copies, so zerocopy is priced above" ||
    fail "reads dear: not said: $ex"
  printf '%s\n' "$ex" | grep -q "^-> zerocopy" && fail "reads dear: zerocopy chosen: $ex"
  ex=$(CHORUS_READ_SLOWDOWN=8 "$info" --explain scatter 1M --host --ranks 2)
  printf '%s\n' "$ex" | grep -Eq "priced: .*zerocopy/Simple [0-9.]+ us" || fail "reads dear: zerocopy unpriced: $ex"
  printf '%s\n' "$ex" | grep -q "^-> zerocopy" && fail "reads dear: the Scatter by zerocopy: $ex"
  ;;
esac
ex=$("$info" --explain allreduce 4M --host --ranks 2)
printf '%s\n' "$ex" | grep -Eq "peer reads between processes: ([0-9.]+x memcpy|not measured)" ||
  fail "the machine's read slowdown is not said: $ex"
err=$(CHORUS_TUNE=allreduce:0-2Q:ring "$info" --rules 2>&1) && fail "a bad CHORUS_TUNE passed"
printf '%s\n' "$err" | grep -q '"0-2Q"' || fail "the bad token is not named: $err"
err=$(NCCL_ALGO=allreduce:rnig "$info" --explain allreduce 1M 2>&1) && fail "a bad NCCL_ALGO passed"
printf '%s\n' "$err" | grep -q '"rnig"' || fail "the bad word is not named: $err"
echo "chorus_info: ok"
