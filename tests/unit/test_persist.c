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
	CHECK_EQ(paste_persist_begin_commit(p, &ticket), -1);   /* not fsync mode */
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
	CHECK_EQ(paste_persist_begin_commit(p, &ticket), -1);
	paste_persist_close(p);
}

static void test_fsync(struct paste_store *st)
{
	struct paste_persist *p = open_mode(st, PASTE_DUR_FSYNC, 0);
	if (!p)
		return;
	CHECK(strcmp(paste_persist_flush_insn(p), "none") == 0);
	uint64_t ticket = 0, t2 = 0;
	CHECK_EQ(paste_persist_begin_commit(p, &ticket), -1);   /* nothing pending */
	memcpy(paste_store_buf(st, 1), "durable", 7);
	paste_persist_flush(p, paste_store_buf(st, 1), 7);
	CHECK(paste_persist_pending(p));
	CHECK_EQ(paste_persist_begin_commit(p, &ticket), paste_store_fd(st));
	CHECK(!paste_persist_pending(p));
	CHECK_EQ(paste_persist_begin_commit(p, &t2), -1);       /* moved into the commit */
	paste_persist_flush(p, paste_store_buf(st, 2), 100);
	CHECK_EQ(paste_persist_begin_commit(p, &t2), -EBUSY);   /* one in flight at a time */
	CHECK(paste_persist_pending(p));
	paste_persist_end_commit(p, ticket + 7, 0);             /* unknown: ignored */
	CHECK_EQ(paste_persist_begin_commit(p, &t2), -EBUSY);
	paste_persist_end_commit(p, ticket, 0);
	CHECK_EQ(paste_persist_begin_commit(p, &t2), paste_store_fd(st));
	CHECK(t2 != ticket);
	paste_persist_end_commit(p, t2, -EIO);                  /* reported, caller decides */
	paste_persist_flush(p, paste_store_buf(st, 3), 10);
	CHECK_EQ(paste_persist_fence(p), 0);
	CHECK(!paste_persist_pending(p));
	CHECK_EQ(paste_persist_fence(p), 0);
	paste_persist_close(p);
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
		tmpstore_close(&disk);
	} else {
		CHECK(0);
	}
	return check_done();
}
