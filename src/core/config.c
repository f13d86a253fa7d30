/*
 * config.c - see config.h.
 */
#include "core/config.h"

#include <stddef.h>
#include <string.h>

#include "util/alloc.h"
#include "util/check.h"
#include "util/param.h"

#define CONFIG_MAGIC 0xcafebeefu
#define MAX_CTAS     64
#define MAX_CGA      8
#define UNDEF        NCCL_CONFIG_UNDEF_INT

static void set_undef(ncclConfig_t *c) {
  ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
  *c = init;
}

/* Fields a caller built against `version` cannot have set. */
static void reset_newer_fields(ncclConfig_t *c, unsigned version) {
  if (version < 21400) c->blocking = UNDEF;
  if (version < 21700) {
    c->cgaClusterSize = c->minCTAs = c->maxCTAs = UNDEF;
    c->netName = NULL;
  }
  if (version < 22500) c->trafficClass = UNDEF;
  if (version < 22700) {
    c->collnetEnable = c->CTAPolicy = c->shrinkShare = c->nvlsCTAs = UNDEF;
  }
  if (version < 22800) c->nChannelsPerNetPeer = c->nvlinkCentricSched = UNDEF;
}

/* A caller's size may end inside a field (a struct of another layout, or
 * garbage): a field it does not cover whole is unset, never half the
 * caller's bytes beside half the default's (half a pointer is a crash). */
static void keep_whole_fields(ncclConfig_t *c, size_t size) {
  ncclConfig_t undef;
  set_undef(&undef);
#define FIELD(f)                                                                                   \
  if (offsetof(ncclConfig_t, f) + sizeof c->f > size) c->f = undef.f
  FIELD(blocking);
  FIELD(cgaClusterSize);
  FIELD(minCTAs);
  FIELD(maxCTAs);
  FIELD(netName);
  FIELD(splitShare);
  FIELD(trafficClass);
  FIELD(commName);
  FIELD(collnetEnable);
  FIELD(CTAPolicy);
  FIELD(shrinkShare);
  FIELD(nvlsCTAs);
  FIELD(nChannelsPerNetPeer);
  FIELD(nvlinkCentricSched);
#undef FIELD
}

static ncclResult_t bad(const char *what, const char *field, int value, const char *valid) {
  return chorus_error(ncclInvalidArgument, "%s: ncclConfig_t.%s = %d is invalid (%s)", what, field,
                      value, valid);
}

static ncclResult_t validate(const ncclConfig_t *c, const char *what) {
#define BOOL_FIELD(f)                                                                              \
  if (c->f != UNDEF && c->f != 0 && c->f != 1) return bad(what, #f, c->f, "0 or 1")
  BOOL_FIELD(blocking);
  BOOL_FIELD(splitShare);
  BOOL_FIELD(collnetEnable);
  BOOL_FIELD(shrinkShare);
  BOOL_FIELD(nvlinkCentricSched);
#undef BOOL_FIELD
  if (c->cgaClusterSize != UNDEF && c->cgaClusterSize < 0)
    return bad(what, "cgaClusterSize", c->cgaClusterSize, ">= 0");
  if (c->minCTAs != UNDEF && (c->minCTAs <= 0 || c->minCTAs > MAX_CTAS))
    return bad(what, "minCTAs", c->minCTAs, "1..64");
  if (c->maxCTAs != UNDEF && (c->maxCTAs <= 0 || c->maxCTAs > MAX_CTAS))
    return bad(what, "maxCTAs", c->maxCTAs, "1..64");
  if (c->trafficClass != UNDEF && c->trafficClass < 0)
    return bad(what, "trafficClass", c->trafficClass, ">= 0");
  if (c->CTAPolicy != UNDEF && (c->CTAPolicy < 0 || c->CTAPolicy > NCCL_CTA_POLICY_ZERO))
    return bad(what, "CTAPolicy", c->CTAPolicy, "NCCL_CTA_POLICY_DEFAULT, _EFFICIENCY or _ZERO");
  if (c->nvlsCTAs != UNDEF && c->nvlsCTAs <= 0) return bad(what, "nvlsCTAs", c->nvlsCTAs, "> 0");
  if (c->nChannelsPerNetPeer != UNDEF &&
      (c->nChannelsPerNetPeer <= 0 || c->nChannelsPerNetPeer > MAX_CTAS))
    return bad(what, "nChannelsPerNetPeer", c->nChannelsPerNetPeer, "1..64");
  return ncclSuccess;
}

static void env_override(ncclConfig_t *c) {
  static const struct {
    chorus_param_id id;
    size_t offset;
  } ints[] = {
      {CHORUS_P_COMM_BLOCKING, offsetof(ncclConfig_t, blocking)},
      {CHORUS_P_CGA_CLUSTER_SIZE, offsetof(ncclConfig_t, cgaClusterSize)},
      {CHORUS_P_MIN_CTAS, offsetof(ncclConfig_t, minCTAs)},
      {CHORUS_P_MAX_CTAS, offsetof(ncclConfig_t, maxCTAs)},
      {CHORUS_P_SPLIT_SHARE, offsetof(ncclConfig_t, splitShare)},
      {CHORUS_P_COLLNET_ENABLE, offsetof(ncclConfig_t, collnetEnable)},
      {CHORUS_P_CTA_POLICY, offsetof(ncclConfig_t, CTAPolicy)},
      {CHORUS_P_SHRINK_SHARE, offsetof(ncclConfig_t, shrinkShare)},
      {CHORUS_P_NVLS_NCHANNELS, offsetof(ncclConfig_t, nvlsCTAs)},
      {CHORUS_P_NCHANNELS_PER_NET_PEER, offsetof(ncclConfig_t, nChannelsPerNetPeer)},
      {CHORUS_P_NVLINK_SCHED, offsetof(ncclConfig_t, nvlinkCentricSched)},
  };
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    int64_t v = chorus_param_int(ints[i].id);
    if (v != CHORUS_UNSET) {
      int iv = (int)v;
      memcpy((char *)c + ints[i].offset, &iv, sizeof iv);
      INFO(CHORUS_ENV, "%s set by environment to %d", chorus_param_desc_get(ints[i].id)->name, iv);
    }
  }
  const char *net = chorus_param_str(CHORUS_P_NET);
  if (net && *net) c->netName = net;
}

