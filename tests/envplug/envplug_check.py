#!/usr/bin/env python3
"""envplug_check.py - an environment plugin answers for the environment.

usage: envplug_check.py CHORUS_INFO CHORUSRUN ALL_REDUCE_PERF PLUGIN NOSYM_LIB

With NCCL_ENV_PLUGIN naming the test plugin (env_plugin.c), chorus_info
shows the plugin's values as set (CHORUS_NSLOTS, NCCL_ALGO), the plugin
was initialised with NCCL's version (2.28.9, suffix '') and finalized at
exit, asked for the variables but never for NCCL_ENV_PLUGIN or
NCCL_CONF_FILE; a plugin that hides the environment hides it; a perf
program on 2 ranks takes its configuration from the plugin (the log
level, the subsystems and NCCL_ALGO, none of them in the environment: its
AllReduce runs the ring, results checked; the launcher's NCCL_COMM_ID
comes through it from the environment); a bare name is found on LD_LIBRARY_PATH; a library that is not
there, one without a table and an init that fails each leave the
environment in charge with a WARN naming why; none loads nothing.
"""
import os
import re
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(args, env):
    full = dict(os.environ, **env)
    for k in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_ALGO", "CHORUS_NSLOTS", "NCCL_ENV_PLUGIN",
              "ENVPLUG_VALUES", "ENVPLUG_HIDE", "ENVPLUG_FAIL"):
        if k not in env:
            full.pop(k, None)
    r = subprocess.run(args, env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=100)
    if r.returncode != 0:
        fail("%s with %s: exit %d\n%s" % (" ".join(args), env, r.returncode, r.stdout))
    return r.stdout


def setting(out, name):
    """The value column of name's line in chorus_info: 'default' or 'default =set'."""
    m = re.search(r"^  %s +(\S+(?: =\S+)?)" % name, out, re.M)
    if not m:
        fail("no line for %s:\n%s" % (name, out))
    return m.group(1)


def main():
    info, chorusrun, perf, plugin, nosym = sys.argv[1:6]
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "env.log")
        values = "CHORUS_NSLOTS=4;NCCL_ALGO=ring"
        out = run([info], {"NCCL_ENV_PLUGIN": plugin, "ENVPLUG_VALUES": values, "ENVPLUG_LOG": log,
                           "NCCL_DEBUG": "INFO", "CHORUS_NSLOTS": "2"})
        if setting(out, "CHORUS_NSLOTS") != "auto =4" or setting(out, "NCCL_ALGO") != "- =ring":
            fail("the plugin's values are not shown:\n%s" % out)
        if "env plugin %s (testenv, ncclEnvPlugin_v1) answers for the environment" % plugin \
                not in out:
            fail("the plugin is not said:\n%s" % out)
        lines = open(log).read().splitlines()
        if lines[0] != "init 2.28.9 suffix ''" or lines[-1] != "finalize -":
            fail("init and finalize: %s ... %s" % (lines[:1], lines[-1:]))
        asked = {l.split()[1] for l in lines if l.startswith("get ")}
        if "CHORUS_NSLOTS" not in asked or "NCCL_DEBUG" not in asked:
            fail("not asked for the settings: %s" % sorted(asked))
        if asked & {"NCCL_ENV_PLUGIN", "NCCL_CONF_FILE"}:
            fail("asked for what the environment holds: %s" % sorted(asked))
        out = run([info], {"NCCL_ENV_PLUGIN": plugin, "ENVPLUG_HIDE": "1", "CHORUS_NSLOTS": "2"})
        if setting(out, "CHORUS_NSLOTS") != "auto":
            fail("a plugin that hides the environment: %s" % setting(out, "CHORUS_NSLOTS"))
        out = run([chorusrun, "-n", "2", "--timeout", "90", perf, "-b", "64K", "-e", "64K", "-n",
                   "2", "-w", "1", "-c", "1"],
                  {"NCCL_ENV_PLUGIN": plugin, "ENVPLUG_VALUES":
                   "NCCL_DEBUG=INFO;NCCL_DEBUG_SUBSYS=TUNING;NCCL_ALGO=allreduce:ring"})
        if "Out of bounds values : 0 OK" not in out or \
                len(re.findall(r"AllReduce of 65536 bytes: algorithm ring", out)) < 2:
            fail("a perf program configured by the plugin:\n%s" % out)
        out = run([info], {"NCCL_ENV_PLUGIN": "test", "LD_LIBRARY_PATH": os.path.dirname(plugin),
                           "ENVPLUG_VALUES": values})
        if setting(out, "CHORUS_NSLOTS") != "auto =4":
            fail("a bare name:\n%s" % out)
        for env, why in (({"NCCL_ENV_PLUGIN": os.path.join(tmp, "missing.so")}, "cannot load it"),
                         ({"NCCL_ENV_PLUGIN": nosym}, "it exports no ncclEnvPlugin_v1 table"),
                         ({"NCCL_ENV_PLUGIN": plugin, "ENVPLUG_FAIL": "init"},
                          "(testenv): init returned 3")):
            out = run([info], dict(env, CHORUS_NSLOTS="2", ENVPLUG_VALUES=values))
            if setting(out, "CHORUS_NSLOTS") != "auto =2" or not re.search(
                    r"WARN .*%s.*; the environment applies" % re.escape(why), out):
                fail("%s: %s\n%s" % (env, why, out))
        out = run([info], {"NCCL_ENV_PLUGIN": "none", "CHORUS_NSLOTS": "2", "ENVPLUG_VALUES": values,
                           "LD_LIBRARY_PATH": os.path.dirname(plugin)})
        if setting(out, "CHORUS_NSLOTS") != "auto =2" or "env plugin" in out:
            fail("none:\n%s" % out)
    print("env plugin: ok")


if __name__ == "__main__":
    main()
