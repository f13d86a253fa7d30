/*
 * chorus_info - what Chorus is, every setting it reads on one screen, its
 * algorithms and rules, and, for a communicator shape, function and size,
 * which algorithm a call takes and why.
 *
 * usage: chorus_info                    every setting: default, value if set, meaning
 *        chorus_info --markdown         the same as a markdown table
 *        chorus_info --algos            the algorithms of both backends
 *        chorus_info --rules            CHORUS_TUNE's rules, then each backend's defaults
 *        chorus_info --dump PID         what process PID's communicators are doing
 *        chorus_info --explain FUNC SIZE [--ranks N] [--gpu|--host] [--hosts H]
 *                    [--one-process] [--windows] [--type T] [--cpus C]
 *            FUNC as NCCL_ALGO spells it (allreduce, sendrecv, ...); SIZE the
 *            larger buffer in bytes as nccl-tests reports it (4K, 1M, ...);
 *            --one-process: a GPU communicator whose ranks are GPUs of one
 *            process, every rank's call in one group (zero-copy, copy
 *            engine); --windows: buffers in symmetric windows; --cpus: as
 *            on hosts of C cores (default: the CPUs this process may run
 *            on), which decides whether the ranks have a core each.
 * The settings in the environment apply (NCCL_ALGO, NCCL_PROTO,
 * CHORUS_TUNE and the GPU settings), as they would to a communicator.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chorus.h"
#include "core/comm.h"
#include "core/netprobe.h"
#include "core/tuner.h"
#include "core/status.h"
#include "device/device.h"
#include "gpu/settings.h"
#include "host/reduce.h"
#include "plan/plan.h"
#include "topo/topo.h"
#include "transport/shm/readrate.h"
#include "util/param.h"
#include "util/units.h"

static const char *type_name(chorus_param_type t) {
  switch (t) {
  case CHORUS_PARAM_BOOL:
    return "on/off";
  case CHORUS_PARAM_SIZE:
    return "size";
  case CHORUS_PARAM_INT:
    return "number";
  default:
    return "text";
  }
}

/* The ncclConfig_t overrides go on one line: they are NCCL's, and their
 * meaning is the field they override. */
static int is_override(chorus_param_id id) {
  return strncmp(chorus_param_group(id), "ncclConfig_t", 12) == 0;
}

/* Groups shown as one line of names on the page (--markdown has every
 * meaning), so that the page stays one screen: the ncclConfig_t
 * overrides, the plugins (their meanings alike), and the settings for
 * testing Chorus itself. What the line says of them (NULL: not folded). */
static const char *folded(chorus_param_id id) {
  const char *g = chorus_param_group(id);
  if (is_override(id)) return "";
  if (!strcmp(g, "plugins"))
    return " (each a path, or NAME for libnccl-KIND-NAME.so: KIND env, net, profiler, tuner; "
           "none: no plugin)";
  return strcmp(g, "testing") == 0 ? " (--markdown for their meanings)" : NULL;
}

static void settings(int md) {
  int v = 0;
  ncclGetVersion(&v);
  chorus_param_env_report(); /* the values below may be a plugin's */
  printf("Chorus %s (NCCL %d.%d.%d API), CUDA built: %s, GPUs visible: %d\n", CHORUS_VERSION_STRING,
         NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, chorus_dev_built() ? "yes" : "no", chorus_dev_count());
  if (md) printf("\n| variable | type | default | meaning |\n|---|---|---|---|\n");
  const char *group = NULL;
  for (int i = 0; i < CHORUS_P_COUNT; i++) {
    const chorus_param_id id = (chorus_param_id)i;
    const chorus_param_desc *d = chorus_param_desc_get(id);
    const char *cur = chorus_param_raw(id);
    if (md) {
      printf("| `%s` | %s | %s | %s%s |\n", d->name, type_name(d->type), d->def ? d->def : "unset",
             is_override(id) ? "overrides ncclConfig_t." : "", d->doc);
      continue;
    }
    if (group != chorus_param_group(id)) {
      group = chorus_param_group(id);
      if (folded(id)) {
        printf("%s%s:", group, folded(id));
        for (int j = i; j < CHORUS_P_COUNT && chorus_param_group((chorus_param_id)j) == group; j++)
          printf(" %s%s%s", chorus_param_desc_get((chorus_param_id)j)->name,
                 chorus_param_raw((chorus_param_id)j) ? "=" : "",
                 chorus_param_raw((chorus_param_id)j) ? chorus_param_raw((chorus_param_id)j) : "");
        printf("\n");
      } else {
        printf("%s\n", group);
      }
    }
    if (folded(id)) continue;
    char val[48];
    snprintf(val, sizeof val, "%s%s%s", d->def ? d->def : "-", cur ? " =" : "", cur ? cur : "");
    printf("  %-32s %-12s %s\n", d->name, val, d->doc);
  }
}

