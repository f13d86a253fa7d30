/*
 * chorus_info - prints what Chorus is and every environment variable it
 * reads (name, type, default, current value, meaning), from the one table in
 * src/util/param_table.h, plus the algorithms NCCL_ALGO can name.
 *
 * usage: chorus_info [--markdown]
 */
#include <stdio.h>
#include <string.h>

#include "algo/algos.h"
#include "chorus.h"
#include "device/device.h"
#include "util/param.h"

int main(int argc, char **argv) {
  int md = argc > 1 && strcmp(argv[1], "--markdown") == 0;
  int v = 0;
  ncclGetVersion(&v);
  printf("Chorus %s, NCCL API %d.%d.%d (ncclGetVersion %d), CUDA support built: %s, "
         "devices visible: %d\n\n",
         CHORUS_VERSION_STRING, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, v,
         chorus_device_built() ? "yes" : "no", chorus_device_count());
  if (md) printf("| variable | type | default | meaning |\n|---|---|---|---|\n");
  for (int i = 0; i < CHORUS_P_COUNT; i++) {
    const chorus_param_desc *d = chorus_param_desc_get((chorus_param_id)i);
    char def[32];
    if (d->type == CHORUS_PARAM_INT)
      snprintf(def, sizeof def, "%lld", (long long)d->def_int);
    else
      snprintf(def, sizeof def, "%s", d->def_str ? d->def_str : "(unset)");
    if (d->type == CHORUS_PARAM_INT && d->def_int == INT_MIN) snprintf(def, sizeof def, "(unset)");
    const char *cur = chorus_param_raw((chorus_param_id)i);
    if (md)
      printf("| `%s` | %s | %s | %s |\n", d->name, d->type == CHORUS_PARAM_INT ? "int" : "string",
             def, d->doc);
    else
      printf("%-40s %-6s default %-12s%s%s\n    %s\n", d->name,
             d->type == CHORUS_PARAM_INT ? "int" : "string", def, cur ? " set to " : "",
             cur ? cur : "", d->doc);
  }
  printf("\nAlgorithms (NCCL_ALGO):\n");
  for (int a = 0; a < CHORUS_ALGO_COUNT; a++) {
    const chorus_algo_desc *d = chorus_algo_get((chorus_algo)a);
    printf("  %-10s %s\n", d->name, d->doc);
  }
  return 0;
}
