/*
 * 06_visualization.c - pictures of the data moving.
 *
 *   chorusrun -n 4 build/examples/06_visualization        the algorithms, step by step
 *   build/examples/06_visualization --plot bench.json [--out busbw.png]
 *
 * 1. Three ways to all-reduce, drawn per step in the terminal. The data is
 *    cut into n chunks (one per rank) and rank r starts with 2^r in every
 *    chunk, so the sum in a chunk tells exactly whose values it holds: the
 *    picture shows it as the ranks' digits ("01.3": ranks 0, 1 and 3).
 *    Every step really moves the data, with grouped ncclSend/ncclRecv:
 *      ring:     ReduceScatter (n-1 steps: pass one chunk to the right and
 *                add the one from the left), then AllGather (n-1 steps:
 *                pass the finished chunks on). Each rank sends 2(n-1)/n of
 *                the data in all: bandwidth-optimal, but 2(n-1) steps.
 *      one-shot: every rank sends everything to every other rank and adds
 *                locally. One step (lowest latency) but n-1 times the data.
 *      tree:     partial sums flow up a binary tree to rank 0, then the
 *                result flows down. 2 log2(n) steps, whole buffers.
 *    At the end every chunk of every rank must hold all ranks' values
 *    (exit 1 otherwise).
 * 2. --plot: bus bandwidth against message size from JSON lines (written
 *    by 04_benchmark --json or the perf tools' -J), drawn as a PNG by
 *    gnuplot (apt-get install gnuplot-nox; without it the program leaves
 *    the data and script and exits 77).
 */
#include "common.h"

#define MAX_RANKS 8 /* the pictures stay readable up to here */

/* One transfer of a schedule: chunks [first, first + count) of src go to
 * dst, which adds them to its own (reduce) or replaces its own (copy). */
typedef struct xfer {
  int src, dst, first, count, add;
} xfer;

typedef struct viz {
  const ex_world *w;
  ncclComm_t comm;
  int n;
  float chunk[MAX_RANKS];     /* this rank's data: one float per chunk */
  float *dev_send, *dev_recv; /* staging, one slot of n floats per transfer */
  float sent;                 /* chunks this rank sent in the current algorithm */
  int wrong;
} viz;

/* Runs one step: every transfer that involves this rank, all in one group
 * (so a rank may send and receive at once, and to several peers), then
 * applies what arrived. */
static void run_step(viz *v, const xfer *x, int nx) {
  const int me = v->w->rank, n = v->n;
  float send[MAX_RANKS * MAX_RANKS], recv[MAX_RANKS * MAX_RANKS];
  for (int i = 0; i < nx; i++) {
    if (x[i].src != me) continue;
    memcpy(send + i * n, v->chunk + x[i].first, sizeof(float) * x[i].count);
    v->sent += (float)x[i].count;
  }
  ex_put(v->w, v->dev_send, send, sizeof send);
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < nx; i++) {
    if (x[i].src == me)
      NCCL_CHECK(
          ncclSend(v->dev_send + i * n, x[i].count, ncclFloat, x[i].dst, v->comm, v->w->stream));
    if (x[i].dst == me)
      NCCL_CHECK(
          ncclRecv(v->dev_recv + i * n, x[i].count, ncclFloat, x[i].src, v->comm, v->w->stream));
  }
  NCCL_CHECK(ncclGroupEnd());
  ex_get(v->w, recv, v->dev_recv, sizeof recv); /* waits for the step */
  for (int i = 0; i < nx; i++) {
    if (x[i].dst != me) continue;
    for (int k = 0; k < x[i].count; k++)
      v->chunk[x[i].first + k] =
          x[i].add ? v->chunk[x[i].first + k] + recv[i * n + k] : recv[i * n + k];
  }
}

