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
#include <sys/wait.h>
#include "check.h"
#include "nouring.h"
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
	uint64_t t0 = paste_clock_ns();
	CHECK_EQ(paste_persist_fence(p), 0);
	uint64_t waited = paste_clock_ns() - t0;
	CHECK(waited >= lat);
	/* Nothing flushed: a fence has nothing to wait for. */
	t0 = paste_clock_ns();
	CHECK_EQ(paste_persist_fence(p), 0);
	CHECK(paste_clock_ns() - t0 < lat);
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
	const char *io = paste_persist_flush_insn(p);
	CHECK(strcmp(io, "direct writes") == 0 || strcmp(io, "page cache") == 0);
	uint64_t ticket = 0, t2 = 0;
	CHECK_EQ(paste_persist_begin_commit(p, &ticket), -ENODATA);   /* nothing pending */
	memcpy(paste_store_buf(st, 1), "durable", 7);
	uint64_t e1 = paste_persist_epoch(p);
	paste_persist_flush(p, paste_store_buf(st, 1), 7);
	CHECK(paste_persist_pending(p));
	int fd = paste_persist_begin_commit(p, &ticket);
	CHECK(fd >= 0 && fd != paste_store_fd(st));              /* the commit's eventfd */
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
	CHECK_EQ(paste_persist_end_commit(p, ticket, commit_wait(fd)), 0);
	CHECK(paste_persist_durable(p) >= e1);                  /* the commit's epoch */
	CHECK(paste_persist_durable(p) < e2);                   /* not the next one */
	CHECK_EQ(paste_persist_begin_commit(p, &t2), fd);
	CHECK(t2 != ticket);
	CHECK_EQ(paste_persist_end_commit(p, t2, commit_wait(fd)), 0);
	CHECK(paste_persist_durable(p) >= e2);
	paste_persist_flush(p, paste_store_buf(st, 3), 10);
	CHECK_EQ(paste_persist_fence(p), 0);                    /* a synchronous fdatasync */
	CHECK(!paste_persist_pending(p));
	CHECK_EQ(paste_persist_durable(p), paste_persist_epoch(p) - 1);
	CHECK_EQ(paste_persist_fence(p), 0);
	CHECK_EQ(paste_store_failed(st, NULL), 0);
	paste_persist_close(p);
}

/* Direct writes (fsync mode on a disk file system): the store is mapped
 * privately, so the file holds exactly what was flushed and committed or
 * fenced, nothing written without a flush, and not a flushed range before
 * its commit ran. Bytes in the same block as a flushed range go with it
 * (buffer 1 and 100 bytes on); buffer 2 starts the next 4 KiB block (the
 * buffer area is page-aligned; 2 KiB buffers) and does not. */
