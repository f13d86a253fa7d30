/*
 * no_symbol.c - a library named like a network plugin that exports no
 * ncclNetPlugin_* table, so that tests can check the loader refuses it
 * cleanly instead of calling into it.
 */
int loop_not_a_plugin(void);

/* Exported on purpose: the library must not be empty of symbols, or the
 * test would only show that an empty library is refused. */
__attribute__((visibility("default"))) int loop_not_a_plugin(void) {
  return 42;
}
