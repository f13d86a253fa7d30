// gloo_bench.cc - Gloo reference numbers for the Chorus comparison.
//
// One process per rank (RANK and WORLD_SIZE from the environment, as
// chorusrun and torchrun set them). Ranks meet through a gloo FileStore in a
// directory shared by all of them, wrapped in a PrefixStore unique to the run,
// and talk over Gloo's TCP transport on 127.0.0.1, or on the interface
// GLOO_SOCKET_IFNAME names (this Gloo has no shared-memory transport).
// Every collective is called the way PyTorch's ProcessGroupGloo calls it:
//
//   collective      Gloo call                                   placement
//   all_reduce      gloo::allreduce, default algorithm, sum      in place
//   all_gather      gloo::allgather                              out of place
//   broadcast       gloo::broadcast, root 0                      in place
//   reduce_scatter  ReduceScatterHalvingDoubling<float> (old API) in place
//   alltoall        gloo::alltoall                               out of place
//   reduce          gloo::reduce, sum, root 0                    in place
//   gather          gloo::gather, root 0                         out of place
//   scatter         gloo::scatter, root 0                        out of place
//   sendrecv        UnboundBuffer send to rank+1, recv from rank-1 out of place
//
// Sizes, element counts, busbw factors, checking and timing follow
// bench/mpi_bench.c (and the CPU anchors): check once, zero the buffers,
// calibrate (3 operations, then ~20 ms), warm up (10 %, >= 1), timed loop of
// ~0.2 s (>= -m iterations), time = per-operation average of the slowest rank.
// The result goes to the JSON field "in_place" or "out_of_place" as in the
// table above; the other one is null.
//
// Gloo is very slow at some sizes (tens of ms per 64 KiB; seconds per op for
// MiB-sized broadcasts and 4-rank allreduces), so two limits keep a sweep
// bounded: -x caps the size (larger sizes print "-" and write no JSON), and
// when the checked operation of one size takes more than -S seconds, that
// size is timed with -m iterations and no calibration, and the larger sizes
// of that collective are skipped ("-"). Sizes whose element count is 0 (e.g.
// 8 B all_gather on 4 ranks) are skipped too.
//
// Every operation has Gloo's timeout (-T seconds); a failure throws, the
// process prints it and exits 1, and the launcher stops the other ranks.
//
// Usage: chorusrun -n N gloo_bench [-c coll[,coll...]|all] [-b 8] [-e 256M]
//          [-f 2] [-x cap] [-S 2] [-D 0.2] [-C 0.02] [-m 3] [-T 300]
//          [-J file] [-s store_dir] [-p prefix]
// Build: g++ -std=c++17 -O2 -Wall -Wextra gloo_bench.cc -lgloo -lpthread
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <sys/stat.h>
#include <unistd.h>

#include "bench_common.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#ifndef GLOO_PKG_VERSION
#define GLOO_PKG_VERSION "unknown"
#endif