static void algos(void) {
  printf("%-11s %-5s %-56s %s\n", "algorithm", "where", "functions", "protocols");
  for (int a = 0; a < CHORUS_ALGO_COUNT; a++) {
    const chorus_algo_info *info = chorus_algo_get(a);
    for (int b = 0; b < CHORUS_BACKEND_COUNT; b++) {
      if (!info->on[b].funcs) continue;
      char funcs[128] = "", protos[32] = "";
      size_t o = 0;
      for (int f = 1; f < CHORUS_FUNC_RECV; f++)
        if (info->on[b].funcs & chorus_func_bit(f))
          o += (size_t)snprintf(funcs + o, sizeof funcs - o, "%s%s", o ? " " : "",
                                chorus_func_get(f)->key);
      o = 0;
      for (int p = 0; p < CHORUS_PROTO_COUNT; p++)
        if (info->on[b].protos & CHORUS_PROTO_BIT(p))
          o += (size_t)snprintf(protos + o, sizeof protos - o, "%s%s", o ? "," : "",
                                chorus_proto_name(p));
      printf("%-11s %-5s %-56s %s\n", info->name, chorus_backend_name(b), funcs, protos);
    }
    printf("            %s\n", info->doc);
  }
}

static int rules(void) {
  chorus_plan_comm c;
  memset(&c, 0, sizeof c);
  char err[256];
  if (chorus_plan_comm_settings(&c, err, sizeof err) != 0) {
    fprintf(stderr, "chorus_info: %s\n", err);
    return 2;
  }
  char text[192];
  printf("CHORUS_TUNE (first):%s\n", c.nuser ? "" : " none");
  for (size_t i = 0; i < c.nuser; i++) {
    chorus_rule_format(&c.user[i], text, sizeof text);
    printf("  %2zu  %s\n", i + 1, text);
  }
  for (int b = 0; b < CHORUS_BACKEND_COUNT; b++) {
    size_t n;
    const chorus_rule *r = chorus_rules_default(b, &n);
    printf("%s defaults (the first that matches and can run wins; sizes: the larger buffer, "
           "*n: per rank):\n",
           chorus_backend_name(b));
    for (size_t i = 0; i < n; i++) {
      chorus_rule_format(&r[i], text, sizeof text);
      printf("  %2zu  %s\n", i + 1, text);
    }
  }
  return 0;
}

/* Facts of the hypothetical call: what --one-process and --windows say. */
static uint32_t assumed(void *arg, const chorus_plan_call *c, uint32_t want) {
  (void)c;
  return want & *(const uint32_t *)arg;
}

/* The host call that carries a GPU call across hosts (gpu/proxy.c): the
 * whole call on every rank (staged), or one block per place across the
 * hosts (hier); the host's planner chooses its algorithm. */
