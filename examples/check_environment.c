/*
 * check_environment.c - run this first: is this machine ready for NCCL?
 *
 *   build/examples/check_environment            one process (2 ranks inside)
 *   chorusrun -n 2 build/examples/check_environment   the launched ranks
 *
 * Each line starts with OK, WARN (works, but read the advice) or FAIL
 * (something the other examples need is broken), then says what to do.
 * The program exits 1 when any line is FAIL.
 *
 * What it looks at, in order: the library (version, which file was
 * loaded), the GPUs (memory, compute capability, which pairs reach each
 * other directly and over what link), the network interfaces NCCL would
 * use between machines, the shared memory that ranks on one machine use,
 * the NCCL and CUDA settings in the environment, and finally an AllReduce
 * on 2 ranks whose result is checked.
 */
#include "common.h"

#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/statvfs.h>

static int failures;

/* One verdict line: "OK   what: detail". */
static void report(const char *verdict, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%-4s  ", verdict);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  if (!strcmp(verdict, "FAIL")) failures++;
}

/* ---- the library ------------------------------------------------------------- */

static void check_library(void) {
  int version = 0;
  NCCL_CHECK(ncclGetVersion(&version));
  /* Since 2.9 the code is major*10000 + minor*100 + patch. */
  int major = version / 10000, minor = version / 100 % 100, patch = version % 100;
  if (version / 100 == NCCL_VERSION_CODE / 100)
    report("OK", "library: NCCL API %d.%d.%d (the examples were compiled against %d.%d.%d)", major,
           minor, patch, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  else
    report("WARN",
           "library: %d.%d.%d at run time, but nccl.h says %d.%d.%d: rebuild the examples "
           "against the library you run, or set LD_LIBRARY_PATH to the matching one",
           major, minor, patch, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);

  /* Which libnccl.so.2 the dynamic loader picked: the usual surprise is a
   * copy from a Python wheel or a system package. */
  Dl_info info;
  if (dladdr((void *)ncclGetVersion, &info) && info.dli_fname)
    report("OK", "library file: %s", info.dli_fname);
#ifdef EX_CUDA
  report("OK", "examples build: with CUDA (GPU memory when a GPU is visible, --host for host)");
#else
  report("OK", "examples build: host only, without CUDA (communicators on host memory)");
#endif
}

/* ---- GPUs ---------------------------------------------------------------------- */

#ifdef EX_CUDA
/* PCIe speed and width of a device, from sysfs (no NVML needed). */
static void pcie_link(const char *bus_id, char *out, size_t cap) {
  char path[256], speed[64] = "?", width[16] = "?";
  char bus[32];
  snprintf(bus, sizeof bus, "%s", bus_id);
  for (char *c = bus; *c; c++) *c = (char)(*c >= 'A' && *c <= 'F' ? *c - 'A' + 'a' : *c);
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/current_link_speed", bus);
  FILE *f = fopen(path, "r");
  if (f) {
    if (!fgets(speed, sizeof speed, f)) snprintf(speed, sizeof speed, "?");
    fclose(f);
  }
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/current_link_width", bus);
  f = fopen(path, "r");
  if (f) {
    if (!fgets(width, sizeof width, f)) snprintf(width, sizeof width, "?");
    fclose(f);
  }
  speed[strcspn(speed, "\n")] = '\0';
  width[strcspn(width, "\n")] = '\0';
  snprintf(out, cap, "PCIe %s x%s", speed, width);
}

/* The GPU-to-GPU matrix as nvidia-smi shows it (NV# = NVLink with # links,
 * PIX/PXB/PHB/NODE/SYS = PCIe paths of growing length), when it exists. */
static void link_matrix(void) {
  FILE *p = popen("nvidia-smi topo -m 2>/dev/null", "r");
  if (!p) return;
  char line[512];
  int lines = 0;
  while (lines < 64 && fgets(line, sizeof line, p)) {
    if (lines == 0) printf("      link matrix (nvidia-smi topo -m):\n");
    printf("        %s", line);
    lines++;
  }
  pclose(p);
  if (lines == 0)
    report("WARN", "link matrix: nvidia-smi not found; NVLink vs PCIe unknown (install the "
                   "NVIDIA driver utilities to see it)");
}

static int check_gpus(void) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    report("WARN",
           "GPUs: none visible (%s); the examples will use host memory, which only "
           "Chorus supports; check the driver (nvidia-smi) and CUDA_VISIBLE_DEVICES",
           e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    return 0;
  }
  for (int d = 0; d < n; d++) {
    struct cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, d));
    char bus[32] = "", link[96] = "";
    CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, d));
    pcie_link(bus, link, sizeof link);
    report(p.major >= 6 ? "OK" : "WARN", "GPU %d: %s, %.1f GiB, compute capability %d.%d, %s, %s%s",
           d, p.name, (double)p.totalGlobalMem / (1 << 30), p.major, p.minor, bus, link,
           p.major >= 6 ? "" : " (NCCL 2.28 needs compute capability 6.0 or newer)");
  }
  /* Peer access: whether a kernel on GPU a can read GPU b's memory
   * directly (NVLink or PCIe peer-to-peer); without it data goes through
   * host memory, which is slower. */
  if (n > 1) {
    printf("      peer access (row reads column directly: Y/n):\n        ");
    for (int b = 0; b < n; b++) printf(" %3d", b);
    printf("\n");
    int missing = 0;
    for (int a = 0; a < n; a++) {
      printf("        %d", a);
      for (int b = 0; b < n; b++) {
        int ok = 1;
        if (a != b) CUDA_CHECK(cudaDeviceCanAccessPeer(&ok, a, b));
        printf(" %3s", a == b ? "-" : ok ? "Y" : "n");
        missing += !ok;
      }
      printf("\n");
    }
    if (missing)
      report("WARN",
             "peer access: %d pairs cannot reach each other; NCCL copies through host "
             "memory there (check IOMMU/ACS settings, or nvidia-smi topo -m)",
             missing);
    else
      report("OK", "peer access: every pair of GPUs");
    link_matrix();
  }
  return n;
}
#endif

