/*
 * args.c - the command line, with the flags and defaults of nccl-tests.
 *
 * Flags nccl-tests has for GPUs only (-p parallel init, -y stream null,
 * -G CUDA graphs) are accepted and ignored. -R registers the buffers as
 * nccl-tests does: 1 ncclCommRegister, 2 ncclMemAlloc buffers registered
 * as NCCL_WIN_COLL_SYMMETRIC windows (ncclCommWindowRegister). Chorus adds
 * -J <file> (results as JSON lines) and -I 0 (skip the in-place test).
 * -z sets ncclConfig_t.blocking of the communicators (default: the library's).
 */
#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"

static const char *const type_names[ncclNumTypes] = {"int8",   "uint8",    "int32",  "uint32",
                                                     "int64",  "uint64",   "half",   "float",
                                                     "double", "bfloat16", "f8e4m3", "f8e5m2"};

static const char *const op_names[PT_NUM_OPS] = {"sum", "prod", "max", "min", "avg", "mulsum"};

/* Other spellings people use (older nccl-tests, PyTorch). */
static const struct {
  const char *alias;
  ncclDataType_t type;
} type_aliases[] = {
    {"char", ncclInt8},       {"int", ncclInt32},          {"uint", ncclUint32},
    {"long", ncclInt64},      {"ulong", ncclUint64},       {"fp16", ncclFloat16},
    {"float16", ncclFloat16}, {"fp32", ncclFloat32},       {"float32", ncclFloat32},
    {"fp64", ncclFloat64},    {"float64", ncclFloat64},    {"bf16", ncclBfloat16},
    {"e4m3", ncclFloat8e4m3}, {"fp8e4m3", ncclFloat8e4m3}, {"float8e4m3", ncclFloat8e4m3},
    {"e5m2", ncclFloat8e5m2}, {"fp8e5m2", ncclFloat8e5m2}, {"float8e5m2", ncclFloat8e5m2},
};

const char *pt_type_name(ncclDataType_t t) {
  return (t >= 0 && t < ncclNumTypes) ? type_names[t] : "?";
}

const char *pt_op_name(int op) {
  return (op >= 0 && op < PT_NUM_OPS) ? op_names[op] : "none";
}

static int parse_type(const char *s, pt_args *a) {
  if (!strcasecmp(s, "all")) {
    for (int t = 0; t < ncclNumTypes; t++) a->types[t] = (ncclDataType_t)t;
    a->ntypes = ncclNumTypes;
    return 0;
  }
  a->ntypes = 1;
  for (int t = 0; t < ncclNumTypes; t++)
    if (!strcasecmp(s, type_names[t])) return a->types[0] = (ncclDataType_t)t, 0;
  for (size_t k = 0; k < sizeof type_aliases / sizeof type_aliases[0]; k++)
    if (!strcasecmp(s, type_aliases[k].alias)) return a->types[0] = type_aliases[k].type, 0;
  fprintf(stderr,
          "invalid datatype '%s' (int8, uint8, int32, uint32, int64, uint64, half, "
          "float, double, bfloat16, f8e4m3, f8e5m2 or all)\n",
          s);
  return -1;
}

static int parse_op(const char *s, pt_args *a) {
  if (!strcasecmp(s, "all")) {
    for (int o = 0; o < PT_NUM_OPS; o++) a->ops[o] = o;
    a->nops = PT_NUM_OPS;
    return 0;
  }
  a->nops = 1;
  for (int o = 0; o < PT_NUM_OPS; o++)
    if (!strcasecmp(s, op_names[o])) return a->ops[0] = o, 0;
  if (!strcasecmp(s, "premulsum")) return a->ops[0] = PT_MULSUM, 0;
  fprintf(stderr, "invalid op '%s' (sum, prod, min, max, avg, mulsum or all)\n", s);
  return -1;
}

/* "<number>[K|M|G]" (powers of 1024, as nccl-tests); -1 when malformed. */
static int parse_size(const char *s, size_t *out) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s || v < 0) return -1;
  double unit = 1;
  if (*end) {
    switch (*end) {
    case 'K':
    case 'k':
      unit = 1024.0;
      break;
    case 'M':
    case 'm':
      unit = 1024.0 * 1024;
      break;
    case 'G':
    case 'g':
      unit = 1024.0 * 1024 * 1024;
      break;
    default:
      return -1;
    }
    if (end[1] && strcasecmp(end + 1, "B") != 0) return -1;
  }
  *out = (size_t)(v * unit);
  return 0;
}