static int across_hosts(const chorus_plan_comm *gpu, const chorus_plan_call *call, int algo,
                        uint64_t size) {
  const int hier = algo == CHORUS_ALGO_HIER, nhosts = gpu->env.nhosts, L = gpu->env.nlocal;
  chorus_plan_comm h;
  memset(&h, 0, sizeof h);
  h.env = (chorus_cost_env){.backend = CHORUS_BACKEND_HOST,
                            .nranks = hier ? nhosts : gpu->env.nranks,
                            .nhosts = nhosts,
                            .max_msg = chorus_comm_slot_bytes(NULL),
                            .net_us = gpu->env.net_us,
                            .net_bw = gpu->env.net_bw};
  char err[320];
  if (chorus_plan_comm_settings(&h, err, sizeof err) != 0) {
    printf("error: %s\n", err);
    return 1;
  }
  chorus_plan_unbind_foreign(&h);
  chorus_plan_call k = *call;
  k.comm = &h;
  const long long lanes = chorus_param_int(CHORUS_P_GPU_HIER_LANES);
  const int ar = call->func == CHORUS_FUNC_ALLREDUCE, ag = call->func == CHORUS_FUNC_ALLGATHER;
  const int bc = call->func == CHORUS_FUNC_BROADCAST, red = call->func == CHORUS_FUNC_REDUCE;
  /* hier's AllGather and ReduceScatter move a block per host across. */
  uint64_t step =
      hier && !ar && !bc && !red ? (uint64_t)call->count * call->esize * (uint64_t)nhosts : size;
  if (hier && L == 1) {
    printf("steps: the whole call with the other hosts' ranks (one rank per host: nothing to do "
           "in the host; a host call, cut across up to %lld lanes)\n",
           lanes);
  } else if (hier && (ar || bc || red)) {
    k.count = call->count / (size_t)L;
    step = k.count * call->esize;
    const char *before =
        bc ? "Scatter from the root among its host's" : "ReduceScatter among each host's";
    const char *after =
        red ? "Gather to the root among its host's GPUs" : "AllGather among the host's GPUs";
    printf("steps: %s %d GPUs (kernels); %s of each GPU's share with its place on the other hosts "
           "(a host call, cut across up to %lld lanes); %s\n",
           before, L, chorus_func_name(call->func), lanes, after);
  } else if (hier) {
    const char *local = ag ? "one AllGather per host among the host's GPUs (kernels)"
                           : "one ReduceScatter per host among the host's GPUs (kernels)";
    const char *cross = ag ? "AllGather" : "ReduceScatter";
    printf("steps: %s%s with the same place on every other host (a host call, cut across up to "
           "%lld lanes)%s%s\n",
           ag ? "" : local, ag ? cross : ", then a ReduceScatter", lanes, ag ? ", then " : "",
           ag ? local : "");
  } else {
    printf("the whole call copied to pinned host memory, run as a host call on %d ranks, copied "
           "back\n",
           gpu->env.nranks);
  }
  char sz[32];
  chorus_size_print(step, sz, sizeof sz);
  char text[4096];
  chorus_explain ex = {text, sizeof text, 0};
  chorus_task t;
  printf("the host call across hosts (%s on %d ranks):\n", sz, h.env.nranks);
  void *tuner = chorus_tuner_attach(&h, h.env.nranks, h.env.nhosts); /* the host call's */
  if (tuner) printf("tuner plugin: %s (NCCL_TUNER_PLUGIN)\n", chorus_tuner_name());
  const int rc = chorus_plan_choose(&k, NULL, 0, 0, &t, &ex, err, sizeof err);
  chorus_tuner_detach(&h, tuner);
  fputs(text, stdout);
  if (rc != 0) printf("error: %s\n", err);
  return rc != 0;
}