/* ---- network ------------------------------------------------------------------ */

/* NCCL_SOCKET_IFNAME is a list of name prefixes ("eth,ens"); a leading '^'
 * excludes them instead, and '=' asks for exact names. */
static int name_matches(const char *name, const char *spec) {
  int exclude = spec[0] == '^', exact;
  if (exclude) spec++;
  exact = spec[0] == '=';
  if (exact) spec++;
  char list[256];
  snprintf(list, sizeof list, "%s", spec);
  int hit = 0;
  for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && !hit;
       tok = strtok_r(NULL, ",", &save))
    hit = exact ? !strcmp(name, tok) : !strncmp(name, tok, strlen(tok));
  return exclude ? !hit : hit;
}

static void check_network(void) {
  struct ifaddrs *all = NULL;
  if (getifaddrs(&all) != 0) {
    report("WARN", "network: cannot list interfaces (%s)", strerror(errno));
    return;
  }
  const char *spec = getenv("NCCL_SOCKET_IFNAME");
  /* Without the setting, NCCL tries InfiniBand (ib*) first, then other
   * interfaces except docker, loopback and virtual bridges, and loopback
   * last. The first list that matches an up interface with an address wins. */
  const char *order[] = {"ib", "^docker,lo,virbr,veth", "docker,veth,virbr", "lo"};
  int norder = 4;
  if (spec && *spec) order[0] = spec, norder = 1;
  char picked[512] = "";
  for (int k = 0; k < norder && !picked[0]; k++) {
    for (struct ifaddrs *i = all; i; i = i->ifa_next) {
      if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
      int fam = i->ifa_addr->sa_family;
      if ((fam != AF_INET && fam != AF_INET6) || !name_matches(i->ifa_name, order[k])) continue;
      if (strstr(picked, i->ifa_name)) continue; /* IPv4 and IPv6 of one interface */
      size_t used = strlen(picked);
      snprintf(picked + used, sizeof picked - used, "%s%s", used ? ", " : "", i->ifa_name);
    }
  }
  freeifaddrs(all);
  if (!picked[0])
    report("FAIL", "network: no up interface matches %s; fix NCCL_SOCKET_IFNAME (see ip addr)",
           spec && *spec ? spec : "the default order");
  else if (!strcmp(picked, "lo"))
    report("WARN",
           "network: NCCL would use %s only: fine on one machine; across machines set "
           "NCCL_SOCKET_IFNAME to the interface that reaches them",
           picked);
  else
    report("OK", "network: NCCL_SOCKET_IFNAME=%s would use %s", spec && *spec ? spec : "(unset)",
           picked);
}

