/*
 * test_shm.c - shared-memory segments: mode 0600, zero-filled, mappable by
 * name until unlinked, and names left by a dead creator are swept while live
 * ones are kept.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"
#include "util/alloc.h"
#include "util/shm.h"

static void create_open_unlink(void) {
  chorus_shm a, b, c;
  char err[256];
  REQUIRE(chorus_shm_create(&a, "test", 12345, err, sizeof err) == ncclSuccess);
  char path[96];
  snprintf(path, sizeof path, "/dev/shm%s", a.name);
  struct stat st;
  REQUIRE(stat(path, &st) == 0);
  EXPECT_EQ_INT(st.st_mode & 0777, 0600);
  EXPECT(((unsigned char *)a.base)[12344] == 0);
  REQUIRE(chorus_shm_open(&b, a.name, 12345, err, sizeof err) == ncclSuccess);
  ((char *)a.base)[100] = 42;
  EXPECT(((char *)b.base)[100] == 42);
  EXPECT(chorus_shm_open(&c, "/chorus-no-such-segment", 10, err, sizeof err) == ncclSystemError);
  chorus_shm_unlink(&a);
  EXPECT(stat(path, &st) != 0);
  EXPECT(((char *)b.base)[100] == 42); /* still mapped after the name is gone */
  chorus_shm_close(&b);
  chorus_shm_close(&a);
  EXPECT_EQ_INT(chorus_alloc_blocks(CHORUS_MEM_SHM), 0);
}

static void stale_names_swept(void) {
  /* A name as a rank that died during init would leave it. */
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, NULL, 0);
  struct stat st;
  REQUIRE(stat("/proc/self/ns/pid", &st) == 0);
  char dead[96], live[96];
  snprintf(dead, sizeof dead, "/chorus-%d-%lx-fifo-deadbeef", (int)child, (unsigned long)st.st_ino);
  snprintf(live, sizeof live, "/chorus-%d-%lx-fifo-cafe", (int)getpid(), (unsigned long)st.st_ino);
  int fd1 = shm_open(dead, O_CREAT | O_RDWR, 0600), fd2 = shm_open(live, O_CREAT | O_RDWR, 0600);
  REQUIRE(fd1 >= 0 && fd2 >= 0);
  close(fd1);
  close(fd2);
  /* What counts is that the dead name is gone: a test beside this one
   * that sweeps too may have taken it first. */
  (void)chorus_shm_sweep_stale();
  char p1[128], p2[128];
  snprintf(p1, sizeof p1, "/dev/shm%s", dead);
  snprintf(p2, sizeof p2, "/dev/shm%s", live);
  EXPECT(stat(p1, &st) != 0);
  EXPECT(stat(p2, &st) == 0);
  shm_unlink(live);
}

int main(void) {
  RUN(create_open_unlink);
  RUN(stale_names_swept);
  return unit_report();
}