static int explain(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: chorus_info --explain FUNC SIZE [--ranks N] [--gpu|--host] "
                    "[--hosts H] [--one-process] [--windows] [--type float|half|double|int8] "
                    "[--cpus C]\n");
    return 2;
  }
  const int func = chorus_func_by_key(argv[2], strlen(argv[2]));
  uint64_t size;
  if (!func || chorus_size_parse(argv[3], strlen(argv[3]), &size) != 0) {
    fprintf(stderr, "chorus_info: \"%s %s\" is not a function and a size (allreduce 1M)\n", argv[2],
            argv[3]);
    return 2;
  }
  int nranks = 4, nhosts = 1, gpu = chorus_dev_count() > 0, one_proc = 0, windows = 0;
  chorus_rank_info me; /* what ranks started from here may run on */
  chorus_topo_self(&me, 0, -1);
  chorus_machine_cpus here = {0};
  chorus_machine_cpus_add(&here, &me);
  long cpus = chorus_machine_cpus_count(&here);
  size_t esize = 4;
  for (int i = 4; i < argc; i++) {
    if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
      nranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--hosts") && i + 1 < argc)
      nhosts = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cpus") && i + 1 < argc)
      cpus = atol(argv[++i]);
    else if (!strcmp(argv[i], "--gpu"))
      gpu = 1;
    else if (!strcmp(argv[i], "--host"))
      gpu = 0;
    else if (!strcmp(argv[i], "--one-process"))
      one_proc = 1;
    else if (!strcmp(argv[i], "--windows"))
      windows = 1;
    else if (!strcmp(argv[i], "--type") && i + 1 < argc) {
      const char *t = argv[++i];
      esize = !strcmp(t, "double") ? 8 : !strcmp(t, "int8") ? 1 : !strcmp(t, "half") ? 2 : 4;
    } else {
      fprintf(stderr, "chorus_info: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (nranks < 1 || nhosts < 1 || nhosts > nranks || cpus < 1) {
    fprintf(stderr, "chorus_info: --ranks, --hosts and --cpus must be 1 or more, hosts <= ranks\n");
    return 2;
  }
  chorus_plan_comm c;
  memset(&c, 0, sizeof c);
  c.env.backend = gpu ? CHORUS_BACKEND_GPU : CHORUS_BACKEND_HOST;
  c.env.nranks = nranks;
  c.env.nhosts = nhosts;
  c.env.node = nhosts == 1 && !chorus_param_int(CHORUS_P_SHM_DISABLE) &&
               chorus_param_int(CHORUS_P_NODE_CHUNK) > 0 && nranks <= CHORUS_REDUCE_MAX_SRCS;
  /* As where the ranks may read each other's memory (the library probes it
   * at set-up; ptrace rules can forbid it). */
  c.env.peer_read = c.env.node;
  /* As ranks in processes of their own measure it (the library: the mean
   * of the ranks'). */
  c.env.read_slowdown = c.env.peer_read ? chorus_shm_read_slowdown() : 0;
  c.env.reads_dear = c.env.read_slowdown > CHORUS_READ_DEAR;
  c.env.oversubscribed = nranks / nhosts > cpus;
  c.env.fast_max = c.env.node ? chorus_fast_max(nranks, c.env.oversubscribed) : 0;
  c.env.max_msg = chorus_comm_slot_bytes(NULL);
  const int net = chorus_netprobe_setting(&c.env.net_us, &c.env.net_bw);
  /* Across hosts: ranks placed host by host, as chorusrun --hosts,
   * torchrun and mpirun by node place them. */
  c.env.nlocal = nranks % nhosts == 0 ? nranks / nhosts : 0;
  if (net < 0) return 2; /* its WARN line named the setting */
  char err[320];
  if (chorus_plan_comm_settings(&c, err, sizeof err) != 0) {
    fprintf(stderr, "chorus_info: %s\n", err);
    return 2;
  }
  uint32_t facts = 0;
  if (gpu) {
    const int staged = (int)chorus_param_int(CHORUS_P_P2P_DISABLE);
    chorus_gpu_settings st;
    const int64_t max_ctas = chorus_param_int(CHORUS_P_MAX_CTAS); /* as a communicator's cap */
    chorus_gpu_settings_read(&st, nranks, staged,
                             max_ctas != CHORUS_UNSET && max_ctas > 0 ? (int)max_ctas : 0);
    chorus_gpu_settings_plan(&st, &c);
    c.one_process = one_proc;
    c.staged = staged;
    c.env.lanes = (int)chorus_param_int(CHORUS_P_GPU_HIER_LANES);
    c.hosts_in_order = 1;
    if (nhosts > 1) chorus_plan_unbind_foreign(&c);
    facts =
        (one_proc ? CHORUS_FACT_SEND_REACH | CHORUS_FACT_RECV_REACH | CHORUS_FACT_STREAM_OK : 0) |
        (windows ? CHORUS_FACT_SYM_WINDOWS : 0);
  }
  const uint64_t blocks = chorus_func_size(func, 1, 1, nranks);
  /* Buffers: 16-byte aligned and apart, as cudaMalloc's are; never touched. */
  chorus_plan_call call = {&c,
                           func,
                           (size_t)(size / esize / blocks),
                           esize,
                           0,
                           0,
                           0,
                           (void *)0x10000,
                           (void *)((uintptr_t)1 << 40),
                           0,
                           0,
                           NULL};
  const chorus_plan_probe probe = {assumed, &facts};
  char text[4096];
  chorus_explain ex = {text, sizeof text, 0};
  chorus_task t;
  char sz[32];
  chorus_size_print(size, sz, sizeof sz);
  printf("%s of %s (larger buffer) on %d %s%s%s on %d host%s%s:\n", chorus_func_name(func), sz,
         nranks, gpu ? "GPU" : "rank", nranks > 1 ? "s" : "",
         gpu ? (one_proc ? ", one process, every rank's call in one group" : ", a process each")
             : "",
         nhosts, nhosts > 1 ? "s" : "", windows ? ", buffers in symmetric windows" : "");
  if (nhosts > 1) {
    if (net)
      printf("network hops: as CHORUS_NET says (a communicator measures its own at init)\n");
    else
      printf("network hops: the model's own figures (%g us, %g GB/s) (a communicator measures "
             "its own at init)\n",
             CHORUS_NET_HOP_US, CHORUS_NET_BW / 1e3);
  }
  if (!gpu)
    printf("cores: %d rank%s a host on %ld CPU%s%s\n", nranks / nhosts,
           nranks / nhosts > 1 ? "s" : "", cpus, cpus > 1 ? "s" : "",
           c.env.oversubscribed ? ": more ranks than CPUs, priced as taking turns"
                                : ": a core each");
  if (c.env.reads_dear)
    printf("peer reads between processes: %.2fx memcpy's time on this machine (1 MiB), over %.1f: "
           "dearer than two copies, so zerocopy is priced above them, and direct sends through the "
           "slots\n",
           c.env.read_slowdown, CHORUS_READ_DEAR);
  else if (c.env.read_slowdown > 0)
    printf("peer reads between processes: %.2fx memcpy's time on this machine (1 MiB; zerocopy "
           "and direct priced by it)\n",
           c.env.read_slowdown);
  else if (c.env.peer_read)
    printf("peer reads between processes: not measured (process_vm_readv fails here); zerocopy "
           "and direct priced as calibrated\n");
  if (!gpu && chorus_func_reduces(func) && chorus_param_int(CHORUS_P_REPRODUCIBLE)) {
    printf("CHORUS_REPRODUCIBLE=1: algorithm ordered (every contribution gathered by a call of its "
           "own, then added in rank order); no rule or cost applies\n");
    return 0;
  }
  /* A tuner plugin (NCCL_TUNER_PLUGIN) has its say as in a communicator;
   * across hosts, in the host call's choice. */
  void *tuner = gpu && nhosts > 1 ? NULL : chorus_tuner_attach(&c, nranks, nhosts);
  if (tuner) printf("tuner plugin: %s (NCCL_TUNER_PLUGIN)\n", chorus_tuner_name());
  const int rc = chorus_plan_choose(&call, &probe, 0, one_proc, &t, &ex, err, sizeof err);
  chorus_tuner_detach(&c, tuner);
  fputs(text, stdout);
  if (rc != 0) {
    printf("error: %s\n", err);
    return 1;
  }
  if (gpu && (t.algo == CHORUS_ALGO_HIER || t.algo == CHORUS_ALGO_STAGED))
    return across_hosts(&c, &call, t.algo, size);
  if (t.algo == CHORUS_ALGO_HIER)
    printf("steps, per round of %d slot-sized segments: ReduceScatter around each host's %d "
           "ranks (shared memory); AllReduce of each rank's segment with its place on the %d "
           "hosts (the network); AllGather around the host's ranks\n",
           c.env.nlocal, c.env.nlocal, nhosts);
  const double us = chorus_cost_us(func, t.algo, t.proto, size, &c.env);
  if (us >= 0) printf("modelled time: %.1f us\n", us);
  return 0;
}

/* The value of variable `name` in process pid's environment (NULL when
 * unset or unreadable). */
static const char *environ_of(int pid, const char *name, char *buf, size_t size) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/environ", pid);
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  const size_t n = strlen(name);
  const char *found = NULL;
  size_t len = 0;
  int c;
  while (!found && (c = fgetc(f)) != EOF) {
    if (c != '\0' && len + 1 < size) {
      buf[len++] = (char)c;
      continue;
    }
    buf[len] = '\0';
    if (!strncmp(buf, name, n) && buf[n] == '=') found = buf + n + 1;
    len = 0;
  }
  fclose(f);
  return found;
}