static void test_direct(const char *parent)
{
	struct tmpstore t;
	if (!tmpstore_open(&t, parent)) {
		CHECK(0);
		return;
	}
	struct paste_persist *p = open_mode(t.st, PASTE_DUR_FSYNC, 0);
	if (!p || strcmp(paste_persist_flush_insn(p), "direct writes") != 0) {
		fprintf(stderr, "test_direct: %s takes no direct writes: skipped\n", parent);
		paste_persist_close(p);
		tmpstore_close(&t);
		return;
	}
	const struct paste_store_geom *g = paste_store_geom(t.st);
	int rd = open(t.path, O_RDONLY);
	uint8_t *b1 = paste_store_buf(t.st, 1), *b2 = paste_store_buf(t.st, 2);
	uint8_t *b3 = paste_store_buf(t.st, 3);
	char got[16];
	CHECK(g->buf_offset % 4096 == 0 && g->buf_size == 2048);
	memcpy(b1, "flushed", 7);
	memcpy(b1 + 100, "same-block", 10);       /* not flushed, in the flushed block */
	memcpy(b2, "next-block", 10);             /* not flushed, the next block */
	memcpy(b3, "never", 5);
	paste_persist_flush(p, b1, 7);
	uint64_t off1 = g->buf_offset + 1ull * g->buf_size, off2 = off1 + g->buf_size;
	uint64_t off3 = off2 + g->buf_size;
	uint64_t t1;
	int fd = paste_persist_begin_commit(p, &t1);
	CHECK(fd >= 0);
	/* After the begin, in the same block: a record appended while the
	 * commit is in flight. The commit writes the block as it was at the
	 * begin, so the record cannot reach the disk before its data. */
	memcpy(b1 + 200, "late", 4);
	CHECK_EQ(paste_persist_end_commit(p, t1, commit_wait(fd)), 0);
	CHECK(pread(rd, got, 4, (off_t)off1 + 200) == 4 && memcmp(got, "late", 4) != 0);
	CHECK(pread(rd, got, 7, (off_t)off1) == 7 && !memcmp(got, "flushed", 7));
	CHECK(pread(rd, got, 10, (off_t)off1 + 100) == 10 && !memcmp(got, "same-block", 10));
	CHECK(pread(rd, got, 10, (off_t)off2) == 10 && memcmp(got, "next-block", 10) != 0);
	CHECK(pread(rd, got, 5, (off_t)off3) == 5 && memcmp(got, "never", 5) != 0);
	/* The synchronous fence writes too, and waits for a commit in flight. */
	paste_persist_flush(p, b3, 5);
	int fd2 = paste_persist_begin_commit(p, &t1);
	memcpy(b2, "fenced-too", 10);
	paste_persist_flush(p, b2, 10);
	CHECK_EQ(paste_persist_fence(p), 0);
	CHECK(pread(rd, got, 5, (off_t)off3) == 5 && !memcmp(got, "never", 5));
	CHECK(pread(rd, got, 10, (off_t)off2) == 10 && !memcmp(got, "fenced-too", 10));
	CHECK_EQ(paste_persist_end_commit(p, t1, commit_wait(fd2)), 0);
	CHECK_EQ(paste_persist_durable(p), paste_persist_epoch(p) - 1);
	/* One block in a commit in flight and in the fence after it, many
	 * times over: the fence's newer bytes must be the ones that stay. */
	for (int i = 0; i < 50; i++) {
		char v[16];
		snprintf(v, sizeof(v), "old-%04d", i);
		memcpy(b2, v, 8);
		paste_persist_flush(p, b2, 8);
		int f3 = paste_persist_begin_commit(p, &t1);
		snprintf(v, sizeof(v), "new-%04d", i);
		memcpy(b2, v, 8);
		paste_persist_flush(p, b2, 8);
		CHECK_EQ(paste_persist_fence(p), 0);
		CHECK_EQ(paste_persist_end_commit(p, t1, commit_wait(f3)), 0);
		if (pread(rd, got, 8, (off_t)off2) != 8 || memcmp(got, v, 8) != 0) {
			CHECK(0);
			break;
		}
	}
	/* One store, one way to make it durable: its mapping is private now. */
	struct paste_persist *q = NULL;
	struct paste_persist_config em = { .mode = PASTE_DUR_EMULATED };
	struct paste_error err = { 0 };
	CHECK_EQ(paste_persist_open(&q, t.st, &em, &err), -EINVAL);
	CHECK(strstr(err.msg, "privately") != NULL);
	/* Blocks of 4 KiB over 2 KiB buffers: a second direct writer (a thread
	 * whose buffers may share a block with ours) is refused. */
	struct paste_persist_config fs = { .mode = PASTE_DUR_FSYNC };
	CHECK_EQ(paste_persist_open(&q, t.st, &fs, &err), g->buf_size < 4096 ? -EBUSY : 0);
	paste_persist_close(q);
	q = NULL;
	/* Nor may a later one use the page cache: the mapping holds the bytes. */
	setenv("PASTE_FSYNC_IO", "mapped", 1);
	CHECK_EQ(paste_persist_open(&q, t.st, &fs, &err), -EBUSY);
	CHECK(strstr(err.msg, "no fsync persist object") != NULL);
	unsetenv("PASTE_FSYNC_IO");
	CHECK_EQ(paste_store_failed(t.st, NULL), 0);
	close(rd);
	paste_persist_close(p);
	tmpstore_close(&t);
}

/* The page-cache way (PASTE_FSYNC_IO=mapped, and file systems without
 * O_DIRECT): the shared mapping stays and fdatasync writes it back. */