static void fill_defaults(ncclConfig_t *c) {
  if (c->blocking == UNDEF) c->blocking = 1;
  if (c->cgaClusterSize == UNDEF) c->cgaClusterSize = 4;
  if (c->cgaClusterSize > MAX_CGA) c->cgaClusterSize = MAX_CGA;
  if (c->minCTAs == UNDEF) c->minCTAs = 1;
  /* maxCTAs stays unset when nobody set it: a cap asked for, even of 64,
   * keeps launches to it (gpu/settings.c), where unset leaves the kernels
   * their own counts (up to 128). */
  if (c->maxCTAs != UNDEF && c->minCTAs > c->maxCTAs) c->minCTAs = c->maxCTAs;
  if (c->splitShare == UNDEF) c->splitShare = 0;
  if (c->collnetEnable == UNDEF) c->collnetEnable = 0;
  if (c->CTAPolicy == UNDEF) c->CTAPolicy = NCCL_CTA_POLICY_DEFAULT;
  if (c->shrinkShare == UNDEF) c->shrinkShare = 0;
  if (c->nvlinkCentricSched == UNDEF) c->nvlinkCentricSched = 0;
}

void chorus_config_free(ncclConfig_t *cfg) {
  chorus_free((void *)cfg->netName);
  chorus_free((void *)cfg->commName);
  cfg->netName = cfg->commName = NULL;
}

/* Replaces borrowed strings with owned copies. */
static ncclResult_t own_strings(ncclConfig_t *c) {
  const char *net = c->netName, *name = c->commName;
  c->netName = c->commName = NULL;
  if (net && !(c->netName = chorus_strdup(net))) goto oom;
  if (name && !(c->commName = chorus_strdup(name))) goto oom;
  return ncclSuccess;
oom:
  chorus_config_free(c);
  return chorus_error(ncclSystemError, "out of memory copying ncclConfig_t strings");
}

ncclResult_t chorus_config_copy(ncclConfig_t *dst, const ncclConfig_t *src) {
  *dst = *src;
  return own_strings(dst);
}

ncclResult_t chorus_config_parse(const ncclConfig_t *user, const ncclConfig_t *inherit,
                                 ncclConfig_t *out, const char *what) {
  ncclConfig_t c;
  if (inherit && !user) {
    c = *inherit;
  } else {
    set_undef(&c);
  }
  if (user) {
    size_t size;
    unsigned magic, version;
    memcpy(&size, user, sizeof size);
    memcpy(&magic, (const char *)user + offsetof(ncclConfig_t, magic), sizeof magic);
    memcpy(&version, (const char *)user + offsetof(ncclConfig_t, version), sizeof version);
    if (magic != CONFIG_MAGIC || size < offsetof(ncclConfig_t, blocking))
      return chorus_error(ncclInvalidArgument,
                          "%s: ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER "
                          "(magic 0x%x, size %zu)",
                          what, magic, size);
    memcpy(&c, user, size < sizeof c ? size : sizeof c);
    keep_whole_fields(&c, size);
    reset_newer_fields(&c, version);
    CHECK(validate(&c, what));
  }
  env_override(&c);
  CHECK(validate(&c, what));
  /* Chorus's kernels choose their CTAs by size: a floor asked for is
   * accepted and said not to apply (a cap, maxCTAs, applies: gpu.c). */
  if (c.minCTAs != UNDEF)
    INFO(CHORUS_INIT,
         "%s: minCTAs %d (config or NCCL_MIN_CTAS) is accepted but not applied: the GPU kernels "
         "choose their own CTA counts",
         what, c.minCTAs);
  fill_defaults(&c);
  c.size = sizeof c;
  c.magic = CONFIG_MAGIC;
  c.version = NCCL_VERSION_CODE;
  *out = c;
  return own_strings(out);
}
