/*
 * param.h - typed access to the variables declared in param_table.h.
 *
 * Every read goes through here: the environment first, then the config file,
 * then the table's default. Values are not cached (each call looks again), so
 * a test may change the environment between communicators.
 */
#ifndef CHORUS_UTIL_PARAM_H
#define CHORUS_UTIL_PARAM_H

#include <limits.h>
#include <stdint.h>

typedef enum {
#define CHORUS_PARAM(id, name, type, def, doc) CHORUS_P_##id,
#include "util/param_table.h"
#undef CHORUS_PARAM
  CHORUS_P_COUNT
} chorus_param_id;

typedef enum { CHORUS_PARAM_INT, CHORUS_PARAM_STR } chorus_param_type;

typedef struct {
  const char *name;
  chorus_param_type type;
  int64_t def_int;
  const char *def_str;
  const char *doc;
} chorus_param_desc;

/* The declaration of one variable (for listing tools). */
const chorus_param_desc *chorus_param_desc_get(chorus_param_id id);

/* Raw text from the environment or the config file, or NULL when unset. */
const char *chorus_param_raw(chorus_param_id id);

/* INT variables: the value, or the default when unset or not a number (a
 * malformed value is reported once with a WARN). */
int64_t chorus_param_int(chorus_param_id id);

/* STR variables: the value or the default (may be NULL). */
const char *chorus_param_str(chorus_param_id id);

#endif
