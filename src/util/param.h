/*
 * param.h - typed access to the variables declared in param_table.h.
 *
 * Every read goes through here: the environment first (or an environment
 * plugin, util/envplug.h, where one is loaded), then the config file, then
 * the table's default, each parsed the same way. Values are not
 * cached (each call looks again), so a test may change the environment
 * between communicators. One convention for special values: "auto" (where
 * a setting has an automatic value) and "off" (where it can be turned off;
 * 0 means the same there); sizes take K, M, G units.
 */
#ifndef CHORUS_UTIL_PARAM_H
#define CHORUS_UTIL_PARAM_H

#include <stdint.h>

typedef enum {
#define CHORUS_PARAM(id, name, type, def, flags, doc) CHORUS_P_##id,
#define CHORUS_PARAM_GROUP(title)
#include "util/param_table.h"
#undef CHORUS_PARAM
#undef CHORUS_PARAM_GROUP
  CHORUS_P_COUNT
} chorus_param_id;

typedef enum {
  CHORUS_PARAM_BOOL,
  CHORUS_PARAM_INT,
  CHORUS_PARAM_SIZE,
  CHORUS_PARAM_STR
} chorus_param_type;

/* Flags of a declaration. */
enum {
  CHORUS_PARAM_AUTO = 1,  /* accepts "auto" */
  CHORUS_PARAM_OFF = 2,   /* accepts "off" (and 0) */
  CHORUS_PARAM_AGREE = 4, /* every rank of a GPU communicator sets it alike */
};

/* What chorus_param_int returns for "auto", and for an unset variable
 * without a default. */
#define CHORUS_AUTO  INT64_MIN
#define CHORUS_UNSET (INT64_MIN + 1)

typedef struct {
  const char *name;
  chorus_param_type type;
  const char *def; /* default as text; NULL: unset */
  unsigned flags;  /* CHORUS_PARAM_AUTO | _OFF | _AGREE */
  const char *doc;
} chorus_param_desc;

/* The declaration of one variable (for listing tools). */
const chorus_param_desc *chorus_param_desc_get(chorus_param_id id);
/* The section of the table it is declared in ("logging"). */
const char *chorus_param_group(chorus_param_id id);

/* Raw text from the environment or the config file, or NULL when unset. */
const char *chorus_param_raw(chorus_param_id id);

/* BOOL, INT and SIZE variables: the value (BOOL: 0 or 1; "off": 0),
 * CHORUS_AUTO for "auto", CHORUS_UNSET when unset without a default. A
 * value that does not parse is reported once with a WARN naming it, and
 * the default is used. */
int64_t chorus_param_int(chorus_param_id id);

/* STR variables: the value or the default (may be NULL). */
const char *chorus_param_str(chorus_param_id id);

/* Parses text as declaration d's type would (for the table's own check):
 * 0 with *out, or -1. */
int chorus_param_parse(const chorus_param_desc *d, const char *text, int64_t *out);

/* One line of a config file (NCCL_CONF_FILE, ~/.nccl.conf): NAME=value,
 * '#' starts a comment. 0 with *name and *value (trimmed, within line,
 * which is modified), or -1 when the line sets nothing. */
int chorus_param_conf_line(char *line, const char **name, const char **value);

/* Says, once, which environment plugin answers for the variables, or why
 * the one asked for does not (util/envplug.h). */
void chorus_param_env_report(void);

#endif
