/*
 * config.h - reading ncclConfig_t as NCCL does.
 *
 * The caller's struct may come from an older or newer nccl.h: we copy at most
 * its `size` bytes (never more than we know), reset the fields its `version`
 * predates, validate, apply the NCCL_* environment overrides and finally
 * fill defaults. The result is a complete ncclConfig_t owned by the
 * communicator (strings copied).
 */
#ifndef CHORUS_CORE_CONFIG_H
#define CHORUS_CORE_CONFIG_H

#include "nccl.h"

/* Parses `user` (may be NULL) on top of `inherit` (may be NULL: defaults).
 * `what` names the calling function in messages. */
ncclResult_t chorus_config_parse(const ncclConfig_t *user, const ncclConfig_t *inherit,
                                 ncclConfig_t *out, const char *what);
/* Frees the strings of a parsed config. */
void chorus_config_free(ncclConfig_t *cfg);
/* Copies a parsed config (duplicating strings). */
ncclResult_t chorus_config_copy(ncclConfig_t *dst, const ncclConfig_t *src);

#endif