namespace {

const char kBenchVersion[] = "1";
const float kSentinel = -12345.0f; // never a valid result: inputs are >= 0
const uint32_t kTagOp = 1, kTagBarrier = 2, kTagMax = 3, kTagSum = 4;

using ReduceFn = void (*)(void *, const void *, const void *, size_t);

// ---- the collectives ------------------------------------------------------

// What Gloo times for each collective (bench_colls[id] has the rest), and
// whether its input lives in the output buffer.
struct GlooCall {
  const char *call; // "algorithm" in the JSON
  bool inplace;
};

const GlooCall kCalls[NCOLLS] = {
    {"gloo::allreduce (default algorithm)", true},
    {"gloo::allgather", false},
    {"gloo::broadcast", true},
    {"gloo::ReduceScatterHalvingDoubling", true},
    {"gloo::alltoall", false},
    {"gloo::reduce", true},
    {"gloo::gather", false},
    {"gloo::scatter", false},
    {"gloo UnboundBuffer send/recv ring shift", false},
};

// ---- the process ------------------------------------------------------------

struct Options {
  bool want[NCOLLS] = {};
  size_t minb = 8, maxb = 256u << 20, factor = 2, cap = 0; // cap 0: none
  double target_s = 0.2, calib_s = 0.02, slow_s = 2.0;
  long min_iters = 3;
  int timeout_s = 300;
  std::string json_path, store_dir, prefix;
};

struct Bench {
  int rank = 0, n = 1;
  std::shared_ptr<gloo::Context> ctx;
  float *send = nullptr;
  float *recv = nullptr;
  const Options *o = nullptr;
  FILE *json = nullptr;
  // Old-API reduce-scatter of the current size (it sets up its buffers once).
  std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> rs;
  // Unbound buffers of the current sendrecv size.
  std::unique_ptr<gloo::transport::UnboundBuffer> p2p_send, p2p_recv;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void barrier(Bench &b) {
  gloo::BarrierOptions opts(b.ctx);
  opts.setTag(kTagBarrier);
  gloo::barrier(opts);
}

// One double combined over ranks (max or sum) with gloo::allreduce.
double combine(Bench &b, double v, bool max) {
  gloo::AllreduceOptions opts(b.ctx);
  opts.setOutput(&v, 1);
  opts.setReduceFunction(max ? static_cast<ReduceFn>(&gloo::max<double>)
                             : static_cast<ReduceFn>(&gloo::sum<double>));
  opts.setTag(max ? kTagMax : kTagSum);
  gloo::allreduce(opts);
  return v;
}

// Per-size setup that old-API algorithms and unbound buffers need.
void prepare(Bench &b, int id, const bench_counts &k) {
  b.rs.reset();
  b.p2p_send.reset();
  b.p2p_recv.reset();
  if (id == REDUCESCATTER) {
    std::vector<float *> ptrs{b.recv};
    std::vector<int> elems(b.n, static_cast<int>(k.param));
    b.rs.reset(new gloo::ReduceScatterHalvingDoubling<float>(b.ctx, ptrs, static_cast<int>(k.send),
                                                             elems));
  } else if (id == SENDRECV) {
    b.p2p_send = b.ctx->createUnboundBuffer(b.send, k.send * sizeof(float));
    b.p2p_recv = b.ctx->createUnboundBuffer(b.recv, k.recv * sizeof(float));
  }
}

// One operation. Where the call is in place, its buffer is recv.
void run_op(Bench &b, int id, const bench_counts &k) {
  const auto &ctx = b.ctx;
  const size_t p = k.param;
  switch (id) {
  case ALLREDUCE: {
    gloo::AllreduceOptions opts(ctx);
    opts.setOutput(b.recv, p);
    opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
    opts.setTag(kTagOp);
    gloo::allreduce(opts);
    break;
  }
  case ALLGATHER: {
    gloo::AllgatherOptions opts(ctx);
    opts.setInput(b.send, p);
    opts.setOutput(b.recv, p * b.n);
    opts.setTag(kTagOp);
    gloo::allgather(opts);
    break;
  }
  case BROADCAST: {
    gloo::BroadcastOptions opts(ctx);
    opts.setOutput(b.recv, p);
    opts.setRoot(0);
    opts.setTag(kTagOp);
    gloo::broadcast(opts);
    break;
  }
  case REDUCESCATTER:
    b.rs->run();
    break;
  case ALLTOALL: {
    gloo::AlltoallOptions opts(ctx);
    opts.setInput(b.send, p * b.n);
    opts.setOutput(b.recv, p * b.n);
    opts.setTag(kTagOp);
    gloo::alltoall(opts);
    break;
  }
  case REDUCE: {
    gloo::ReduceOptions opts(ctx);
    opts.setOutput(b.recv, p);
    opts.setRoot(0);
    opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
    opts.setTag(kTagOp);
    gloo::reduce(opts);
    break;
  }
  case GATHER: {
    gloo::GatherOptions opts(ctx);
    opts.setInput(b.send, p);
    if (b.rank == 0) opts.setOutput(b.recv, p * b.n);
    opts.setTag(kTagOp);
    opts.setRoot(0);
    gloo::gather(opts);
    break;
  }
  case SCATTER: {
    gloo::ScatterOptions opts(ctx);
    if (b.rank == 0) {
      std::vector<float *> blocks;
      for (int r = 0; r < b.n; r++) blocks.push_back(b.send + static_cast<size_t>(r) * p);
      opts.setInputs(blocks, p);
    }
    opts.setOutput(b.recv, p);
    opts.setRoot(0);
    opts.setTag(kTagOp);
    gloo::scatter(opts);
    break;
  }
  case SENDRECV: {
    int next = (b.rank + 1) % b.n, prev = (b.rank + b.n - 1) % b.n;
    auto timeout = std::chrono::milliseconds(1000L * b.o->timeout_s);
    b.p2p_recv->recv(prev, kTagOp);
    b.p2p_send->send(next, kTagOp);
    if (!b.p2p_send->waitSend(timeout) || !b.p2p_recv->waitRecv(timeout))
      throw std::runtime_error("send/recv aborted");
    break;
  }
  }
}

// ---- checking ---------------------------------------------------------------

// Expected result element j on this rank; false where the collective leaves
// it undefined (non-root of reduce and gather).
bool expected(const Bench &b, int id, const bench_counts &k, size_t j, float *v) {
  size_t per = k.param;
  int me = b.rank, n = b.n;
  switch (id) {
  case ALLREDUCE:
    *v = bench_sum_over_ranks(n, j);
    return true;
  case ALLGATHER:
    *v = bench_pattern(static_cast<int>(j / per), j % per);
    return true;
  case BROADCAST:
    *v = bench_pattern(0, j);
    return true;
  case REDUCESCATTER:
    *v = bench_sum_over_ranks(n, static_cast<size_t>(me) * per + j);
    return true;
  case ALLTOALL:
    *v = bench_pattern(static_cast<int>(j / per), static_cast<size_t>(me) * per + j % per);
    return true;
  case REDUCE:
    *v = bench_sum_over_ranks(n, j);
    return me == 0;
  case GATHER:
    *v = bench_pattern(static_cast<int>(j / per), j % per);
    return me == 0;
  case SCATTER:
    *v = bench_pattern(0, static_cast<size_t>(me) * per + j);
    return true;
  case SENDRECV:
    *v = bench_pattern((me + n - 1) % n, j);
    return true;
  }
  return false;
}

// One checked operation: returns wrong elements over all ranks and sets
// *seconds to the time of that operation on the slowest rank.
long long check_op(Bench &b, int id, const bench_counts &k, double *seconds) {
  if (kCalls[id].inplace) { // the input lives in recv, and the result lands there
    for (size_t i = 0; i < k.send; i++)
      b.recv[i] = (id == BROADCAST && b.rank != 0) ? kSentinel : bench_pattern(b.rank, i);
  } else {
    for (size_t i = 0; i < k.send; i++) b.send[i] = bench_pattern(b.rank, i);
    for (size_t i = 0; i < k.recv; i++) b.recv[i] = kSentinel;
  }
  barrier(b);
  double t0 = now_s();
  run_op(b, id, k);
  *seconds = combine(b, now_s() - t0, true);
  long long wrong = 0;
  for (size_t j = 0; j < k.recv; j++) {
    float want;
    if (expected(b, id, k, j, &want) && b.recv[j] != want) wrong++;
  }
  return static_cast<long long>(combine(b, static_cast<double>(wrong), false));
}

// ---- timing -----------------------------------------------------------------

// Seconds per operation of `count` back-to-back operations, slowest rank.
double timed_loop(Bench &b, int id, const bench_counts &k, long count) {
  barrier(b);
  double t0 = now_s();
  for (long i = 0; i < count; i++) run_op(b, id, k);
  return combine(b, (now_s() - t0) / static_cast<double>(count), true);
}

// Zero the buffers, calibrate (unless the checked op was already slow), warm
// up, time. Returns seconds per operation and sets *iters.
double measure(Bench &b, int id, const bench_counts &k, double check_s, long *iters) {
  const Options &o = *b.o;
  std::memset(b.send, 0, std::max(k.send, k.recv) * sizeof(float));
  std::memset(b.recv, 0, std::max(k.send, k.recv) * sizeof(float));
  double t = check_s;
  if (check_s < o.target_s) {
    t = timed_loop(b, id, k, 3);
    if (t < o.calib_s) {
      long c = static_cast<long>(o.calib_s / std::max(t, 1e-9));
      if (c > 3) t = timed_loop(b, id, k, std::min(c, 1000000L));
    }
  }
  long n = std::max(o.min_iters, static_cast<long>(o.target_s / std::max(t, 1e-9)));
  n = std::min(n, 10000000L);
  long warm = std::max(1L, n / 10);
  for (long i = 0; i < warm; i++) run_op(b, id, k);
  *iters = n;
  return timed_loop(b, id, k, n);
}

// ---- output -----------------------------------------------------------------

void print_header(const Bench &b, int id) {
  const Options &o = *b.o;
  const bench_coll &c = bench_colls[id];
  std::printf("# gloo_bench %s: %s (%s: %s) on %d ranks, Gloo %s, TCP 127.0.0.1\n", kBenchVersion,
              c.name, c.opt, kCalls[id].call, b.n, GLOO_PKG_VERSION);
  std::printf("# minBytes %zu maxBytes %zu cap %zu, target %.3f s per size, slow op %.1f s, "
              "min iters %ld; time = slowest rank, %s\n",
              o.minb, o.maxb, o.cap, o.target_s, o.slow_s, o.min_iters,
              kCalls[id].inplace ? "in place" : "out of place");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s  %8s\n", "size", "count", "type",
              "redop", "root", "time", "algbw", "busbw", "#wrong", "iters");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s  %8s\n", "(B)", "(elements)", "", "",
              "", "(us)", "(GB/s)", "(GB/s)", "", "");
  std::fflush(stdout);
}

