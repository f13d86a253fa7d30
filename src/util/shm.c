/*
 * shm.c - see shm.h.
 */
#include "util/shm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/check.h"
#include "util/misc.h"
#include "util/proc.h"

static void describe_space(char *err, size_t errlen, size_t size, int e) {
  struct statvfs st;
  unsigned long long avail = 0;
  if (statvfs("/dev/shm", &st) == 0) avail = (unsigned long long)st.f_bavail * st.f_frsize;
  chorus_errmsg(err, errlen, ncclSystemError,
                "cannot reserve %zu bytes of shared memory (%s); /dev/shm has %llu MiB free. "
                "Enlarge /dev/shm (docker: --shm-size), lower NCCL_BUFFSIZE, or set "
                "NCCL_SHM_DISABLE=1",
                size, strerror(e), avail >> 20);
}

static unsigned long pid_ns(void) {
  return (unsigned long)chorus_proc_pid_ns();
}

int chorus_shm_count_of(int pid) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  char prefix[64];
  snprintf(prefix, sizeof prefix, "chorus-%d-%lx-", pid, pid_ns());
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
  closedir(d);
  return n;
}

int chorus_shm_sweep_stale(void) {
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  unsigned long ns = pid_ns();
  int removed = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    int pid;
    unsigned long their_ns;
    char path[CHORUS_SHM_NAME_MAX + 2];
    if (sscanf(e->d_name, "chorus-%d-%lx-", &pid, &their_ns) != 2 || their_ns != ns || pid <= 0)
      continue;
    if (!chorus_proc_exited(pid)) continue;
    snprintf(path, sizeof path, "/%s", e->d_name);
    if (shm_unlink(path) == 0) removed++;
  }
  closedir(d);
  return removed;
}

ncclResult_t chorus_shm_create(chorus_shm *shm, const char *tag, size_t size, char *err,
                               size_t errlen) {
  memset(shm, 0, sizeof *shm);
  if (chorus_alloc_injected(CHORUS_MEM_SHM))
    return chorus_errmsg(err, errlen, ncclSystemError,
                         "shm_open(%s) failed: %s (failed by CHORUS_FAULT_SHM)", tag,
                         strerror(ENOSPC));
  uint64_t rnd = 0;
  if (chorus_random_bytes(&rnd, sizeof rnd) != ncclSuccess)
    return chorus_errmsg(err, errlen, ncclSystemError, "getrandom failed: %s", strerror(errno));
  snprintf(shm->name, sizeof shm->name, "/chorus-%d-%lx-%s-%016llx", (int)getpid(), pid_ns(), tag,
           (unsigned long long)rnd);
  int fd = shm_open(shm->name, O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) {
    int e = errno;
    shm->name[0] = '\0';
    return chorus_errmsg(err, errlen, ncclSystemError, "shm_open(%s) failed: %s", tag, strerror(e));
  }
  shm->owner = 1;
  int e = ftruncate(fd, (off_t)size) == 0 ? 0 : errno;
  if (!e) e = posix_fallocate(fd, 0, (off_t)size);
  if (e) {
    describe_space(err, errlen, size, e);
    close(fd);
    chorus_shm_close(shm);
    return ncclSystemError;
  }
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    chorus_shm_close(shm);
    return chorus_errmsg(err, errlen, ncclSystemError, "mmap of %zu bytes failed: %s", size,
                         strerror(e));
  }
  shm->base = p;
  shm->size = size;
  chorus_alloc_account(CHORUS_MEM_SHM, (int64_t)size);
  return ncclSuccess;
}

ncclResult_t chorus_shm_open(chorus_shm *shm, const char *name, size_t size, char *err,
                             size_t errlen) {
  memset(shm, 0, sizeof *shm);
  int fd = shm_open(name, O_RDWR, 0600);
  if (fd < 0)
    return chorus_errmsg(err, errlen, ncclSystemError, "shm_open(%s) failed: %s", name,
                         strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < size) {
    close(fd);
    return chorus_errmsg(err, errlen, ncclSystemError,
                         "segment %s is smaller than expected (%zu bytes)", name, size);
  }
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd);
  if (p == MAP_FAILED)
    return chorus_errmsg(err, errlen, ncclSystemError, "mmap of %s failed: %s", name, strerror(e));
  shm->base = p;
  shm->size = size;
  chorus_alloc_account(CHORUS_MEM_SHM, (int64_t)size);
  return ncclSuccess;
}

void chorus_shm_unlink(chorus_shm *shm) {
  if (shm->owner && shm->name[0]) shm_unlink(shm->name);
  shm->name[0] = '\0';
}

void chorus_shm_close(chorus_shm *shm) {
  if (shm->base) {
    munmap(shm->base, shm->size);
    chorus_alloc_account(CHORUS_MEM_SHM, -(int64_t)shm->size);
  }
  chorus_shm_unlink(shm);
  shm->base = NULL;
  shm->size = 0;
}
