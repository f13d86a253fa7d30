/*
 * observe.c - GPU calls as the observability features show them: calls
 * captured in a CUDA graph on the CHORUS_TRACE timeline, once per replay,
 * at the times the GPU ran them; and the bytes the kernels moved to each
 * peer in the state dump.
 *
 * One process per GPU (chorusrun; also as hosts), CHORUS_TRACE set (with
 * %p); or -g N, one process driving N GPUs (the dump alone: an
 * AllGather, the copy engine's where CHORUS_TUNE says, must count its
 * blocks). Each rank makes one eager AllReduce of 1M floats; with
 * CHORUS_DUMP_SIGNAL set (one host), it then asks for the state dump
 * (chorusDumpState) and reads CHORUS_DUMP_FILE (with %p): every peer's
 * entry must say what the kernels sent and received, together at least
 * what an AllReduce must move, 2 (n - 1) / n of the buffer each way, and
 * no more than a copy of it to every peer and back. Then it captures two
 * in-place AllReduces of 1M floats and a Broadcast into a graph and
 * replays it R times, the host clock read before the first replay and
 * after the last one ended; the results are checked. After
 * ncclCommDestroy its trace file must hold, for each of the three
 * captured calls, one event per replay marked "graph":true, replays
 * 0..R-1, each with a positive duration, inside the host's window, and
 * each replay after the one before it. With CHORUS_STATS_FILE set (with
 * %p) and CHORUS_STATS_INTERVAL, the statistics' last line must count the
 * captured calls once per replay and not at their capture: 1 + 2 R
 * AllReduces and R Broadcasts. With CHORUS_OBSERVE_PROF=1 the test
 * profiler plugin (tests/profiler, beside this program's folder) logs the
 * calls: the three captured calls' CollApi and GroupApi events must say
 * GraphCaptured, the eager AllReduce's not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chorus.h"
#include "gpu_test.h"

#define COUNT (1 << 20)
#define R     4
#define SLACK                                                                                      \
  2000.0 /* us: the GPU clock's offset is measured to a few us, the window's ends are              \
            host times of their own */

typedef struct {
  char name[32];
  int index, replay;
  double ts, dur;
} event;

/* The calls of func the statistics' last line of `path` counts; -1 when
 * there is none. */
static long stats_calls(const char *path, const char *func) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  static char line[16384];
  long calls = -1;
  char key[64];
  snprintf(key, sizeof key, "\"%s\":{\"calls\":", func);
  while (fgets(line, sizeof line, f)) {
    if (!strstr(line, "\"last\":true")) continue;
    const char *p = strstr(line, key);
    calls = p ? strtol(p + strlen(key), NULL, 10) : 0;
  }
  fclose(f);
  return calls;
}

/* The test plugin (tests/profiler/libnccl-profiler-test5.so, beside this
 * program's tests/gpu) logging to a file of this process. */
static int load_test_plugin(char *log, size_t size) {
  char exe[4096];
  const ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 64);
  if (k <= 0) return -1;
  exe[k] = '\0';
  char *slash = strrchr(exe, '/');
  if (!slash) return -1;
  strcpy(slash, "/../profiler/libnccl-profiler-test5.so");
  snprintf(log, size, "/tmp/chorus-check-prof.%d.log", (int)getpid());
  return setenv("NCCL_PROFILER_PLUGIN", exe, 1) || setenv("CHORUS_TEST_PROF_LOG", log, 1);
}

/* The API events (GroupApi and CollApi) the plugin logged, by whether
 * they say GraphCaptured: counts[type == CollApi][graph]. */
static void api_events(const char *log, int counts[2][2]) {
  memset(counts, 0, 4 * sizeof(int));
  FILE *f = fopen(log, "r");
  char line[1024];
  while (f && fgets(line, sizeof line, f)) {
    int id, type, parent, r, graph;
    const char *g = strstr(line, " graph ");
    if (sscanf(line, "start %d type %d parent %d rank %d", &id, &type, &parent, &r) != 4 || !g ||
        sscanf(g, " graph %d", &graph) != 1 || (type != 256 && type != 512) || graph < 0 ||
        graph > 1)
      continue;
    counts[type == 512][graph]++;
  }
  if (f) fclose(f);
}

