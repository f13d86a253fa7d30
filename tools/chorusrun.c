/*
 * chorusrun.c - a tiny launcher for multi-process runs on one host.
 *
 *   chorusrun -n N [--hosts H] [--timeout SEC] [--grace SEC] [--] program [args...]
 *
 * Picks a free loopback port (below the ephemeral range) and starts
 * N copies of program with RANK, WORLD_SIZE, LOCAL_RANK and
 * LOCAL_WORLD_SIZE set (torchrun's variables), and with
 * NCCL_COMM_ID=127.0.0.1:<port> unless NCCL_COMM_ID is already set, so that
 * rank 0 hosts the NCCL rendezvous there.
 *
 * --hosts H makes the ranks H hosts of one job: rank r gets NCCL_HOSTID
 * chorusrun-host-<r / ceil(N / H)>, which Chorus and NCCL both read as the
 * host's identity, so ranks of different blocks talk over the network
 * (loopback) as ranks of different machines would. LOCAL_RANK stays the
 * rank on this machine, so programs that pick GPU LOCAL_RANK % GPUs deal
 * the GPUs out across all ranks (two hosts may share one, as NCCL allows).
 *
 * Each child runs in its own process group (with its descendants), which
 * chorusrun signals by id. When a child exits non-zero or is killed by a
 * signal, the others get SIGTERM, then SIGKILL after the grace period
 * (default 3 s), and chorusrun exits with that child's status (128 + signal
 * for a signal). --timeout stops everything after SEC seconds and exits 124.
 * SIGINT, SIGTERM and SIGHUP sent to chorusrun are passed on the same way.
 * The exit status is 0 only if every child exits 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct child {
  pid_t pid;
  int done;
} child;

static volatile sig_atomic_t got_signal;

static void on_signal(int sig) {
  got_signal = sig;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f) {
  fprintf(f, "usage: chorusrun -n N [--hosts H] [--timeout SEC] [--grace SEC] [--] program "
             "[args...]\n"
             "  starts N processes of program with RANK, WORLD_SIZE, LOCAL_RANK,\n"
             "  LOCAL_WORLD_SIZE and NCCL_COMM_ID=127.0.0.1:<free port> (unless set);\n"
             "  --hosts H: NCCL_HOSTID per block of N/H ranks (H hosts on loopback)\n");
}

typedef struct opts {
  int n, hosts;
  double timeout, grace;
  char **argv; /* the program and its arguments */
} opts;

static int parse_num(const char *s, double *out) {
  char *end = NULL;
  double v = s ? strtod(s, &end) : -1;
  if (!s || end == s || *end || v < 0) return -1;
  *out = v;
  return 0;
}

static int parse(int argc, char **argv, opts *o) {
  *o = (opts){0, 0, 0, 3, NULL};
  double n = 0, hosts = 0;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--")) {
      i++;
      break;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    } else if (!strcmp(a, "-n") || !strcmp(a, "-np")) {
      if (parse_num(v, &n) || n < 1 || n != (int)n) return -1;
      i++;
    } else if (!strcmp(a, "--hosts")) {
      if (parse_num(v, &hosts) || hosts < 1 || hosts != (int)hosts) return -1;
      i++;
    } else if (!strcmp(a, "--timeout")) {
      if (parse_num(v, &o->timeout)) return -1;
      i++;
    } else if (!strcmp(a, "--grace")) {
      if (parse_num(v, &o->grace)) return -1;
      i++;
    } else {
      fprintf(stderr, "chorusrun: unknown option %s\n", a);
      return -1;
    }
  }
  o->n = (int)n;
  o->hosts = (int)hosts;
  if (o->n < 1 || i >= argc || o->hosts > o->n) return -1;
  o->argv = argv + i;
  return 0;
}

/* The lowest port the kernel hands out to connections on its own
 * (ip_local_port_range), or 32768. */
static int ephemeral_low(void) {
  int lo = 32768, hi = 0;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f) {
    if (fscanf(f, "%d %d", &lo, &hi) != 2 || lo < 2048) lo = 32768;
    fclose(f);
  }
  return lo;
}

/* Whether 127.0.0.1:port can be bound now (port 0: any; *got: the one). */
static int bindable(int port, int *got) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  socklen_t len = sizeof a;
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
           getsockname(fd, (struct sockaddr *)&a, &len) == 0;
  if (ok) *got = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return ok;
}

/* A loopback port that was free a moment ago. Rank 0 binds it only
 * later, so it is taken below the ephemeral range, where no connection
 * made in between (another job's, the ranks' own) is given it. */
static int free_port(void) {
  const int lo = ephemeral_low(), base = 10000;
  int got = -1;
  if (lo > base + 1000) {
    unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    for (int i = 0; i < 64; i++)
      if (bindable(base + (int)(rand_r(&seed) % (unsigned)(lo - base)), &got)) return got;
  }
  return bindable(0, &got) ? got : -1;
}