void print_skipped(int id, size_t bytes, const bench_counts &k, const char *why) {
  const bench_coll &c = bench_colls[id];
  std::printf("%12zu  %12zu  %8s  %6s  %6d  %9s  %7s  %7s  %6s  %8s  (%s)\n", bytes, k.param,
              "float", c.reduces ? "sum" : "none", c.rooted ? 0 : -1, "-", "-", "-", "-", "-", why);
  std::fflush(stdout);
}

void print_row(const Bench &b, int id, size_t bytes, const bench_counts &k, double sec,
               long long wrong, long iters) {
  const bench_coll &c = bench_colls[id];
  const GlooCall &g = kCalls[id];
  double algbw = sec > 0 ? static_cast<double>(bytes) / 1e9 / sec : 0;
  double busbw = algbw * bench_bus_factor(&c, b.n);
  const char *redop = c.reduces ? "sum" : "none";
  int root = c.rooted ? 0 : -1;
  std::printf("%12zu  %12zu  %8s  %6s  %6d  %9.2f  %7.3f  %7.3f  %6lld  %8ld\n", bytes, k.param,
              "float", redop, root, sec * 1e6, algbw, busbw, wrong, iters);
  std::fflush(stdout);
  if (!b.json) return;
  char res[256];
  std::snprintf(res, sizeof res,
                "{\"time_us\":%.9g,\"algbw_gbs\":%.9g,\"busbw_gbs\":%.9g,\"wrong\":%lld}",
                sec * 1e6, algbw, busbw, wrong);
  std::fprintf(b.json,
               "{\"collective\":\"%s\",\"size\":%zu,\"count\":%zu,\"type\":\"float\","
               "\"redop\":\"%s\",\"root\":%d,\"nranks\":%d,\"out_of_place\":%s,\"in_place\":%s,"
               "\"nccl_library\":null,\"nccl_headers\":null,\"chorus_perf\":null,"
               "\"library\":\"Gloo %s\",\"algorithm\":\"%s\",\"bench\":\"gloo_bench %s\","
               "\"iters\":%ld}\n",
               c.name, bytes, k.param, redop, root, b.n, g.inplace ? "null" : res,
               g.inplace ? res : "null", GLOO_PKG_VERSION, g.call, kBenchVersion, iters);
  std::fflush(b.json);
}

