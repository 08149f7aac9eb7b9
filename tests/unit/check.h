/* check.h - the unit tests' whole harness: CHECK() records a failure with
 * file:line and goes on; check_done() prints "N passed, N failed" and
 * returns the exit status meson's test runner reads. */
#ifndef PASTE_CHECK_H
#define PASTE_CHECK_H
#include <stdio.h>

static int check_pass, check_fail;

#define CHECK(cond) do { \
	if (cond) check_pass++; \
	else { check_fail++; fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

#define CHECK_EQ(a, b) do { \
	long long check_a_ = (long long)(a), check_b_ = (long long)(b); \
	if (check_a_ == check_b_) check_pass++; \
	else { check_fail++; fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld\n", \
		__FILE__, __LINE__, #a, check_a_, #b, check_b_); } \
} while (0)

/* fsync mode without a port: wait for a group commit's eventfd (what the
 * uring port reads in its ring); the result is end_commit's res. */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>
static inline int commit_wait(int fd)
{
	uint64_t v;
	return read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v) ? 0 : -errno;
}

/* Run body() in a child after setenv(env, val) when env is set; the
 * child's checks decide its exit status, which must be 0 (a crash or a
 * failed check is this test's failure, named by what). */
#include <stdlib.h>
#include <sys/wait.h>
static inline void check_in_child(const char *what, const char *env, const char *val,
				  void (*body)(void))
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		check_fail = 0;
		if (env)
			setenv(env, val, 1);
		body();
		_exit(check_fail ? 1 : 0);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fprintf(stderr, "  (%s: child status %#x)\n", what, status);
}

/* A directory on a disk (one that takes direct writes and really syncs):
 * /var/tmp, else /tmp, or NULL when both are tmpfs. */
#include <linux/magic.h>
#include <sys/statfs.h>
static inline const char *disk_dir(void)
{
	static const char *const dirs[] = { "/var/tmp", "/tmp" };
	struct statfs s;
	for (int i = 0; i < 2; i++)
		if (statfs(dirs[i], &s) == 0 && s.f_type != TMPFS_MAGIC)
			return dirs[i];
	return NULL;
}

static inline int check_done(void)
{
	printf("%d passed, %d failed\n", check_pass, check_fail);
	return check_fail ? 1 : 0;
}
#endif
