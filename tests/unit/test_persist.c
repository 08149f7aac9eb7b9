/* test_persist.c - durability detection, flush/fence/pending, group commit,
 * emulated PM latency. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>
#include <linux/magic.h>
#include "check.h"
#include "paste.h"

static struct paste_store_config small = { .size = 4u << 20, .log_lanes = 2 };

struct tmpstore {
	char dir[64], path[96];
	struct paste_store *st;
};

static bool tmpstore_open(struct tmpstore *t, const char *parent)
{
	struct paste_error err = {0};
	snprintf(t->dir, sizeof(t->dir), "%s/paste-test-persist-XXXXXX", parent);
	if (!mkdtemp(t->dir))
		return false;
	snprintf(t->path, sizeof(t->path), "%s/t.store", t->dir);
	int r = paste_store_open(&t->st, t->path, &small, PASTE_STORE_CREATE, &err);
	if (r)
		fprintf(stderr, "%s\n", err.msg);
	return r == 0;
}

static void tmpstore_close(struct tmpstore *t)
{
	paste_store_close(t->st);
	unlink(t->path);
	rmdir(t->dir);
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static struct paste_persist *open_mode(struct paste_store *st, enum paste_durability mode,
				      uint64_t pm_latency_ns)
{
	struct paste_persist *p = NULL;
	struct paste_persist_config cfg = { .mode = mode, .pm_latency_ns = pm_latency_ns };
	CHECK_EQ(paste_persist_open(&p, st, &cfg, NULL), 0);
	return p;
}

static void test_names(void)
{
	enum paste_durability d;
	const char *names[] = { "auto", "none", "emulated", "pmem", "fsync" };
	for (int i = 0; i < 5; i++) {
		CHECK_EQ(paste_durability_parse(names[i], &d), 0);
		CHECK_EQ(d, i);
		CHECK(strcmp(paste_durability_name(d), names[i]) == 0);
	}
	CHECK_EQ(paste_durability_parse("FSYNC!", &d), -EINVAL);
	CHECK_EQ(paste_durability_parse("", &d), -EINVAL);
	CHECK_EQ(paste_durability_parse(NULL, &d), -EINVAL);
	CHECK(strcmp(paste_durability_name((enum paste_durability)42), "unknown") == 0);
}

static bool is_tmpfs(const char *p)
{
	struct statfs s;
	return statfs(p, &s) == 0 && s.f_type == TMPFS_MAGIC;
}

static void test_detect(void)
{
	CHECK_EQ(paste_durability_detect("/dev/shm"), PASTE_DUR_EMULATED);
	/* Not created yet: judged by its directory. */
	CHECK_EQ(paste_durability_detect("/dev/shm/paste-no-such-file"), PASTE_DUR_EMULATED);
	const char *disk = !is_tmpfs("/var/tmp") ? "/var/tmp" : !is_tmpfs("/tmp") ? "/tmp" : NULL;
	if (disk) {
		char p[64];
		snprintf(p, sizeof(p), "%s/paste-no-such-file", disk);
		CHECK_EQ(paste_durability_detect(disk), PASTE_DUR_FSYNC);
		CHECK_EQ(paste_durability_detect(p), PASTE_DUR_FSYNC);
	} else {
		printf("skip: no disk-backed /var/tmp or /tmp\n");
	}
	CHECK_EQ(paste_durability_detect("/no/such/dir/x.store"), PASTE_DUR_FSYNC);
}

static void test_open_errors(struct paste_store *st)
{
	struct paste_persist *p = (void *)1;
	struct paste_error err = {0};
	CHECK_EQ(paste_persist_open(&p, NULL, NULL, &err), -EINVAL);
	CHECK(p == NULL);
	struct paste_persist_config bad = { .mode = (enum paste_durability)99 };
	CHECK_EQ(paste_persist_open(&p, st, &bad, &err), -EINVAL);
	CHECK(strstr(err.msg, "unknown durability mode 99") != NULL);
	struct paste_persist_config slow = { .mode = PASTE_DUR_EMULATED, .pm_latency_ns = 2000000000ull };
	CHECK_EQ(paste_persist_open(&p, st, &slow, &err), -EINVAL);
	CHECK(strstr(err.msg, "over 1 s") != NULL);
}