// Sweeps the sizes of one collective; returns the wrong elements.
long long run_coll(Bench &b, int id) {
  const Options &o = *b.o;
  if (b.rank == 0) print_header(b, id);
  long long failures = 0;
  const char *stop = nullptr; // why the remaining sizes are skipped
  for (size_t s = o.minb; s <= o.maxb; s *= o.factor) {
    bench_counts k = bench_counts_of(&bench_colls[id], s / sizeof(float), b.n);
    size_t bytes = std::max(k.send, k.recv) * sizeof(float);
    if (!stop && o.cap && bytes > o.cap) stop = "over the -x cap";
    if (stop || k.param == 0) {
      if (b.rank == 0) print_skipped(id, bytes, k, stop ? stop : "no elements");
    } else {
      prepare(b, id, k);
      double check_s = 0;
      long long wrong = check_op(b, id, k, &check_s);
      long iters = 0;
      double sec = measure(b, id, k, check_s, &iters);
      failures += wrong;
      if (b.rank == 0) print_row(b, id, bytes, k, sec, wrong, iters);
      if (check_s > o.slow_s) stop = "a smaller size took longer than -S";
    }
    if (s > o.maxb / o.factor) break; // the next step would overflow
  }
  b.rs.reset();
  b.p2p_send.reset();
  b.p2p_recv.reset();
  if (b.rank == 0) std::printf("#\n");
  return failures;
}