static void set_int_env(const char *name, int v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%d", v);
  setenv(name, buf, 1);
}

static void exec_child(const opts *o, int rank, pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive chorusrun */
  if (getppid() != parent) _exit(127);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  set_int_env("RANK", rank);
  set_int_env("WORLD_SIZE", o->n);
  set_int_env("LOCAL_RANK", rank);
  set_int_env("LOCAL_WORLD_SIZE", o->n);
  if (o->hosts > 0) {
    const int per = (o->n + o->hosts - 1) / o->hosts;
    char id[48];
    snprintf(id, sizeof id, "chorusrun-host-%d", rank / per);
    setenv("NCCL_HOSTID", id, 1);
  }
  execvp(o->argv[0], o->argv);
  fprintf(stderr, "chorusrun: cannot run %s: %s\n", o->argv[0], strerror(errno));
  _exit(127);
}

/* Signals the process group of every child still running. */
static void signal_all(child *c, int n, int sig) {
  for (int i = 0; i < n; i++)
    if (c[i].pid > 0 && !c[i].done && kill(-c[i].pid, sig) != 0) kill(c[i].pid, sig);
}

static int status_code(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return 1;
}

static void install_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

typedef struct state {
  child *c;
  int n, left;
  int code;       /* exit status of chorusrun */
  double kill_at; /* when stopping: SIGKILL time; 0 if not stopping */
} state;

static void stop_all(state *s, int sig, double grace) {
  if (s->kill_at > 0) return;
  signal_all(s->c, s->n, sig);
  s->kill_at = now() + grace;
}

/* Reaps exited children; the first failure sets the status and stops the rest. */
static void reap(state *s, double grace) {
  int st;
  pid_t pid;
  while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
    for (int i = 0; i < s->n; i++) {
      if (s->c[i].pid != pid) continue;
      s->c[i].done = 1;
      s->left--;
      int code = status_code(st);
      if (code != 0 && s->code == 0 && s->kill_at == 0) {
        fprintf(stderr, "chorusrun: rank %d (pid %d) %s %d; stopping the other ranks\n", i,
                (int)pid, WIFSIGNALED(st) ? "was killed by signal" : "exited with status",
                WIFSIGNALED(st) ? WTERMSIG(st) : code);
        s->code = code;
        stop_all(s, SIGTERM, grace);
      }
    }
  }
}

static int supervise(state *s, const opts *o) {
  double deadline = o->timeout > 0 ? now() + o->timeout : 0;
  while (s->left > 0) {
    reap(s, o->grace);
    if (s->left == 0) break;
    if (deadline > 0 && now() > deadline && s->kill_at == 0) {
      fprintf(stderr, "chorusrun: timeout after %g s; stopping all ranks\n", o->timeout);
      s->code = 124;
      stop_all(s, SIGTERM, o->grace);
    }
    if (got_signal && s->kill_at == 0) {
      s->code = 128 + got_signal;
      stop_all(s, got_signal, o->grace);
    }
    if (s->kill_at > 0 && now() > s->kill_at) signal_all(s->c, s->n, SIGKILL);
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  return s->code;
}

int main(int argc, char **argv) {
  opts o;
  if (parse(argc, argv, &o) != 0) {
    usage(stderr);
    return 2;
  }
  const char *id = getenv("NCCL_COMM_ID");
  if (!id || !*id) {
    int port = free_port();
    if (port < 0) return fprintf(stderr, "chorusrun: no free loopback port\n"), 1;
    char buf[64];
    snprintf(buf, sizeof buf, "127.0.0.1:%d", port);
    setenv("NCCL_COMM_ID", buf, 1);
  }
  /* The rendezvous' key: only the ranks started here know it. */
  const char *key = getenv("CHORUS_JOB_KEY");
  if (!key || !*key) {
    unsigned char r[16];
    char hex[33];
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(r, 1, sizeof r, f) != sizeof r)
      return fprintf(stderr, "chorusrun: cannot read /dev/urandom\n"), 1;
    fclose(f);
    for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", r[i]);
    setenv("CHORUS_JOB_KEY", hex, 1);
  }
  install_handlers();
  state s = {calloc((size_t)o.n, sizeof(child)), o.n, 0, 0, 0};
  if (!s.c) return fprintf(stderr, "chorusrun: out of memory\n"), 1;
  pid_t self = getpid();
  for (int i = 0; i < o.n; i++) {
    pid_t pid = fork();
    if (pid == 0) exec_child(&o, i, self);
    if (pid < 0) {
      fprintf(stderr, "chorusrun: fork: %s\n", strerror(errno));
      s.code = 1;
      stop_all(&s, SIGTERM, o.grace);
      break;
    }
    setpgid(pid, pid); /* also here, so signals can reach it at once */
    s.c[i].pid = pid;
    s.left++;
  }
  int code = supervise(&s, &o);
  free(s.c);
  return code;
}