static void test_mapped(const char *parent)
{
	struct tmpstore t;
	setenv("PASTE_FSYNC_IO", "mapped", 1);
	bool ok = tmpstore_open(&t, parent);
	CHECK(ok);
	struct paste_persist *p = ok ? open_mode(t.st, PASTE_DUR_FSYNC, 0) : NULL;
	unsetenv("PASTE_FSYNC_IO");
	if (!p) {
		if (ok)
			tmpstore_close(&t);
		return;
	}
	CHECK(strcmp(paste_persist_flush_insn(p), "page cache") == 0);
	int rd = open(t.path, O_RDONLY);
	uint8_t *b1 = paste_store_buf(t.st, 1);
	/* A store over half the available memory stays shared: a private
	 * copy would be memory the kernel cannot evict. */
	struct paste_persist *big = NULL;
	setenv("PASTE_MEMAVAILABLE_KB", "4096", 1);         /* the store is 4 MiB */
	CHECK_EQ(paste_persist_open(&big, t.st, NULL, NULL), 0);
	CHECK(big && strcmp(paste_persist_flush_insn(big), "page cache") == 0);
	paste_persist_close(big);
	setenv("PASTE_FSYNC_IO", "direct", 1);
	CHECK_EQ(paste_persist_open(&big, t.st, NULL, NULL), -EBUSY);
	unsetenv("PASTE_FSYNC_IO");
	unsetenv("PASTE_MEMAVAILABLE_KB");
	/* Nor does one become private while p syncs the shared mapping. */
	CHECK_EQ(paste_persist_open(&big, t.st, NULL, NULL), 0);
	CHECK(big && strcmp(paste_persist_flush_insn(big), "page cache") == 0);
	paste_persist_close(big);
	memcpy(b1, "mapped", 6);
	paste_persist_flush(p, b1, 6);
	uint64_t tk;
	int fd = paste_persist_begin_commit(p, &tk);
	CHECK(fd >= 0);
	CHECK_EQ(paste_persist_end_commit(p, tk, commit_wait(fd)), 0);
	char got[8];
	const struct paste_store_geom *g = paste_store_geom(t.st);
	CHECK(pread(rd, got, 6, (off_t)(g->buf_offset + g->buf_size)) == 6 && !memcmp(got, "mapped", 6));
	struct paste_persist *q = NULL;
	struct paste_persist_config em = { .mode = PASTE_DUR_EMULATED };
	CHECK_EQ(paste_persist_open(&q, t.st, &em, NULL), 0);   /* still shared */
	paste_persist_close(q);
	paste_persist_close(p);
	tmpstore_close(&t);
	/* Several writers over buffers smaller than a block: the page cache,
	 * as server.c asks for with --threads 2. */
	ok = tmpstore_open(&t, parent);
	CHECK(ok);
	struct paste_persist_config two = { .mode = PASTE_DUR_FSYNC, .writers = 2 };
	if (ok && paste_persist_open(&p, t.st, &two, NULL) == 0) {
		CHECK(strcmp(paste_persist_flush_insn(p), "page cache") == 0);
		CHECK_EQ(paste_persist_open(&q, t.st, &two, NULL), 0);
		paste_persist_close(q);
	} else {
		CHECK(0);
	}
	setenv("PASTE_FSYNC_IO", "sideways", 1);
	struct paste_error err = { 0 };
	struct paste_persist_config fs = { .mode = PASTE_DUR_FSYNC };
	CHECK_EQ(paste_persist_open(&q, t.st, &fs, &err), -EINVAL);
	CHECK(strstr(err.msg, "PASTE_FSYNC_IO") != NULL);
	unsetenv("PASTE_FSYNC_IO");
	close(rd);
	paste_persist_close(p);
	tmpstore_close(&t);
}

/* Without io_uring (disabled by sysctl, or a seccomp policy: the epoll
 * engine's case), fsync mode still works: the page cache, synced by
 * fdatasync itself. A child process with io_uring_setup refused by a
 * seccomp filter. */
static void test_no_uring(const char *parent)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (refuse_io_uring())
			_exit(3);
		struct tmpstore t;
		if (!tmpstore_open(&t, parent))
			_exit(4);
		struct paste_persist *p = NULL;
		struct paste_persist_config fs = { .mode = PASTE_DUR_FSYNC };
		int bad = paste_persist_open(&p, t.st, &fs, NULL) != 0 ||
			  strcmp(paste_persist_flush_insn(p), "page cache") != 0;
		uint64_t tk;
		if (!bad) {
			uint8_t *b = paste_store_buf(t.st, 1);
			memcpy(b, "no-ring", 7);
			paste_persist_flush(p, b, 7);
			bad = paste_persist_begin_commit(p, &tk) != -EOPNOTSUPP || paste_persist_fence(p) != 0;
			const struct paste_store_geom *g = paste_store_geom(t.st);
			char got[8];
			int rd = open(t.path, O_RDONLY);
			bad |= pread(rd, got, 7, (off_t)(g->buf_offset + g->buf_size)) != 7 || memcmp(got, "no-ring", 7);
			close(rd);
		}
		setenv("PASTE_FSYNC_IO", "direct", 1);   /* direct writes need the ring */
		struct paste_persist *q = NULL;
		bad |= paste_persist_open(&q, t.st, &fs, NULL) != -EBUSY;
		paste_persist_close(p);
		tmpstore_close(&t);
		_exit(bad ? 1 : 0);
	}
	int status = -1;
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
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
		tmpstore_close(&disk);
	} else {
		CHECK(0);
	}
	/* Two persist objects at once: 4 KiB buffers, so both may write
	 * directly (no block holds two threads' buffers). */
	small.buf_size = 4096;
	if (tmpstore_open(&disk, parent)) {
		test_failed_commit(disk.st);   /* the store stays failed */
		tmpstore_close(&disk);
		small.buf_size = 0;
		test_direct(parent);
		test_mapped(parent);
		test_no_uring(parent);
	} else {
		CHECK(0);
	}
	test_watch("/dev/shm");
	return check_done();
}
