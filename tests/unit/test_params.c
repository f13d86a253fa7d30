/*
 * test_params.c - the variable table: environment first, then the config
 * file, then defaults; one syntax for values (sizes with units, "auto",
 * "off", on/off); malformed values fall back to the default; every
 * declaration is well formed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unit.h"
#include "util/param.h"

static char conf_path[64];

static void defaults_and_env(void) {
  unsetenv("CHORUS_NSLOTS");
  EXPECT(chorus_param_int(CHORUS_P_NSLOTS) == CHORUS_AUTO);
  setenv("CHORUS_NSLOTS", "4", 1);
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_NSLOTS), 4);
  setenv("CHORUS_NSLOTS", "0x10", 1);
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_NSLOTS), 16);
  setenv("CHORUS_NSLOTS", "four", 1);
  EXPECT(chorus_param_int(CHORUS_P_NSLOTS) == CHORUS_AUTO); /* WARN, default */
  unsetenv("CHORUS_NSLOTS");
  EXPECT(chorus_param_str(CHORUS_P_COMM_ID) == NULL);
  EXPECT_STREQ(chorus_param_desc_get(CHORUS_P_SHM_DISABLE)->name, "NCCL_SHM_DISABLE");
}

/* Sizes, special words and booleans, and what each kind refuses. */
static void value_syntax(void) {
  setenv("CHORUS_GPU_FIFO_BYTES", "2M", 1);
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_GPU_FIFO_BYTES), 2 << 20);
  setenv("CHORUS_GPU_FIFO_BYTES", "auto", 1);
  EXPECT(chorus_param_int(CHORUS_P_GPU_FIFO_BYTES) == CHORUS_AUTO);
  setenv("CHORUS_GPU_FIFO_BYTES", "off", 1); /* no "off" here: WARN, default (auto) */
  EXPECT(chorus_param_int(CHORUS_P_GPU_FIFO_BYTES) == CHORUS_AUTO);
  unsetenv("CHORUS_GPU_FIFO_BYTES");
  EXPECT(chorus_param_int(CHORUS_P_GPU_FIFO_BYTES) == CHORUS_AUTO);
  setenv("CHORUS_OP_TIMEOUT", "off", 1);
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_OP_TIMEOUT), 0);
  setenv("CHORUS_OP_TIMEOUT", "0", 1);
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_OP_TIMEOUT), 0);
  setenv("CHORUS_OP_TIMEOUT", "-1", 1); /* special values are words */
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_OP_TIMEOUT), 600);
  setenv("CHORUS_OP_TIMEOUT", "2K", 1); /* not a size */
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_OP_TIMEOUT), 600);
  unsetenv("CHORUS_OP_TIMEOUT");
  static const struct {
    const char *text;
    int value;
  } bools[] = {{"1", 1},   {"on", 1}, {"YES", 1},   {"true", 1}, {"0", 0},
               {"off", 0}, {"no", 0}, {"False", 0}, {"2", 0},    {"maybe", 0}};
  for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
    setenv("CHORUS_HOST_COMM", bools[i].text, 1);
    EXPECT_EQ_INT(chorus_param_int(CHORUS_P_HOST_COMM), bools[i].value);
  }
  unsetenv("CHORUS_HOST_COMM");
  setenv("CHORUS_NT_STORES", "auto", 1);
  EXPECT(chorus_param_int(CHORUS_P_NT_STORES) == CHORUS_AUTO);
  setenv("CHORUS_NT_STORES", "on", 1);
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_NT_STORES), 1);
  unsetenv("CHORUS_NT_STORES");
  EXPECT(chorus_param_int(CHORUS_P_COMM_BLOCKING) == CHORUS_UNSET);
  setenv("NCCL_COMM_BLOCKING", "0", 1);
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_COMM_BLOCKING), 0);
  unsetenv("NCCL_COMM_BLOCKING");
}

/* Every declaration: a name of its kind, a default its own parser takes,
 * one short line of meaning, a section; names unique. */
static void declarations(void) {
  int agree = 0, lines = 0;
  for (int i = 0; i < CHORUS_P_COUNT; i++) {
    const chorus_param_desc *d = chorus_param_desc_get((chorus_param_id)i);
    EXPECT(strncmp(d->name, "NCCL_", 5) == 0 || strncmp(d->name, "CHORUS_", 7) == 0);
    if (d->def && d->type != CHORUS_PARAM_STR) {
      int64_t v;
      EXPECT_EQ_INT(chorus_param_parse(d, d->def, &v), 0);
    }
    EXPECT(d->doc && *d->doc && !strchr(d->doc, '\n') && strlen(d->doc) <= 90);
    EXPECT(*chorus_param_group((chorus_param_id)i));
    agree += (d->flags & CHORUS_PARAM_AGREE) != 0;
    const char *grp = chorus_param_group((chorus_param_id)i);
    lines += strcmp(grp, "testing") != 0 && strcmp(grp, "plugins") != 0 &&
             strncmp(grp, "ncclConfig_t", 12) != 0;
    for (int j = 0; j < i; j++)
      EXPECT(strcmp(chorus_param_desc_get((chorus_param_id)j)->name, d->name) != 0);
  }
  EXPECT(agree >= 3 && agree <= 32); /* the GPU agreement record holds 32 */
  /* A short list: chorus_info's page of them must fit one screen
   * (tools.chorus_info: 66 lines, 9 of them not settings); a line each but
   * the ncclConfig_t overrides, the plugins and the settings for testing,
   * which share a line per group. */
  EXPECT(lines <= 57);
}

static void conf_file_below_env(void) {
  /* The config file is read once, at the first lookup that needs it; this
   * case runs first so that lookup sees our file. */
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_BUFFSIZE), 65536);
  EXPECT_STREQ(chorus_param_str(CHORUS_P_SOCKET_IFNAME), "eth9");
  setenv("NCCL_BUFFSIZE", "4096", 1);
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_BUFFSIZE), 4096);
  unsetenv("NCCL_BUFFSIZE");
}

int main(void) {
  snprintf(conf_path, sizeof conf_path, "/tmp/chorus-test-conf-%d", (int)getpid());
  FILE *f = fopen(conf_path, "w");
  fprintf(f, "# comment\nNCCL_BUFFSIZE = 65536\nNCCL_SOCKET_IFNAME=eth9 # trailing\nJUNK\n");
  fclose(f);
  setenv("NCCL_CONF_FILE", conf_path, 1);
  unsetenv("NCCL_BUFFSIZE");
  unsetenv("NCCL_SOCKET_IFNAME");
  RUN(conf_file_below_env);
  RUN(defaults_and_env);
  RUN(value_syntax);
  RUN(declarations);
  unlink(conf_path);
  return unit_report();
}