static void test_emulated(struct paste_store *st)
{
	struct paste_persist *p = NULL;
	CHECK_EQ(paste_persist_open(&p, st, NULL, NULL), 0);   /* AUTO on /dev/shm */
	if (!p)
		return;
	CHECK_EQ(paste_persist_mode(p), PASTE_DUR_EMULATED);
	const char *insn = paste_persist_flush_insn(p);
	CHECK(!strcmp(insn, "clwb") || !strcmp(insn, "clflushopt") || !strcmp(insn, "clflush"));
	uint8_t *b = paste_store_buf(st, 3);
	CHECK(!paste_persist_pending(p));
	memset(b, 0xab, 1000);
	paste_persist_flush(p, b + 7, 1000);
	CHECK(paste_persist_pending(p));
	CHECK_EQ(b[500], 0xab);   /* write-back keeps the data */
	CHECK_EQ(paste_persist_fence(p), 0);
	CHECK(!paste_persist_pending(p));
	CHECK_EQ(paste_persist_fence(p), 0);
	paste_persist_flush(p, b, 0);
	CHECK(!paste_persist_pending(p));
	/* Outside the mapping: refused (a message), nothing pending. */
	uint8_t local[64];
	paste_persist_flush(p, local, sizeof(local));
	paste_persist_flush(p, paste_store_base(st) + paste_store_geom(st)->file_size - 10, 20);
	CHECK(!paste_persist_pending(p));
	/* The whole store, first to last byte. */
	paste_persist_flush(p, paste_store_base(st), paste_store_geom(st)->file_size);
	CHECK(paste_persist_pending(p));
	uint64_t ticket = 0;
	CHECK_EQ(paste_persist_begin_commit(p, &ticket), -ENODATA);   /* not fsync mode */
	CHECK_EQ(paste_persist_fence(p), 0);
	paste_persist_close(p);
}

static void test_latency(struct paste_store *st)
{
	const uint64_t lat = 20 * 1000 * 1000;   /* 20 ms: easy to see */
	struct paste_persist *p = open_mode(st, PASTE_DUR_EMULATED, lat);
	if (!p)
		return;
	paste_persist_flush(p, paste_store_buf(st, 0), 64);
	uint64_t t0 = now_ns();
	CHECK_EQ(paste_persist_fence(p), 0);
	uint64_t waited = now_ns() - t0;
	CHECK(waited >= lat);
	/* Nothing flushed: a fence has nothing to wait for. */
	t0 = now_ns();
	CHECK_EQ(paste_persist_fence(p), 0);
	CHECK(now_ns() - t0 < lat);
	paste_persist_close(p);
}

static void test_none(struct paste_store *st)
{
	struct paste_persist *p = open_mode(st, PASTE_DUR_NONE, 0);
	if (!p)
		return;
	CHECK_EQ(paste_persist_mode(p), PASTE_DUR_NONE);
	CHECK(strcmp(paste_persist_flush_insn(p), "none") == 0);
	paste_persist_flush(p, paste_store_buf(st, 0), 4096);
	CHECK(!paste_persist_pending(p));
	CHECK_EQ(paste_persist_fence(p), 0);
	uint64_t ticket;
	CHECK_EQ(paste_persist_begin_commit(p, &ticket), -ENODATA);
	CHECK(paste_persist_durable(p) == UINT64_MAX);   /* nothing to wait for */
	paste_persist_close(p);
}