// ---- command line -----------------------------------------------------------

bool parse_colls(const std::string &list, bool *want) {
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string tok =
        list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    bool found = false;
    for (int i = 0; i < NCOLLS; i++)
      if (tok == "all" || tok == bench_colls[i].opt || tok == bench_colls[i].name)
        want[i] = found = true;
    if (!found) {
      std::fprintf(stderr, "gloo_bench: unknown collective '%s'\n", tok.c_str());
      return false;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return true;
}

void usage() {
  std::fprintf(stderr,
               "usage: chorusrun -n N gloo_bench [-c coll[,coll..]|all] [-b minbytes] "
               "[-e maxbytes] [-f factor]\n"
               "         [-x cap_bytes] [-S slow_s] [-D target_s] [-C calib_s] [-m min_iters]\n"
               "         [-T timeout_s] [-J json_file] [-s store_dir] [-p prefix]\n"
               "RANK and WORLD_SIZE come from the environment.\n");
}

bool parse_args(int argc, char **argv, Options *o) {
  bool any = false;
  int opt;
  while ((opt = getopt(argc, argv, "c:b:e:f:x:S:D:C:m:T:J:s:p:h")) != -1) {
    switch (opt) {
    case 'c':
      if (!parse_colls(optarg, o->want)) return false;
      any = true;
      break;
    case 'b':
      o->minb = bench_parse_size(optarg);
      break;
    case 'e':
      o->maxb = bench_parse_size(optarg);
      break;
    case 'f':
      o->factor = static_cast<size_t>(std::atol(optarg));
      break;
    case 'x':
      o->cap = bench_parse_size(optarg);
      break;
    case 'S':
      o->slow_s = std::atof(optarg);
      break;
    case 'D':
      o->target_s = std::atof(optarg);
      break;
    case 'C':
      o->calib_s = std::atof(optarg);
      break;
    case 'm':
      o->min_iters = std::atol(optarg);
      break;
    case 'T':
      o->timeout_s = std::atoi(optarg);
      break;
    case 'J':
      o->json_path = optarg;
      break;
    case 's':
      o->store_dir = optarg;
      break;
    case 'p':
      o->prefix = optarg;
      break;
    default:
      return false;
    }
  }
  if (!any) parse_colls("all", o->want);
  if (o->minb == 0 || o->maxb < o->minb || o->factor < 2 || o->min_iters < 1 || o->target_s <= 0 ||
      o->timeout_s <= 0) {
    std::fprintf(stderr, "gloo_bench: bad size range, factor, target, iterations or timeout\n");
    return false;
  }
  return true;
}

int env_int(const char *name, int dflt) {
  const char *v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  if (!parse_args(argc, argv, &o)) {
    usage();
    return 2;
  }
  Bench b;
  b.o = &o;
  b.rank = env_int("RANK", 0);
  b.n = env_int("WORLD_SIZE", 1);
  // The store directory and prefix must be the same on every rank: by default
  // both derive from the parent process (the launcher), which all ranks share.
  const char *tmp = std::getenv("TMPDIR");
  std::string dir = !o.store_dir.empty() ? o.store_dir
                                         : std::string(tmp && *tmp ? tmp : "/tmp") +
                                               "/gloo_bench." + std::to_string(getppid());
  std::string prefix = !o.prefix.empty() ? o.prefix : "run" + std::to_string(getppid());
  mkdir(dir.c_str(), 0700); // EEXIST from the other ranks is fine
  long long failures = 0;
  try {
    // Loopback unless GLOO_SOCKET_IFNAME names an interface, as PyTorch reads
    // it (bench/netns_hosts.sh sets it to the rank's namespace interface).
    gloo::transport::tcp::attr attr;
    const char *ifname = std::getenv("GLOO_SOCKET_IFNAME");
    if (ifname && *ifname)
      attr.iface = ifname;
    else
      attr.hostname = "127.0.0.1";
    attr.ai_family = AF_INET;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore file_store(dir);
    gloo::rendezvous::PrefixStore store(prefix, file_store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(b.rank, b.n);
    ctx->setTimeout(std::chrono::seconds(o.timeout_s));
    ctx->connectFullMesh(store, dev);
    b.ctx = ctx;
    barrier(b); // everyone has read the store: rank 0 may remove it
    if (b.rank == 0) std::filesystem::remove_all(dir);

    size_t cap_bytes = (o.cap && o.cap < o.maxb ? o.cap : o.maxb) + sizeof(float);
    void *s = nullptr;
    void *r = nullptr;
    if (posix_memalign(&s, 4096, cap_bytes) || posix_memalign(&r, 4096, cap_bytes))
      throw std::runtime_error("out of memory for the buffers");
    b.send = static_cast<float *>(s);
    b.recv = static_cast<float *>(r);
    std::memset(b.send, 0, cap_bytes); // fault the pages in before any timing
    std::memset(b.recv, 0, cap_bytes);
    if (b.rank == 0 && !o.json_path.empty()) {
      b.json = std::fopen(o.json_path.c_str(), "w");
      if (!b.json) std::perror(o.json_path.c_str());
    }
    for (int id = 0; id < NCOLLS; id++)
      if (o.want[id]) failures += run_coll(b, id);
    barrier(b);
  } catch (const std::exception &e) {
    std::fprintf(stdout, "\ngloo_bench: rank %d failed: %s\n", b.rank, e.what());
    std::fflush(stdout);
    std::_Exit(1); // peers blocked in Gloo calls are stopped by the launcher
  }
  if (b.rank == 0) {
    std::printf("# Out of bounds values : %lld %s\n", failures, failures ? "FAILED" : "OK");
    if (b.json) std::fclose(b.json);
  }
  b.ctx.reset();
  std::free(b.send);
  std::free(b.recv);
  return failures ? 1 : 0;
}