static int parse_int(const char *s, const char *what, long min, long max, long *out) {
  char *end = NULL;
  long v = strtol(s, &end, 0);
  if (end == s || *end || v < min || v > max) {
    fprintf(stderr, "invalid value '%s' for %s (%ld..%ld)\n", s, what, min, max);
    return -1;
  }
  *out = v;
  return 0;
}

static void usage(const char *prog) {
  printf("USAGE: %s \n\t"
         "[-t,--nthreads <num threads>] \n\t"
         "[-g,--ngpus <ranks per thread>] \n\t"
         "[-b,--minbytes <min size in bytes>] \n\t"
         "[-e,--maxbytes <max size in bytes>] \n\t"
         "[-i,--stepbytes <increment size>] \n\t"
         "[-f,--stepfactor <increment factor>] \n\t"
         "[-n,--iters <iteration count>] \n\t"
         "[-m,--agg_iters <aggregated iteration count>] \n\t"
         "[-w,--warmup_iters <warmup iteration count>] \n\t"
         "[-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)] \n\t"
         "[-p,--parallel_init <0/1>] (ignored: threads always initialise in parallel)\n\t"
         "[-c,--check <check iteration count>] \n\t"
         "[-o,--op <sum/prod/min/max/avg/mulsum/all>] \n\t"
         "[-d,--datatype <nccltype/all>] \n\t"
         "[-r,--root <root/all>] \n\t"
         "[-z,--blocking <0/1> ncclConfig_t.blocking of the communicators] \n\t"
         "[-y,--stream_null <0/1>] (ignored)\n\t"
         "[-T,--timeout <time in seconds> one NCCL call may take] \n\t"
         "[-G,--cudagraph <num graph launches>] (ignored)\n\t"
         "[-C,--report_cputime <0/1>] \n\t"
         "[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>] \n\t"
         "[-R,--local_register <0/1/2> 1: ncclCommRegister, 2: symmetric windows] \n\t"
         "[-I,--inplace <0/1> also run in place (default: 1)] \n\t"
         "[-J,--output_file <file> write the results as JSON lines] \n\t"
         "[-h,--help]\n",
         prog);
}

static void set_defaults(pt_args *a) {
  memset(a, 0, sizeof *a);
  a->nthreads = a->ngpus = 1;
  a->minbytes = a->maxbytes = 32u << 20;
  a->stepbytes = 1u << 20;
  a->stepfactor = 1;
  a->iters = 20;
  a->warmup = 5;
  a->agg = a->check = a->cycles = 1;
  a->ntypes = 1;
  a->types[0] = ncclFloat;
  a->nops = 1;
  a->ops[0] = PT_SUM;
  a->blocking = -1;
  a->average = 1;
  a->inplace = 1;
}