static void test_fsync(struct paste_store *st)
{
	struct paste_persist *p = open_mode(st, PASTE_DUR_FSYNC, 0);
	if (!p)
		return;
	CHECK(strcmp(paste_persist_flush_insn(p), "none") == 0);
	uint64_t ticket = 0, t2 = 0;
	CHECK_EQ(paste_persist_begin_commit(p, &ticket), -ENODATA);   /* nothing pending */
	memcpy(paste_store_buf(st, 1), "durable", 7);
	uint64_t e1 = paste_persist_epoch(p);
	paste_persist_flush(p, paste_store_buf(st, 1), 7);
	CHECK(paste_persist_pending(p));
	int fd = paste_persist_begin_commit(p, &ticket);
	/* Its own descriptor, not the store's: writeback errors reach every
	 * open file description, so each thread sees its own. */
	CHECK(fd >= 0 && fd != paste_store_fd(st));
	CHECK(!paste_persist_pending(p));
	CHECK(paste_persist_durable(p) < e1);                   /* not yet */
	CHECK_EQ(paste_persist_begin_commit(p, &t2), -ENODATA); /* moved into the commit */
	uint64_t e2 = paste_persist_epoch(p);
	CHECK(e2 > e1);
	paste_persist_flush(p, paste_store_buf(st, 2), 100);
	CHECK_EQ(paste_persist_begin_commit(p, &t2), -EBUSY);   /* one in flight at a time */
	CHECK(paste_persist_pending(p));
	CHECK(paste_persist_end_commit(p, ticket + 7, 0) < 0);  /* unknown: ignored */
	CHECK_EQ(paste_persist_begin_commit(p, &t2), -EBUSY);
	CHECK_EQ(paste_persist_end_commit(p, ticket, fdatasync(fd) < 0 ? -errno : 0), 0);
	CHECK(paste_persist_durable(p) >= e1);                  /* the commit's epoch */
	CHECK(paste_persist_durable(p) < e2);                   /* not the next one */
	CHECK_EQ(paste_persist_begin_commit(p, &t2), fd);
	CHECK(t2 != ticket);
	CHECK_EQ(paste_persist_end_commit(p, t2, 0), 0);
	CHECK(paste_persist_durable(p) >= e2);
	paste_persist_flush(p, paste_store_buf(st, 3), 10);
	CHECK_EQ(paste_persist_fence(p), 0);                    /* a synchronous fdatasync */
	CHECK(!paste_persist_pending(p));
	CHECK_EQ(paste_persist_durable(p), paste_persist_epoch(p) - 1);
	CHECK_EQ(paste_persist_fence(p), 0);
	CHECK_EQ(paste_store_failed(st, NULL), 0);
	paste_persist_close(p);
}

/* The first failed sync fails the store for every persist object (every
 * thread): no epoch is published again, even by a sync that returns 0. */
static void test_failed_commit(struct paste_store *st)
{
	struct paste_persist *a = open_mode(st, PASTE_DUR_FSYNC, 0);
	struct paste_persist *b = open_mode(st, PASTE_DUR_FSYNC, 0);
	if (!a || !b)
		return;
	uint64_t ta, tb;
	paste_persist_flush(a, paste_store_buf(st, 4), 10);
	paste_persist_flush(b, paste_store_buf(st, 5), 10);
	uint64_t ea = paste_persist_epoch(a), eb = paste_persist_epoch(b);
	CHECK(paste_persist_begin_commit(a, &ta) >= 0);
	CHECK(paste_persist_begin_commit(b, &tb) >= 0);
	CHECK_EQ(paste_persist_end_commit(a, ta, -EIO), -EIO);
	const char *why = NULL;
	CHECK_EQ(paste_store_failed(st, &why), -EIO);
	CHECK(why && strstr(why, "fdatasync") && strstr(why, "Input/output error"));
	/* b's sync "succeeded", but the store failed first: not durable. */
	CHECK_EQ(paste_persist_end_commit(b, tb, 0), -EIO);
	CHECK(paste_persist_durable(a) < ea);
	CHECK(paste_persist_durable(b) < eb);
	paste_persist_flush(b, paste_store_buf(st, 6), 10);
	CHECK_EQ(paste_persist_fence(b), -EIO);
	CHECK(paste_persist_pending(b));                         /* nothing was made durable */
	CHECK_EQ(paste_persist_begin_commit(b, &tb), -EIO);
	/* A later failure does not replace the first reason. */
	paste_store_fail(st, -ENOSPC, "another failure");
	CHECK_EQ(paste_store_failed(st, &why), -EIO);
	CHECK(strstr(why, "another") == NULL);
	paste_persist_close(a);
	paste_persist_close(b);
}