/* "01.3": whose values a chunk holds (its value is the sum of 2^r). */
static void holders(float value, int n, char *out) {
  unsigned mask = (unsigned)value;
  for (int r = 0; r < n; r++) out[r] = mask >> r & 1 ? (char)('0' + r) : '.';
  out[n] = '\0';
}

/* One line per rank: its chunks, then what it sent in the step. */
static void draw(viz *v, const char *title, const xfer *x, int nx) {
  char line[EX_LINE], cell[MAX_RANKS + 1];
  int used = snprintf(line, sizeof line, "  rank %d |", v->w->rank);
  for (int c = 0; c < v->n; c++) {
    holders(v->chunk[c], v->n, cell);
    used += snprintf(line + used, sizeof line - (size_t)used, " %s", cell);
  }
  used += snprintf(line + used, sizeof line - (size_t)used, " |");
  int sent = 0;
  for (int i = 0; i < nx && used < EX_LINE - 24; i++) {
    if (x[i].src != v->w->rank) continue;
    used += snprintf(line + used, sizeof line - (size_t)used, "%s", sent++ ? "," : " sent");
    if (x[i].count == 1)
      used += snprintf(line + used, sizeof line - (size_t)used, " c%d->%d", x[i].first, x[i].dst);
    else
      used += snprintf(line + used, sizeof line - (size_t)used, " all->%d", x[i].dst);
  }
  if (v->w->rank == 0) printf("%s\n", title);
  ex_print_ranks(v->w, v->comm, "%s", line);
}

static void start(viz *v, const char *name, const char *summary) {
  v->sent = 0;
  for (int c = 0; c < v->n; c++) v->chunk[c] = (float)(1u << v->w->rank);
  if (v->w->rank == 0) {
    printf("\n== %s: %s\n", name, summary);
    printf("  chunk:  ");
    for (int c = 0; c < v->n; c++) printf(" c%-*d", v->n - 1, c);
    printf("\n");
  }
  draw(v, "start (each rank holds only its own values)", NULL, 0);
}

/* Every chunk on this rank must hold every rank's value. Rank 0 also
 * prints how much the busiest rank sent (an AllReduce with ncclMax). */
static void finish(viz *v, const char *name, int steps) {
  const float all = (float)((1u << v->n) - 1);
  int ok = 1;
  for (int c = 0; c < v->n; c++) ok &= v->chunk[c] == all;
  if (!ok) {
    fprintf(stderr, "[Rank %d] %s: WRONG, a chunk misses some rank's values\n", v->w->rank, name);
    v->wrong++;
  }
  float most = v->sent;
  ex_put(v->w, v->dev_send, &most, sizeof most);
  NCCL_CHECK(ncclAllReduce(v->dev_send, v->dev_send, 1, ncclFloat, ncclMax, v->comm, v->w->stream));
  ex_get(v->w, &most, v->dev_send, sizeof most);
  if (v->w->rank == 0)
    printf("  %s: %d steps; the busiest rank sent %.2f x the buffer%s\n", name, steps,
           (double)most / v->n, ok ? "" : "  WRONG result");
}

/* ---- the three schedules ---------------------------------------------------------- */

static void ring(viz *v) {
  const int n = v->n;
  xfer x[MAX_RANKS];
  char title[96];
  start(v, "Ring AllReduce", "ReduceScatter, then AllGather, around the ring r -> r+1");
  for (int s = 0; s < n - 1; s++) { /* ReduceScatter */
    for (int r = 0; r < n; r++) x[r] = (xfer){r, (r + 1) % n, ((r - s) % n + n) % n, 1, 1};
    run_step(v, x, n);
    snprintf(title, sizeof title, "ReduceScatter step %d (receive a chunk, add your own)", s + 1);
    draw(v, title, x, n);
  }
  for (int s = 0; s < n - 1; s++) { /* AllGather: rank r owns chunk r+1 now */
    for (int r = 0; r < n; r++) x[r] = (xfer){r, (r + 1) % n, ((r + 1 - s) % n + n) % n, 1, 0};
    run_step(v, x, n);
    snprintf(title, sizeof title, "AllGather step %d (pass finished chunks on)", s + 1);
    draw(v, title, x, n);
  }
  finish(v, "ring", 2 * (n - 1));
}