static const struct option longopts[] = {{"nthreads", required_argument, 0, 't'},
                                         {"ngpus", required_argument, 0, 'g'},
                                         {"minbytes", required_argument, 0, 'b'},
                                         {"maxbytes", required_argument, 0, 'e'},
                                         {"stepbytes", required_argument, 0, 'i'},
                                         {"stepfactor", required_argument, 0, 'f'},
                                         {"iters", required_argument, 0, 'n'},
                                         {"agg_iters", required_argument, 0, 'm'},
                                         {"warmup_iters", required_argument, 0, 'w'},
                                         {"run_cycles", required_argument, 0, 'N'},
                                         {"parallel_init", required_argument, 0, 'p'},
                                         {"check", required_argument, 0, 'c'},
                                         {"op", required_argument, 0, 'o'},
                                         {"datatype", required_argument, 0, 'd'},
                                         {"root", required_argument, 0, 'r'},
                                         {"blocking", required_argument, 0, 'z'},
                                         {"stream_null", required_argument, 0, 'y'},
                                         {"timeout", required_argument, 0, 'T'},
                                         {"cudagraph", required_argument, 0, 'G'},
                                         {"report_cputime", required_argument, 0, 'C'},
                                         {"average", required_argument, 0, 'a'},
                                         {"local_register", required_argument, 0, 'R'},
                                         {"inplace", required_argument, 0, 'I'},
                                         {"output_file", required_argument, 0, 'J'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};

/* Integer options: flag, kind ('i' int, 's' size_t, 'b' 0/1, '-' accepted and
 * ignored), accepted range and field. */
static const struct {
  char flag, kind;
  long min, max;
  size_t off;
} int_opts[] = {
    {'t', 'i', 1, 1 << 20, offsetof(pt_args, nthreads)},
    {'g', 'i', 1, 1 << 20, offsetof(pt_args, ngpus)},
    {'i', 's', 0, LONG_MAX, offsetof(pt_args, stepbytes)},
    {'f', 's', 0, LONG_MAX, offsetof(pt_args, stepfactor)},
    {'n', 'i', 0, INT_MAX, offsetof(pt_args, iters)},
    {'m', 'i', 1, INT_MAX, offsetof(pt_args, agg)},
    {'w', 'i', 0, INT_MAX, offsetof(pt_args, warmup)},
    {'N', 'i', 0, INT_MAX, offsetof(pt_args, cycles)},
    {'c', 'i', 0, INT_MAX, offsetof(pt_args, check)},
    {'z', 'b', 0, INT_MAX, offsetof(pt_args, blocking)},
    {'T', 'i', 0, INT_MAX, offsetof(pt_args, timeout)},
    {'C', 'b', 0, INT_MAX, offsetof(pt_args, cputime)},
    {'a', 'i', 0, 3, offsetof(pt_args, average)},
    {'I', 'b', 0, INT_MAX, offsetof(pt_args, inplace)},
    {'p', '-', 0, INT_MAX, 0},
    {'y', '-', 0, INT_MAX, 0},
    {'G', '-', 0, INT_MAX, 0},
    {'R', 'i', 0, 2, offsetof(pt_args, reg)},
};

/* One integer option into its field; -1 on a bad value. */
static int int_option(int c, const char *v, pt_args *a) {
  for (size_t k = 0; k < sizeof int_opts / sizeof int_opts[0]; k++) {
    if (int_opts[k].flag != c) continue;
    char what[3] = {'-', (char)c, 0};
    long x;
    if (parse_int(v, what, int_opts[k].min, int_opts[k].max, &x)) return -1;
    char *field = (char *)a + int_opts[k].off;
    switch (int_opts[k].kind) {
    case 'i':
      *(int *)(void *)field = (int)x;
      break;
    case 's':
      *(size_t *)(void *)field = (size_t)x;
      break;
    case 'b':
      *(int *)(void *)field = x != 0;
      break;
    default:
      break;
    }
    return 0;
  }
  return -1;
}

static int option(int c, const char *v, pt_args *a) {
  switch (c) {
  case 'b':
    if (parse_size(v, &a->minbytes))
      return fprintf(stderr, "invalid size specified for 'minbytes'\n"), -1;
    return 0;
  case 'e':
    if (parse_size(v, &a->maxbytes))
      return fprintf(stderr, "invalid size specified for 'maxbytes'\n"), -1;
    return 0;
  case 'o':
    return parse_op(v, a);
  case 'd':
    return parse_type(v, a);
  case 'J':
    a->json_path = v;
    return 0;
  case 'r': {
    long x;
    if (!strcasecmp(v, "all")) return a->root = -1, 0;
    if (parse_int(v, "-r", 0, INT_MAX, &x)) return -1;
    a->root = (int)x;
    return 0;
  }
  default:
    return int_option(c, v, a);
  }
}

int pt_parse_args(int argc, char **argv, pt_args *a) {
  set_defaults(a);
  int c;
  while ((c = getopt_long(argc, argv, "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:a:R:I:J:h", longopts,
                          NULL)) != -1) {
    if (c == 'h' || c == '?') {
      usage(basename(argv[0]));
      return c == 'h' ? 1 : -1;
    }
    if (option(c, optarg, a) != 0) return -1;
  }
  if (optind < argc) {
    fprintf(stderr, "unexpected argument '%s' (see -h)\n", argv[optind]);
    return -1;
  }
  if (a->minbytes > a->maxbytes) {
    fprintf(stderr, "invalid sizes for 'minbytes' and 'maxbytes': %zu > %zu\n", a->minbytes,
            a->maxbytes);
    return -1;
  }
  if (a->stepfactor <= 1 && a->stepbytes == 0 && a->minbytes < a->maxbytes) {
    fprintf(stderr, "-i 0 with -f <= 1 would never reach maxbytes\n");
    return -1;
  }
  return 0;
}