static void test_emulated_epochs(struct paste_store *st)
{
	struct paste_persist *p = open_mode(st, PASTE_DUR_EMULATED, 0);
	if (!p)
		return;
	uint64_t e = paste_persist_epoch(p);
	paste_persist_flush(p, paste_store_buf(st, 0), 64);
	CHECK(paste_persist_durable(p) < e);
	CHECK_EQ(paste_persist_fence(p), 0);
	CHECK(paste_persist_durable(p) >= e);
	CHECK(paste_persist_epoch(p) > e);
	paste_persist_close(p);
}

/* pmem needs MAP_SYNC: clwb + sfence on a page-cache file persists nothing. */
static void test_pmem_refused(struct paste_store *st)
{
	struct paste_persist *p = NULL;
	struct paste_persist_config cfg = { .mode = PASTE_DUR_PMEM };
	struct paste_error err = { 0 };
	if (paste_store_map_sync(st))
		return;   /* a real DAX file system */
	CHECK_EQ(paste_persist_open(&p, st, &cfg, &err), -EOPNOTSUPP);
	CHECK(p == NULL);
	CHECK(strstr(err.msg, "DAX") && strstr(err.msg, "MAP_SYNC") && strstr(err.msg, paste_store_path(st)));
}

/* A store file removed, replaced or truncated under a running server. */
static void test_watch(const char *parent)
{
	struct tmpstore t;
	if (!tmpstore_open(&t, parent)) {
		CHECK(0);
		return;
	}
	CHECK_EQ(paste_store_watch(t.st, 0), 0);
	CHECK_EQ(paste_store_watch(t.st, 1000), 0);
	CHECK_EQ(truncate(t.path, 8192), 0);
	CHECK_EQ(paste_store_watch(t.st, 1000), 0);             /* rate limited: not yet */
	CHECK(paste_store_watch(t.st, 0) < 0);
	const char *why;
	CHECK(paste_store_failed(t.st, &why) < 0 && strstr(why, "truncated"));
	tmpstore_close(&t);

	CHECK(tmpstore_open(&t, parent));
	unlink(t.path);
	CHECK_EQ(paste_store_watch(t.st, 0), -ENOENT);
	CHECK(paste_store_failed(t.st, &why) < 0 && strstr(why, "removed"));
	tmpstore_close(&t);

	CHECK(tmpstore_open(&t, parent));
	/* Another file renamed over the path; a second link keeps the old
	 * inode alive (else this is a removal, as above). */
	char other[128], keep[128];
	snprintf(other, sizeof(other), "%s.new", t.path);
	snprintf(keep, sizeof(keep), "%s.keep", t.path);
	CHECK_EQ(link(t.path, keep), 0);
	int fd = open(other, O_CREAT | O_WRONLY, 0644);
	close(fd);
	CHECK_EQ(rename(other, t.path), 0);
	CHECK_EQ(paste_store_watch(t.st, 0), -ESTALE);
	CHECK(paste_store_failed(t.st, &why) < 0 && strstr(why, "another file"));
	unlink(keep);
	tmpstore_close(&t);
}

int main(void)
{
	struct tmpstore shm, disk;
	test_names();
	test_detect();
	if (tmpstore_open(&shm, "/dev/shm")) {
		test_open_errors(shm.st);
		test_emulated(shm.st);
		test_latency(shm.st);
		test_none(shm.st);
		test_emulated_epochs(shm.st);
		test_pmem_refused(shm.st);
		tmpstore_close(&shm);
	} else {
		CHECK(0);
	}
	const char *parent = !is_tmpfs("/var/tmp") ? "/var/tmp" : "/tmp";
	if (tmpstore_open(&disk, parent)) {
		struct paste_persist *p = NULL;
		CHECK_EQ(paste_persist_open(&p, disk.st, NULL, NULL), 0);
		if (p && !is_tmpfs(parent))
			CHECK_EQ(paste_persist_mode(p), PASTE_DUR_FSYNC);
		paste_persist_close(p);
		test_fsync(disk.st);
		test_pmem_refused(disk.st);
		test_failed_commit(disk.st);   /* last: the store stays failed */
		tmpstore_close(&disk);
	} else {
		CHECK(0);
	}
	test_watch("/dev/shm");
	return check_done();
}