/* ---- shared memory, settings ---------------------------------------------------- */

static void check_shm(void) {
  struct statvfs s;
  if (statvfs("/dev/shm", &s) != 0) {
    report("WARN", "shared memory: /dev/shm missing (%s); ranks on one machine need it",
           strerror(errno));
    return;
  }
  double total = (double)s.f_blocks * s.f_frsize, avail = (double)s.f_bavail * s.f_frsize;
  /* Containers often get 64 MiB, too little for several ranks' buffers. */
  int small = avail < 512.0 * (1 << 20);
  report(small ? "WARN" : "OK", "shared memory: /dev/shm %.0f MiB, %.0f MiB free%s",
         total / (1 << 20), avail / (1 << 20),
         small ? "; give the container more (docker --shm-size=1g or --ipc=host)" : "");
}

static void check_settings(const ex_world *w) {
  int shown = 0;
  for (char **e = environ; *e && shown < 64; e++) {
    if (strncmp(*e, "NCCL_", 5) && strncmp(*e, "CHORUS_", 7) &&
        strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21))
      continue;
    /* Settings that turn fast paths off are worth a second look. */
    int slow = !strncmp(*e, "NCCL_P2P_DISABLE=1", 18) || !strncmp(*e, "NCCL_SHM_DISABLE=1", 18) ||
               !strncmp(*e, "NCCL_IB_DISABLE=1", 17);
    int ours = w->host_env_set && !strncmp(*e, "CHORUS_HOST_COMM=", 17);
    report(slow ? "WARN" : "OK", "setting: %s%s", *e,
           slow   ? " (turns a fast path off: unset it unless you mean it)"
           : ours ? " (set by this program: host memory)"
                  : "");
    shown++;
  }
  if (!shown) report("OK", "settings: no NCCL_*, CHORUS_* or CUDA_VISIBLE_DEVICES set (defaults)");
}

/* ---- the smoke test -------------------------------------------------------------- */

/* Rank r contributes r + 1 in every element, so each element of the sum
 * over n ranks must be n (n + 1) / 2. */
static int check_sum(const float *v, size_t count, int n) {
  float want = (float)n * (float)(n + 1) / 2;
  for (size_t i = 0; i < count; i++)
    if (v[i] != want) return 0;
  return 1;
}

#define SMOKE_COUNT 1024

/* Alone: one process drives 2 ranks with ncclCommInitAll (2 GPUs, or host
 * memory). The calls of both ranks go in one group: each call waits for
 * the other rank, so one thread could not make them one after another. */