static void one_shot(viz *v) {
  const int n = v->n;
  xfer x[MAX_RANKS * MAX_RANKS];
  int nx = 0;
  start(v, "One-shot AllReduce", "every rank sends all its data to every other rank");
  for (int r = 0; r < n; r++)
    for (int d = 0; d < n; d++)
      if (d != r) x[nx++] = (xfer){r, d, 0, n, 1};
  run_step(v, x, nx);
  draw(v, "step 1 (receive everyone's data, add it all)", x, nx);
  finish(v, "one-shot", 1);
}

/* Depth of rank r in the binary tree rooted at 0 (children 2r+1, 2r+2). */
static int depth(int r) {
  int d = 0;
  for (; r > 0; r = (r - 1) / 2) d++;
  return d;
}

static void tree(viz *v) {
  const int n = v->n, deepest = depth(n - 1);
  xfer x[MAX_RANKS];
  char title[96];
  int steps = 0;
  start(v, "Tree AllReduce", "sums go up a binary tree to rank 0, the result comes down");
  for (int d = deepest; d >= 1; d--) { /* reduce: one level per step */
    int nx = 0;
    for (int r = 1; r < n; r++)
      if (depth(r) == d) x[nx++] = (xfer){r, (r - 1) / 2, 0, n, 1};
    run_step(v, x, nx);
    snprintf(title, sizeof title, "up, step %d (depth %d adds into its parent)", ++steps, d);
    draw(v, title, x, nx);
  }
  for (int d = 1; d <= deepest; d++) { /* broadcast: one level per step */
    int nx = 0;
    for (int r = 1; r < n; r++)
      if (depth(r) == d) x[nx++] = (xfer){(r - 1) / 2, r, 0, n, 0};
    run_step(v, x, nx);
    snprintf(title, sizeof title, "down, step %d (parents copy the result to depth %d)", ++steps,
             d);
    draw(v, title, x, nx);
  }
  finish(v, "tree", steps);
}

/* ---- the bandwidth plot --------------------------------------------------------------- */

/* Reads JSON lines with "collective", "size" and (the first) "busbw_gbs",
 * as 04_benchmark --json and the perf tools' -J write them, and writes one
 * gnuplot data block per collective. Returns the number of blocks. */
static int json_to_data(FILE *in, FILE *out, char names[][32], int max_names) {
  char line[4096];
  int nnames = 0;
  /* Rows of one collective are contiguous in both writers. */
  for (int rows = 0; rows < 100000 && fgets(line, sizeof line, in); rows++) {
    const char *c = strstr(line, "\"collective\":\""), *sz = strstr(line, "\"size\":");
    const char *bw = strstr(line, "\"busbw_gbs\":");
    char name[32];
    double size, busbw;
    if (!c || !sz || !bw || sscanf(c + 14, "%31[^\"]", name) != 1 ||
        sscanf(sz + 7, "%lf", &size) != 1 || sscanf(bw + 12, "%lf", &busbw) != 1)
      continue;
    if (nnames == 0 || strcmp(name, names[nnames - 1])) {
      if (nnames == max_names) break;
      if (nnames) fprintf(out, "\n\n"); /* gnuplot: two blank lines end a block */
      snprintf(names[nnames++], 32, "%s", name);
    }
    fprintf(out, "%.0f %g\n", size, busbw);
  }
  return nnames;
}

