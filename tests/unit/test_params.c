/*
 * test_params.c - the variable table: environment first, then the config
 * file, then defaults; malformed integers fall back to the default.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "unit.h"
#include "util/param.h"

static char conf_path[64];

static void defaults_and_env(void) {
  unsetenv("CHORUS_NSLOTS");
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_NSLOTS), 8);
  setenv("CHORUS_NSLOTS", "4", 1);
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_NSLOTS), 4);
  setenv("CHORUS_NSLOTS", "0x10", 1);
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_NSLOTS), 16);
  setenv("CHORUS_NSLOTS", "four", 1);
  EXPECT_EQ_INT(chorus_param_int(CHORUS_P_NSLOTS), 8); /* WARN, default */
  unsetenv("CHORUS_NSLOTS");
  EXPECT(chorus_param_str(CHORUS_P_COMM_ID) == NULL);
  EXPECT_STREQ(chorus_param_desc_get(CHORUS_P_SHM_DISABLE)->name, "NCCL_SHM_DISABLE");
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
  unlink(conf_path);
  return unit_report();
}