static void smoke_alone(const ex_world *w, int ngpus) {
  int n = 2;
  ncclComm_t comms[2];
  int devs[2] = {0, 1};
  if (w->gpu && ngpus < 2) {
    report("WARN", "smoke test: one GPU, so the AllReduce runs with 1 rank; start 2 processes "
                   "on 2 GPUs for a real exchange");
    n = 1;
  }
  NCCL_CHECK(ncclCommInitAll(comms, n, devs));
  float *buf[2], host[SMOKE_COUNT];
  ex_world each[2];
  for (int r = 0; r < n; r++) {
    each[r] = *w;
#ifdef EX_CUDA
    if (w->gpu) {
      CUDA_CHECK(cudaSetDevice(r));
      CUDA_CHECK(cudaStreamCreateWithFlags(&each[r].stream, cudaStreamNonBlocking));
    }
#endif
    buf[r] = ex_alloc(&each[r], sizeof host);
    for (int i = 0; i < SMOKE_COUNT; i++) host[i] = (float)(r + 1);
    ex_put(&each[r], buf[r], host, sizeof host);
  }
  NCCL_CHECK(ncclGroupStart());
  for (int r = 0; r < n; r++)
    NCCL_CHECK(
        ncclAllReduce(buf[r], buf[r], SMOKE_COUNT, ncclFloat, ncclSum, comms[r], each[r].stream));
  NCCL_CHECK(ncclGroupEnd());
  int ok = 1;
  for (int r = 0; r < n; r++) {
#ifdef EX_CUDA
    if (w->gpu) CUDA_CHECK(cudaSetDevice(r));
#endif
    ex_get(&each[r], host, buf[r], sizeof host);
    ok &= check_sum(host, SMOKE_COUNT, n);
    ex_free(&each[r], buf[r]);
    NCCL_CHECK(ncclCommDestroy(comms[r]));
    if (w->gpu) ex_end(&each[r]);
  }
  report(ok ? "OK" : "FAIL", "smoke test: AllReduce of %d floats on %d ranks (%s, one process): %s",
         SMOKE_COUNT, n, ex_where(w),
         ok ? "right sum" : "WRONG sum: run with NCCL_DEBUG=INFO and report it");
}

/* Launched: every process is one rank of one communicator. */
static void smoke_launched(const ex_world *w) {
  ncclComm_t comm;
  ex_comm_init(w, &comm);
  float host[SMOKE_COUNT];
  float *buf = ex_alloc(w, sizeof host);
  for (int i = 0; i < SMOKE_COUNT; i++) host[i] = (float)(w->rank + 1);
  ex_put(w, buf, host, sizeof host);
  NCCL_CHECK(ncclAllReduce(buf, buf, SMOKE_COUNT, ncclFloat, ncclSum, comm, w->stream));
  ex_get(w, host, buf, sizeof host); /* waits for the stream */
  int ok = check_sum(host, SMOKE_COUNT, w->nranks);
  /* Every rank's verdict, summed: rank 0 reports failures anywhere. */
  int *flag = ex_alloc(w, sizeof(int)), bad = !ok;
  ex_put(w, flag, &bad, sizeof bad);
  NCCL_CHECK(ncclAllReduce(flag, flag, 1, ncclInt, ncclSum, comm, w->stream));
  ex_get(w, &bad, flag, sizeof bad);
  ex_free(w, flag);
  ex_free(w, buf);
  int dev = 0;
  NCCL_CHECK(ncclCommCuDevice(comm, &dev));
  NCCL_CHECK(ncclCommDestroy(comm));
  if (!ok) failures++; /* this rank exits 1 */
  if (w->rank != 0) return;
  report(bad ? "FAIL" : "OK", "smoke test: AllReduce of %d floats on %d ranks (%s via %s%s): %s",
         SMOKE_COUNT, w->nranks, ex_where(w), w->launcher, dev < 0 ? ", device -1" : "",
         bad ? "WRONG sum on some rank: run with NCCL_DEBUG=INFO and report it" : "right sum");
}

int main(int argc, char **argv) {
  ex_world w;
  int rc = ex_start(&argc, argv, &w);
  if (rc != 0) return rc;
  /* With several ranks, rank 0 alone prints the machine's description. */
  int ngpus = 0;
  if (w.rank == 0) {
    printf("check_environment: rank 0 of %d (launcher: %s)\n", w.nranks, w.launcher);
    check_library();
#ifdef EX_CUDA
    ngpus = check_gpus();
#endif
    check_network();
    check_shm();
    check_settings(&w);
    fflush(stdout);
  }
  if (w.nranks > 1)
    smoke_launched(&w);
  else
    smoke_alone(&w, ngpus);
  ex_end(&w);
  if (w.rank == 0)
    printf("%s\n", failures ? "Some checks FAILED: fix those lines first."
                            : "Ready: next, run 01_basic (see examples/README.md).");
  return failures ? 1 : 0;
}