static int plot(const char *json, const char *png) {
  FILE *in = fopen(json, "r");
  if (!in) {
    fprintf(stderr, "cannot read %s: %s\n", json, strerror(errno));
    return 2;
  }
  char data[600], script[600], names[16][32];
  snprintf(data, sizeof data, "%s.dat", png);
  snprintf(script, sizeof script, "%s.gp", png);
  FILE *d = fopen(data, "w");
  if (!d) {
    fclose(in);
    fprintf(stderr, "cannot write %s: %s\n", data, strerror(errno));
    return 2;
  }
  int blocks = json_to_data(in, d, names, 16);
  fclose(in);
  fclose(d);
  if (blocks == 0) {
    fprintf(stderr, "%s: no rows with collective, size and busbw_gbs\n", json);
    return 1;
  }
  FILE *g = fopen(script, "w");
  if (!g) return 2;
  fprintf(g,
          "set terminal pngcairo size 900,600 noenhanced\nset output '%s'\n"
          "set title 'Bus bandwidth against message size'\n"
          "set logscale x 2\nset format x '%%.0b %%BB'\nset xlabel 'message size'\n"
          "set ylabel 'bus bandwidth (GB/s)'\nset grid\nset key top left\nplot ",
          png);
  for (int i = 0; i < blocks; i++)
    fprintf(g, "%s'%s' index %d using 1:2 with linespoints title '%s'", i ? ", " : "", data, i,
            names[i]);
  fprintf(g, "\n");
  fclose(g);
  if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
    fprintf(stderr,
            "gnuplot is not installed (apt-get install gnuplot-nox); the data and "
            "script are %s and %s\n",
            data, script);
    return 77; /* not a wrong result: the tool is missing (tests count it as skipped) */
  }
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "gnuplot '%s'", script);
  int rc = system(cmd);
  if (rc != 0) {
    fprintf(stderr,
            "gnuplot failed (status %d); is it installed? (apt-get install gnuplot-nox). "
            "The data and script are %s and %s.\n",
            rc, data, script);
    return 1;
  }
  printf("06_visualization: plotted %d series from %s into %s (gnuplot script: %s)\n", blocks, json,
         png, script);
  return 0;
}

int main(int argc, char **argv) {
  ex_world w;
  int rc = ex_start(&argc, argv, &w);
  if (rc != 0) return rc;
  const char *json = NULL, *png = "busbw.png";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--plot") && i + 1 < argc) {
      json = argv[++i];
    } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
      png = argv[++i];
    } else {
      fprintf(stderr, "usage: %s [--host|--gpu]   or   %s --plot FILE.json [--out FILE.png]\n",
              argv[0], argv[0]);
      return 2;
    }
  }
  if (json) return w.rank == 0 ? plot(json, png) : 0; /* no communicator needed */
  if (w.nranks < 2 || w.nranks > MAX_RANKS) {
    if (w.rank == 0) fprintf(stderr, "run it with 2 to %d ranks (chorusrun -n 4 ...)\n", MAX_RANKS);
    return 2;
  }

  viz v = {&w, NULL, w.nranks, {0}, NULL, NULL, 0, 0};
  ex_comm_init(&w, &v.comm);
  v.dev_send = ex_alloc(&w, sizeof(float) * MAX_RANKS * MAX_RANKS);
  v.dev_recv = ex_alloc(&w, sizeof(float) * MAX_RANKS * MAX_RANKS);
  if (w.rank == 0)
    printf("06_visualization: AllReduce of %d chunks on %d ranks (%s). A cell lists the ranks\n"
           "whose values a chunk holds: \"01.3\" = ranks 0, 1 and 3. Done when every cell is "
           "full.\n",
           w.nranks, w.nranks, ex_where(&w));
  ring(&v);
  one_shot(&v);
  tree(&v);

  ex_free(&w, v.dev_send);
  ex_free(&w, v.dev_recv);
  NCCL_CHECK(ncclCommDestroy(v.comm));
  ex_end(&w);
  if (w.rank == 0)
    printf("\n06_visualization: %s\n", v.wrong ? "WRONG (see above)" : "all three right");
  return v.wrong ? 1 : 0;
}
