/*
 * envplug.h - NCCL's environment plugins (ncclEnvPlugin_v1, new in NCCL
 * 2.28): a library that answers for the environment.
 *
 * NCCL_ENV_PLUGIN names it (a path, or NAME for libnccl-env-NAME.so;
 * "none": no plugin), else libnccl-env.so where it can be found. Once
 * loaded and initialised (NCCL's version, 2.28.9, and its suffix), every
 * variable Chorus reads (util/param.h) is asked of it instead of the
 * environment, as NCCL asks it; where it has no value the config file and
 * then the default apply. NCCL_ENV_PLUGIN and NCCL_CONF_FILE themselves
 * come from the environment. A plugin that cannot be loaded, or whose init
 * fails, leaves the environment in charge, with a WARN. Its finalize runs
 * at exit. Loading says nothing while it happens (the log's own settings
 * are read through it); chorus_envplug_report says it afterwards.
 */
#ifndef CHORUS_UTIL_ENVPLUG_H
#define CHORUS_UTIL_ENVPLUG_H

/* Loads the plugin `want` names (NULL: the default name), once. */
void chorus_envplug_load(const char *want);
/* 1 with *value the plugin's answer for name (NULL: none) while a plugin
 * is in charge; 0 where none is. The string stays valid for the process. */
int chorus_envplug_get(const char *name, const char **value);
/* Logs, once, what became of the plugin (INFO, or WARN when one was
 * asked for or found and cannot be used). */
void chorus_envplug_report(void);

#endif