static int64_t mtime_ns(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

/* --dump PID: process pid (of this host) writes its state (on its
 * CHORUS_DUMP_SIGNAL, to its CHORUS_DUMP_FILE: read from its environment,
 * else this process's settings), which is printed. */
static int dump(int argc, char **argv) {
  if (argc != 3 || atoi(argv[2]) <= 0) {
    fprintf(stderr, "usage: chorus_info --dump PID\n");
    return 2;
  }
  const int pid = atoi(argv[2]);
  char sbuf[256], fbuf[4096], path[4096], full[4200];
  const char *stext = environ_of(pid, "CHORUS_DUMP_SIGNAL", sbuf, sizeof sbuf);
  const char *pattern = environ_of(pid, "CHORUS_DUMP_FILE", fbuf, sizeof fbuf);
  if (!stext) stext = chorus_param_str(CHORUS_P_DUMP_SIGNAL);
  if (!pattern) pattern = chorus_param_str(CHORUS_P_DUMP_FILE);
  const int sig = chorus_status_signal(stext);
  if (sig <= 0) {
    fprintf(stderr,
            "chorus_info: process %d does not set CHORUS_DUMP_SIGNAL (%s), so it would not "
            "catch a dump signal; start it with CHORUS_DUMP_SIGNAL=USR1, say\n",
            pid, stext ? stext : "unset");
    return 1;
  }
  chorus_log_expand_path_for(pattern, pid, path, sizeof path);
  /* A relative path is the process's own working folder's. */
  if (path[0] == '/')
    snprintf(full, sizeof full, "%s", path);
  else
    snprintf(full, sizeof full, "/proc/%d/cwd/%s", pid, path);
  const int64_t before = mtime_ns(full);
  if (kill(pid, sig) != 0) {
    fprintf(stderr, "chorus_info: cannot signal process %d: %s\n", pid, strerror(errno));
    return 1;
  }
  for (int i = 0; i < 100; i++) { /* 5 s */
    const int64_t now = mtime_ns(full);
    if (now >= 0 && now != before) {
      FILE *f = fopen(full, "r");
      if (!f) break;
      char line[4096];
      while (fgets(line, sizeof line, f)) fputs(line, stdout);
      fclose(f);
      return 0;
    }
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
  }
  fprintf(stderr,
          "chorus_info: process %d wrote no state to %s within 5 s (no communicator, or "
          "not a Chorus process)\n",
          pid, full);
  return 1;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--dump")) return dump(argc, argv);
  if (argc > 1 && !strcmp(argv[1], "--explain")) return explain(argc, argv);
  if (argc > 1 && !strcmp(argv[1], "--rules")) return rules();
  if (argc > 1 && !strcmp(argv[1], "--algos")) {
    algos();
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--markdown")) {
    fprintf(stderr, "usage: chorus_info [--markdown | --algos | --rules | --explain FUNC SIZE "
                    "[options] | --dump PID]\n");
    return 2;
  }
  settings(argc > 1);
  return 0;
}