/* The graph events of the file: lines holding "graph":true. */
static int read_events(const char *path, event *ev, int cap) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[2048];
  int n = 0;
  while (fgets(line, sizeof line, f) && n < cap) {
    if (!strstr(line, "\"graph\":true")) continue;
    event *e = &ev[n];
    const char *p;
    if (!(p = strstr(line, "\"name\":\"")) || sscanf(p + 8, "%31[^\"]", e->name) != 1) continue;
    if (!(p = strstr(line, "\"ts\":")) || sscanf(p + 5, "%lf", &e->ts) != 1) continue;
    if (!(p = strstr(line, "\"dur\":")) || sscanf(p + 6, "%lf", &e->dur) != 1) continue;
    if (!(p = strstr(line, "\"index\":")) || sscanf(p + 8, "%d", &e->index) != 1) continue;
    if (!(p = strstr(line, "\"replay\":")) || sscanf(p + 9, "%d", &e->replay) != 1) continue;
    n++;
  }
  fclose(f);
  return n;
}

/* pattern with its %p made this process's pid. */
static void with_pid(const char *pattern, char *path, size_t size) {
  const char *at = strstr(pattern, "%p");
  if (!at)
    snprintf(path, size, "%s", pattern);
  else
    snprintf(path, size, "%.*s%d%s", (int)(at - pattern), pattern, (int)getpid(), at + 2);
}

/* The state dump after one AllReduce of `bytes`: each peer's bytes. */
static void check_dump(int rank, int n, double bytes) {
  const char *pattern = getenv("CHORUS_DUMP_FILE");
  if (!getenv("CHORUS_DUMP_SIGNAL") || !pattern || n < 2) return;
  char path[512];
  with_pid(pattern, path, sizeof path);
  unlink(path);
  EXPECT(chorusDumpState() == 0, "rank %d: chorusDumpState failed", rank);
  static char text[1 << 16];
  size_t got = 0;
  for (double t0 = now(); now() - t0 < 10 && !strstr(text, "\n  peers:");) {
    usleep(50000);
    FILE *f = fopen(path, "r");
    got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[got] = '\0';
  }
  const char *peers = strstr(text, "\n  peers:");
  EXPECT(peers != NULL, "rank %d: no peers in the dump %s", rank, path);
  if (!peers) return;
  double sent = 0, received = 0;
  int listed = 0;
  for (const char *p = strstr(peers, "sent "); p && p < strchr(peers + 1, '\n');
       p = strstr(p + 1, "sent ")) {
    unsigned long long s = 0, r = 0;
    if (sscanf(p, "sent %llu B, received %llu B", &s, &r) == 2) {
      sent += (double)s;
      received += (double)r;
      listed++;
    }
  }
  const double least = 2.0 * (n - 1) / n * bytes, most = 2.0 * (n - 1) * bytes;
  printf("rank %d: the dump counts %.0f B sent, %.0f B received over %d peers\n", rank, sent,
         received, listed);
  EXPECT(listed == n - 1, "rank %d: %d peers with bytes in the dump, want %d", rank, listed, n - 1);
  EXPECT(sent >= least && sent <= most && received >= least && received <= most,
         "rank %d: the dump counts %.0f B sent and %.0f B received, want each in [%.0f, %.0f]",
         rank, sent, received, least, most);
  unlink(path);
}

/* -g N: N communicators of this process, an AllGather of `bytes` per rank
 * (CHORUS_TUNE may put it on the copy engine), then every communicator's
 * peers in the dump: each sent and received (N - 1) blocks over its peers,
 * whichever way they went. */
