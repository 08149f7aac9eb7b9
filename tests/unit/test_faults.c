/* test_faults.c - PASTE_FAULT, the test build's fault injection
 * (libpaste_shim): the Nth flush, fence, fdatasync or group-commit
 * completion fails with EIO or ENOSPC, the store enters its failed state
 * and no durability epoch is published from then on. Each case runs in a
 * child process because the rules are read once per process. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "paste.h"

static char dir[64];

struct fixture {
	char path[128];
	struct paste_store *st;
	struct paste_persist *p;
};

static int open_fixture(struct fixture *f, const char *parent, enum paste_durability mode)
{
	static int n;
	struct paste_store_config cfg = { .size = 4u << 20, .log_lanes = 2 };
	struct paste_persist_config pc = { .mode = mode };
	struct paste_error err = { 0 };
	snprintf(f->path, sizeof(f->path), "%s/f%d-%d.store", parent, getpid(), n++);
	if (paste_store_open(&f->st, f->path, &cfg, PASTE_STORE_CREATE, &err) ||
	    paste_persist_open(&f->p, f->st, &pc, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	return 0;
}

static void close_fixture(struct fixture *f)
{
	paste_persist_close(f->p);
	paste_store_close(f->st);
	unlink(f->path);
}

/* fence:2 -> the first fence publishes its epoch, the second fails with EIO
 * and publishes nothing, and so does every later fence. */
static void fence_second(void)
{
	struct fixture f;
	if (open_fixture(&f, dir, PASTE_DUR_EMULATED))
		exit(1);
	paste_persist_flush(f.p, paste_store_buf(f.st, 0), 64);
	uint64_t e1 = paste_persist_epoch(f.p);
	CHECK_EQ(paste_persist_fence(f.p), 0);
	CHECK(paste_persist_durable(f.p) >= e1);
	paste_persist_flush(f.p, paste_store_buf(f.st, 1), 64);
	uint64_t e2 = paste_persist_epoch(f.p);
	CHECK_EQ(paste_persist_fence(f.p), -EIO);
	CHECK(paste_persist_durable(f.p) < e2);
	const char *why;
	CHECK_EQ(paste_store_failed(f.st, &why), -EIO);
	CHECK(strstr(why, "fence") != NULL);
	paste_persist_flush(f.p, paste_store_buf(f.st, 2), 64);
	CHECK_EQ(paste_persist_fence(f.p), -EIO);
	CHECK(paste_persist_durable(f.p) < e2);
	close_fixture(&f);
}

/* flush:3:ENOSPC -> the store fails at the third flush, before any fence. */
static void flush_third(void)
{
	struct fixture f;
	if (open_fixture(&f, dir, PASTE_DUR_EMULATED))
		exit(1);
	for (int i = 0; i < 2; i++)
		paste_persist_flush(f.p, paste_store_buf(f.st, (uint32_t)i), 64);
	CHECK_EQ(paste_store_failed(f.st, NULL), 0);
	paste_persist_flush(f.p, paste_store_buf(f.st, 2), 64);
	CHECK_EQ(paste_store_failed(f.st, NULL), -ENOSPC);
	uint64_t e = paste_persist_epoch(f.p);
	CHECK_EQ(paste_persist_fence(f.p), -ENOSPC);
	CHECK(paste_persist_durable(f.p) < e);
	close_fixture(&f);
}

/* fdatasync:1+ -> every synchronous fdatasync fails (the disk is gone). */
static void fdatasync_every(void)
{
	struct fixture f;
	const char *parent = "/var/tmp";
	if (open_fixture(&f, parent, PASTE_DUR_FSYNC))
		exit(1);
	paste_persist_flush(f.p, paste_store_buf(f.st, 0), 64);
	CHECK_EQ(paste_persist_fence(f.p), -EIO);
	CHECK_EQ(paste_persist_durable(f.p), 0);
	close_fixture(&f);
}

/* commit:2 -> the io_uring port's second group commit completes with EIO
 * even though the real fdatasync succeeded. */
static void commit_second(void)
{
	struct fixture f;
	if (open_fixture(&f, "/var/tmp", PASTE_DUR_FSYNC))
		exit(1);
	uint64_t t;
	for (int i = 0; i < 2; i++) {
		paste_persist_flush(f.p, paste_store_buf(f.st, (uint32_t)i), 64);
		uint64_t e = paste_persist_epoch(f.p);
		int fd = paste_persist_begin_commit(f.p, &t);
		CHECK(fd >= 0);
		int res = commit_wait(fd);
		CHECK_EQ(res, 0);
		CHECK_EQ(paste_persist_end_commit(f.p, t, res), i == 0 ? 0 : -EIO);
		CHECK(i == 0 ? paste_persist_durable(f.p) >= e : paste_persist_durable(f.p) < e);
	}
	CHECK_EQ(paste_persist_begin_commit(f.p, &t), -EIO);
	close_fixture(&f);
}

/* The rules are per operation: fence:1 does not touch a commit. */
static void other_ops_untouched(void)
{
	struct fixture f;
	if (open_fixture(&f, "/var/tmp", PASTE_DUR_FSYNC))
		exit(1);
	uint64_t t;
	paste_persist_flush(f.p, paste_store_buf(f.st, 0), 64);
	int fd = paste_persist_begin_commit(f.p, &t);
	CHECK(fd >= 0);
	CHECK_EQ(paste_persist_end_commit(f.p, t, commit_wait(fd)), 0);
	CHECK_EQ(paste_store_failed(f.st, NULL), 0);
	close_fixture(&f);
}

int main(void)
{
	strcpy(dir, "/dev/shm/paste-test-faults-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	check_in_child("PASTE_FAULT=fence:2", "PASTE_FAULT", "fence:2", fence_second);
	check_in_child("PASTE_FAULT=flush:3:ENOSPC", "PASTE_FAULT", "flush:3:ENOSPC", flush_third);
	check_in_child("PASTE_FAULT=fdatasync:1+", "PASTE_FAULT", "fdatasync:1+", fdatasync_every);
	check_in_child("PASTE_FAULT=commit:2", "PASTE_FAULT", "commit:2", commit_second);
	check_in_child("PASTE_FAULT=fence:1", "PASTE_FAULT", "fence:1", other_ops_untouched);
	rmdir(dir);
	return check_done();
}
