/*
 * layout.c - prints every ABI fact of nccl.h that a compiled program
 * depends on: struct sizes and offsets, enum values, macro values, the
 * contents of the initializers, and the library's version and error strings.
 * Built once against Chorus's header and once against NVIDIA's; the test
 * requires identical output, and checks the error strings and version
 * against the values NVIDIA documents.
 */
#include <nccl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define SIZE(t)   printf("sizeof(%s) = %zu\n", #t, sizeof(t))
#define OFF(t, f) printf("offsetof(%s, %s) = %zu\n", #t, #f, offsetof(t, f))
#define VAL(x)    printf("%s = %lld\n", #x, (long long)(x))

static const char *const expected_strings[] = {
    "no error",
    "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
    "unhandled system error (run with NCCL_DEBUG=INFO for details)",
    "internal error - please report this issue to the NCCL developers",
    "invalid argument (run with NCCL_DEBUG=WARN for details)",
    "invalid usage (run with NCCL_DEBUG=WARN for details)",
    "remote process exited or there was a network error",
    "NCCL operation in progress",
    "unknown result code",
};

int main(void) {
  SIZE(ncclUniqueId);
  SIZE(ncclConfig_t);
  OFF(ncclConfig_t, size);
  OFF(ncclConfig_t, magic);
  OFF(ncclConfig_t, version);
  OFF(ncclConfig_t, blocking);
  OFF(ncclConfig_t, cgaClusterSize);
  OFF(ncclConfig_t, minCTAs);
  OFF(ncclConfig_t, maxCTAs);
  OFF(ncclConfig_t, netName);
  OFF(ncclConfig_t, splitShare);
  OFF(ncclConfig_t, trafficClass);
  OFF(ncclConfig_t, commName);
  OFF(ncclConfig_t, collnetEnable);
  OFF(ncclConfig_t, CTAPolicy);
  OFF(ncclConfig_t, shrinkShare);
  OFF(ncclConfig_t, nvlsCTAs);
  OFF(ncclConfig_t, nChannelsPerNetPeer);
  OFF(ncclConfig_t, nvlinkCentricSched);
  SIZE(ncclSimInfo_t);
  OFF(ncclSimInfo_t, magic);
  OFF(ncclSimInfo_t, version);
  OFF(ncclSimInfo_t, estimatedTime);
  SIZE(ncclResult_t);
  SIZE(ncclDataType_t);
  SIZE(ncclRedOp_t);
  VAL(NCCL_MAJOR);
  VAL(NCCL_MINOR);
  VAL(NCCL_PATCH);
  VAL(NCCL_VERSION_CODE);
  VAL(NCCL_VERSION(2, 8, 4));
  VAL(NCCL_VERSION(2, 28, 9));
  VAL(NCCL_UNIQUE_ID_BYTES);
  VAL(NCCL_CONFIG_UNDEF_INT);
  VAL(NCCL_SPLIT_NOCOLOR);
  VAL(NCCL_WIN_DEFAULT);
  VAL(NCCL_WIN_COLL_SYMMETRIC);
  VAL(NCCL_WIN_REQUIRED_ALIGNMENT);
  VAL(NCCL_CTA_POLICY_DEFAULT);
  VAL(NCCL_CTA_POLICY_EFFICIENCY);
  VAL(NCCL_CTA_POLICY_ZERO);
  VAL(NCCL_SHRINK_DEFAULT);
  VAL(NCCL_SHRINK_ABORT);
  VAL(NCCL_REVOKE_DEFAULT);
  printf("NCCL_UNDEF_FLOAT = %g\n", (double)NCCL_UNDEF_FLOAT);
  printf("NCCL_COMM_NULL is null = %d\n", NCCL_COMM_NULL == NULL);
  VAL(ncclSuccess);
  VAL(ncclUnhandledCudaError);
  VAL(ncclSystemError);
  VAL(ncclInternalError);
  VAL(ncclInvalidArgument);
  VAL(ncclInvalidUsage);
  VAL(ncclRemoteError);
  VAL(ncclInProgress);
  VAL(ncclNumResults);
  VAL(ncclInt8);
  VAL(ncclChar);
  VAL(ncclUint8);
  VAL(ncclInt32);
  VAL(ncclInt);
  VAL(ncclUint32);
  VAL(ncclInt64);
  VAL(ncclUint64);
  VAL(ncclFloat16);
  VAL(ncclHalf);
  VAL(ncclFloat32);
  VAL(ncclFloat);
  VAL(ncclFloat64);
  VAL(ncclDouble);
  VAL(ncclBfloat16);
  VAL(ncclFloat8e4m3);
  VAL(ncclFloat8e5m2);
  VAL(ncclNumTypes);
  VAL(ncclSum);
  VAL(ncclProd);
  VAL(ncclMax);
  VAL(ncclMin);
  VAL(ncclAvg);
  VAL(ncclNumOps);
  VAL(ncclMaxRedOp);
  VAL(ncclScalarDevice);
  VAL(ncclScalarHostImmediate);
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  printf("config init: size %zu magic 0x%x version %u blocking %d cga %d min %d max %d net %p "
         "split %d tc %d name %p collnet %d cta %d shrink %d nvls %d perpeer %d nvlink %d\n",
         c.size, c.magic, c.version, c.blocking, c.cgaClusterSize, c.minCTAs, c.maxCTAs,
         (const void *)c.netName, c.splitShare, c.trafficClass, (const void *)c.commName,
         c.collnetEnable, c.CTAPolicy, c.shrinkShare, c.nvlsCTAs, c.nChannelsPerNetPeer,
         c.nvlinkCentricSched);
  ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
  printf("siminfo init: size %zu magic 0x%x version %u time %g\n", s.size, s.magic, s.version,
         (double)s.estimatedTime);
  /* Runtime facts (from the library this binary runs against). */
  int v = 0, bad = 0;
  ncclGetVersion(&v);
  printf("ncclGetVersion = %d\n", v);
  for (int i = 0; i <= 8; i++) {
    const char *got = ncclGetErrorString((ncclResult_t)i);
    if (strcmp(got, expected_strings[i]) != 0) {
      printf("MISMATCH ncclGetErrorString(%d) = \"%s\"\n", i, got);
      bad = 1;
    }
  }
  if (v != 22809) bad = 1;
  return bad;
}