static int dump_one_process(int n) {
  enum { BLOCK = 1 << 22 };
  ncclComm_t comm[8];
  cudaStream_t s[8];
  void *in[8], *out[8];
  NCCL(ncclCommInitAll(comm, n, NULL));
  for (int l = 0; l < n; l++) {
    CUDA(cudaSetDevice(l));
    CUDA(cudaStreamCreateWithFlags(&s[l], cudaStreamNonBlocking));
    CUDA(cudaMalloc(&in[l], BLOCK));
    CUDA(cudaMalloc(&out[l], (size_t)BLOCK * n));
    CUDA(cudaMemset(in[l], l + 1, BLOCK));
    CUDA(cudaDeviceSynchronize());
  }
  NCCL(ncclGroupStart());
  for (int l = 0; l < n; l++) NCCL(ncclAllGather(in[l], out[l], BLOCK, ncclInt8, comm[l], s[l]));
  NCCL(ncclGroupEnd());
  unsigned char *host = malloc((size_t)BLOCK * n);
  for (int l = 0; l < n; l++) {
    CUDA(cudaStreamSynchronize(s[l]));
    CUDA(cudaMemcpy(host, out[l], (size_t)BLOCK * n, cudaMemcpyDeviceToHost));
    for (int p = 0; p < n; p++)
      EXPECT(host[(size_t)p * BLOCK] == p + 1 && host[(size_t)p * BLOCK + BLOCK - 1] == p + 1,
             "rank %d: block %d of the AllGather is wrong", l, p);
  }
  free(host);
  char path[512];
  with_pid(getenv("CHORUS_DUMP_FILE"), path, sizeof path);
  unlink(path);
  EXPECT(chorusDumpState() == 0, "chorusDumpState failed");
  static char text[1 << 16];
  int comms = 0;
  for (double t0 = now(); now() - t0 < 10 && comms < n;) {
    usleep(50000);
    FILE *f = fopen(path, "r");
    const size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[got] = '\0';
    comms = 0;
    for (const char *p = strstr(text, "\n  peers:"); p; p = strstr(p + 1, "\n  peers:")) comms++;
  }
  EXPECT(comms == n, "%d communicators' peers in the dump %s, want %d", comms, path, n);
  for (const char *line = strstr(text, "\n  peers:"); line; line = strstr(line + 1, "\n  peers:")) {
    const char *eol = strchr(line + 1, '\n');
    double sent = 0, received = 0;
    for (const char *p = strstr(line, "sent "); p && (!eol || p < eol);
         p = strstr(p + 1, "sent ")) {
      unsigned long long a = 0, b = 0;
      if (sscanf(p, "sent %llu B, received %llu B", &a, &b) == 2)
        sent += (double)a, received += (double)b;
    }
    const double want = (double)BLOCK * (n - 1);
    printf("a communicator's peers: %.0f B sent, %.0f B received (want %.0f)\n", sent, received,
           want);
    EXPECT(sent == want && received == want,
           "the dump counts %.0f B sent and %.0f B received, want %.0f each", sent, received, want);
  }
  unlink(path);
  for (int l = 0; l < n; l++) {
    NCCL(ncclCommDestroy(comm[l]));
    CUDA(cudaFree(in[l]));
    CUDA(cudaFree(out[l]));
  }
  printf("one process, %d GPUs: %s\n", n, failures ? "FAIL" : "ok");
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "-g") == 0) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < atoi(argv[2])) return 77;
    if (!getenv("CHORUS_DUMP_SIGNAL") || !getenv("CHORUS_DUMP_FILE")) {
      fprintf(stderr, "observe -g: set CHORUS_DUMP_SIGNAL and CHORUS_DUMP_FILE\n");
      return 2;
    }
    return dump_one_process(atoi(argv[2]));
  }
  const char *pattern = getenv("CHORUS_TRACE");
  if (!pattern || !strstr(pattern, "%p")) {
    fprintf(stderr, "observe: set CHORUS_TRACE to a path with %%p\n");
    return 2;
  }
  int rank, n;
  ncclComm_t comm;
  cudaStream_t s;
  char prof_log[256] = "";
  if (getenv("CHORUS_OBSERVE_PROF") && load_test_plugin(prof_log, sizeof prof_log) != 0) {
    fprintf(stderr, "observe: cannot name the test profiler plugin\n");
    return 2;
  }
  const int joined = join_launched(&rank, &n, &comm, &s);
  if (joined) return joined;
  float *a, *b, *host = malloc(COUNT * sizeof *host);
  CUDA(cudaMalloc((void **)&a, COUNT * sizeof *a));
  CUDA(cudaMalloc((void **)&b, COUNT * sizeof *b));
  NCCL(ncclAllReduce(a, a, COUNT, ncclFloat, ncclSum, comm, s)); /* eager: not a graph's */
  CUDA(cudaStreamSynchronize(s));
  check_dump(rank, n, (double)COUNT * sizeof *a);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  NCCL(ncclAllReduce(a, a, COUNT, ncclFloat, ncclSum, comm, s));
  NCCL(ncclAllReduce(a, a, COUNT, ncclFloat, ncclSum, comm, s));
  NCCL(ncclBroadcast(a, b, COUNT, ncclFloat, 0, comm, s));
  CUDA(cudaStreamEndCapture(s, &graph));
  CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CUDA(cudaGraphDestroy(graph));
  double t0 = 0;
  for (int rep = 0; rep < R; rep++) {
    for (int i = 0; i < COUNT; i++) host[i] = (float)(rank + rep + i % 3);
    CUDA(cudaMemcpy(a, host, COUNT * sizeof *host, cudaMemcpyHostToDevice));
    CUDA(cudaDeviceSynchronize());
    if (rep == 0) t0 = now();
    CUDA(cudaGraphLaunch(exec, s));
    CUDA(cudaStreamSynchronize(s));
    CUDA(cudaMemcpy(host, b, COUNT * sizeof *host, cudaMemcpyDeviceToHost));
    for (int i = 0; i < COUNT; i += 4099) {
      const float sum = (float)(n * (n - 1) / 2 + n * (rep + i % 3)), want = sum * n;
      EXPECT(host[i] == want, "rank %d replay %d: element %d is %g, want %g", rank, rep, i, host[i],
             want);
    }
  }
  const double t1 = now();
  CUDA(cudaGraphExecDestroy(exec));
  NCCL(ncclCommDestroy(comm));
  char path[512];
  with_pid(pattern, path, sizeof path);
  event ev[64];
  const int got = read_events(path, ev, 64);
  EXPECT(got == 3 * R, "rank %d: %d graph events in %s, want %d (3 calls x %d replays)", rank, got,
         path, 3 * R, R);
  /* Per call (its index), replays 0..R-1, in order, inside [t0, t1]. */
  int calls = 0;
  for (int i = 0; i < got; i++) {
    int first = 1;
    for (int j = 0; j < i && first; j++) first = ev[j].index != ev[i].index;
    if (!first) continue;
    calls++;
    double last_end = 0;
    for (int rep = 0; rep < R; rep++) {
      const event *e = NULL;
      for (int j = 0; j < got && !e; j++)
        if (ev[j].index == ev[i].index && ev[j].replay == rep) e = &ev[j];
      EXPECT(e != NULL, "rank %d: %s #%d has no event for replay %d", rank, ev[i].name, ev[i].index,
             rep);
      if (!e) continue;
      EXPECT(e->dur > 0 && e->ts >= t0 * 1e6 - SLACK && e->ts + e->dur <= t1 * 1e6 + SLACK,
             "rank %d: %s #%d replay %d at [%.1f, +%.1f] us, outside the replays' [%.1f, %.1f]",
             rank, e->name, e->index, rep, e->ts, e->dur, t0 * 1e6, t1 * 1e6);
      EXPECT(e->ts >= last_end - SLACK, "rank %d: %s #%d replay %d begins before replay %d ended",
             rank, e->name, e->index, rep, rep - 1);
      last_end = e->ts + e->dur;
    }
  }
  EXPECT(calls == 3, "rank %d: %d captured calls on the timeline, want 3", rank, calls);
  unlink(path);
  if (prof_log[0]) {
    int c[2][2];
    api_events(prof_log, c);
    printf("rank %d: the plugin's CollApi events: %d captured, %d not; GroupApi: %d, %d\n", rank,
           c[1][1], c[1][0], c[0][1], c[0][0]);
    EXPECT(c[1][1] == 3 && c[1][0] == 1 && c[0][1] == 3 && c[0][0] == 1,
           "rank %d: CollApi events %d captured and %d not, GroupApi %d and %d, want 3 and 1 each "
           "(%s)",
           rank, c[1][1], c[1][0], c[0][1], c[0][0], prof_log);
    unlink(prof_log);
  }
  const char *stats = getenv("CHORUS_STATS_FILE");
  if (stats && getenv("CHORUS_STATS_INTERVAL")) {
    char spath[512];
    with_pid(stats, spath, sizeof spath);
    const long ar = stats_calls(spath, "AllReduce"), bc = stats_calls(spath, "Broadcast");
    printf("rank %d: the statistics count %ld AllReduces and %ld Broadcasts\n", rank, ar, bc);
    EXPECT(ar == 1 + 2 * R && bc == R,
           "rank %d: the statistics (%s) count %ld AllReduces and %ld Broadcasts, want %d and %d "
           "(each captured call once per replay)",
           rank, spath, ar, bc, 1 + 2 * R, R);
    unlink(spath);
    const size_t len = strlen(spath);
    if (len > 6 && !strcmp(spath + len - 6, ".jsonl")) {
      strcpy(spath + len - 6, ".prom");
      unlink(spath);
    }
  }
  CUDA(cudaFree(a));
  CUDA(cudaFree(b));
  free(host);
  printf("rank %d: %s (%d graph events)\n", rank, failures ? "FAIL" : "ok", got);
  return failures ? 1 : 0;
}
