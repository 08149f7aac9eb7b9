/* test_store.c - packet store: format, validation, allocator, bounds, and
 * the version-1 -> 2 upgrade. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "paste.h"

#define MIB (1ull << 20)

/* Superblock byte offsets (layout version 2, see lib/store.c). */
#define SB_VERSION 8
#define SB_HDRSIZE 12
#define SB_NBUFS   20
#define SB_UUID    68
#define SB_CRC     108
#define SB_V1_CRC  92   /* version 1: 92 bytes, then the CRC */

static char dir[64];
static char path[128];

static struct paste_store_config small = { .size = 4 * MIB, .buf_size = 2048, .log_lanes = 2 };

static uint8_t *read_file(const char *p, size_t *len)
{
	int fd = open(p, O_RDONLY);
	struct stat s;
	if (fd < 0 || fstat(fd, &s) < 0)
		return NULL;
	uint8_t *b = malloc((size_t)s.st_size + 1);
	*len = (size_t)pread(fd, b, (size_t)s.st_size, 0);
	close(fd);
	return b;
}

static bool file_equals(const char *p, const uint8_t *want, size_t len)
{
	size_t n = 0;
	uint8_t *got = read_file(p, &n);
	bool eq = got && n == len && memcmp(got, want, len) == 0;
	free(got);
	return eq;
}

static void poke(const char *p, off_t off, const void *b, size_t n)
{
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	if (pwrite(fd, b, n, off) != (ssize_t)n)
		perror("poke");
	close(fd);
}

static void fix_crc(const char *p)
{
	uint8_t sb[SB_CRC];
	int fd = open(p, O_RDONLY);
	if (pread(fd, sb, sizeof(sb), 0) != (ssize_t)sizeof(sb))
		perror("fix_crc");
	close(fd);
	uint32_t crc = paste_crc32c(0, sb, sizeof(sb));
	poke(p, SB_CRC, &crc, 4);
}

static struct paste_store *create_small(void)
{
	struct paste_store *st = NULL;
	struct paste_error err = {0};
	unlink(path);
	int r = paste_store_open(&st, path, &small, PASTE_STORE_CREATE | PASTE_STORE_EXCL, &err);
	CHECK_EQ(r, 0);
	if (r)
		fprintf(stderr, "create: %s\n", err.msg);
	return st;
}

static void test_create_roundtrip(void)
{
	struct paste_store *st = create_small();
	if (!st)
		return;
	const struct paste_store_geom *g = paste_store_geom(st);
	CHECK_EQ(g->version, PASTE_STORE_VERSION);
	CHECK_EQ(g->file_size, 4 * MIB);
	CHECK_EQ(g->buf_size, 2048);
	CHECK_EQ(g->log_lanes, 2);
	CHECK_EQ(g->ckpt_offset, 4096);
	CHECK_EQ(g->log_offset, 8192);
	/* auto log: 64 B x 2048 buffers is under 1 MiB, so 1 MiB over 2 lanes */
	CHECK_EQ(g->lane_size, 512 * 1024);
	/* auto node area: 1/8 of the file, between the lanes and the buffers */
	CHECK_EQ(g->node_offset, 8192 + MIB);
	CHECK_EQ(g->node_size, 512 * 1024);
	CHECK_EQ(g->meta_offset, g->node_offset);
	CHECK_EQ(g->buf_offset, 8192 + MIB + 512 * 1024);
	CHECK_EQ(g->nbufs, (4 * MIB - 8192 - MIB - 512 * 1024) / 2048);
	uint32_t pages = 0;
	CHECK(paste_store_nodes(st, &pages) == paste_store_base(st) + g->node_offset);
	CHECK_EQ(pages, 128);
	CHECK(g->uuid[0] || g->uuid[1]);
	CHECK(strcmp(paste_store_path(st), path) == 0);
	CHECK(paste_store_fd(st) >= 0);
	CHECK(paste_store_base(st) != NULL);
	struct paste_store_geom saved = *g;
	memcpy(paste_store_buf(st, 7), "hello", 5);
	paste_store_close(st);

	struct paste_error err = {0};
	CHECK_EQ(paste_store_open(&st, path, NULL, 0, &err), 0);
	if (!st)
		return;
	CHECK(memcmp(paste_store_geom(st), &saved, sizeof(saved)) == 0);
	CHECK(memcmp(paste_store_buf(st, 7), "hello", 5) == 0);
	paste_store_close(st);

	/* CREATE on an existing store opens it, never reformats it. */
	CHECK_EQ(paste_store_open(&st, path, &small, PASTE_STORE_CREATE, &err), 0);
	if (st) {
		CHECK_EQ(paste_store_geom(st)->uuid[0], saved.uuid[0]);
		CHECK(memcmp(paste_store_buf(st, 7), "hello", 5) == 0);
		paste_store_close(st);
	}
}

static void test_open_flags(void)
{
	struct paste_store *st = create_small();
	struct paste_error err = {0};
	paste_store_close(st);
	size_t len;
	uint8_t *before = read_file(path, &len);

	CHECK_EQ(paste_store_open(&st, path, &small, PASTE_STORE_CREATE | PASTE_STORE_EXCL, &err), -EEXIST);
	CHECK(st == NULL);
	CHECK(strstr(err.msg, "already exists") != NULL);
	CHECK(file_equals(path, before, len));
	CHECK_EQ(paste_store_open(&st, path, NULL, PASTE_STORE_CREATE | PASTE_STORE_RDONLY, &err), -EINVAL);
	CHECK_EQ(paste_store_open(&st, path, NULL, 64, &err), -EINVAL);
	CHECK_EQ(paste_store_open(&st, "", NULL, 0, &err), -EINVAL);
	CHECK(file_equals(path, before, len));
	free(before);

	char missing[160];
	snprintf(missing, sizeof(missing), "%s/missing.store", dir);
	CHECK_EQ(paste_store_open(&st, missing, NULL, 0, &err), -ENOENT);
	CHECK(strncmp(err.msg, missing, strlen(missing)) == 0);
	CHECK(access(missing, F_OK) != 0);

	/* A file that is not a store is never touched, even with CREATE. */
	poke(missing, 0, "some user data, not a store", 27);
	before = read_file(missing, &len);
	CHECK_EQ(paste_store_open(&st, missing, &small, PASTE_STORE_CREATE, &err), -EINVAL);
	CHECK(strstr(err.msg, "not a paste store (bad magic)") != NULL);
	CHECK(file_equals(missing, before, len));
	free(before);
	unlink(missing);
}

static void expect_create_error(const struct paste_store_config *cfg, const char *text)
{
	struct paste_store *st = NULL;
	struct paste_error err = {0};
	unlink(path);
	CHECK_EQ(paste_store_open(&st, path, cfg, PASTE_STORE_CREATE, &err), -EINVAL);
	CHECK(st == NULL);
	CHECK(strncmp(err.msg, path, strlen(path)) == 0);
	if (!strstr(err.msg, text)) {
		fprintf(stderr, "want \"%s\" in \"%s\"\n", text, err.msg);
		CHECK(0);
	}
	CHECK(access(path, F_OK) != 0);   /* nothing left behind */
}

static void test_create_config_errors(void)
{
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .buf_size = 1000 }, "not a power of two");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .buf_size = 256 }, "not a power of two");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .buf_size = 131072 }, "not a power of two");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .log_lanes = 65 }, "log lanes");
	expect_create_error(&(struct paste_store_config){ .size = MIB }, "too small");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB + 100 }, "multiple of 4096");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .log_size = 8 * MIB }, "exceeds");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .node_size = 5000 }, "node area");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .node_size = 8192 }, "node area");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .node_size = 8 * MIB }, "node area");
	expect_create_error(&(struct paste_store_config){ .size = 4 * MIB, .node_size = 3 * MIB }, "too small");
	/* Just big enough: 1 MiB log + 8 KiB + 64 buffers (the auto node
	 * area gives way to the buffers). */
	struct paste_store *st = NULL;
	struct paste_store_config edge = { .size = MIB + 8192 + 64 * 2048, .log_lanes = 2 };
	unlink(path);
	CHECK_EQ(paste_store_open(&st, path, &edge, PASTE_STORE_CREATE, NULL), 0);
	if (st) {
		CHECK_EQ(paste_store_geom(st)->nbufs, 64);
		CHECK_EQ(paste_store_geom(st)->node_size, 0);
		CHECK(paste_store_nodes(st, NULL) == NULL);
	}
	paste_store_close(st);
	/* An explicit node area, and none. */
	struct paste_store_config nodes = { .size = 4 * MIB, .node_size = 3 * 4096 };
	unlink(path);
	CHECK_EQ(paste_store_open(&st, path, &nodes, PASTE_STORE_CREATE, NULL), 0);
	if (st)
		CHECK_EQ(paste_store_geom(st)->node_size, 3 * 4096);
	paste_store_close(st);
	nodes.node_size = PASTE_STORE_NO_NODES;
	unlink(path);
	CHECK_EQ(paste_store_open(&st, path, &nodes, PASTE_STORE_CREATE, NULL), 0);
	if (st) {
		CHECK_EQ(paste_store_geom(st)->node_size, 0);
		CHECK_EQ(paste_store_geom(st)->meta_offset, 0);
		CHECK_EQ(paste_store_geom(st)->buf_offset, paste_store_geom(st)->node_offset);
	}
	paste_store_close(st);
	/* Auto log grows past 1 MiB with the buffer count: 64 B per buffer
	 * per lane, so each lane can name every buffer. */
	struct paste_store_config many = { .size = 16 * MIB, .buf_size = 512, .log_lanes = 4 };
	unlink(path);
	CHECK_EQ(paste_store_open(&st, path, &many, PASTE_STORE_CREATE, NULL), 0);
	if (st) {
		const struct paste_store_geom *g = paste_store_geom(st);
		CHECK_EQ(g->lane_size, 16 * MIB / 512 * 64);
		CHECK_EQ(g->log_lanes, 4);
		CHECK_EQ(g->log_offset, 4096 + 4096);
		CHECK_EQ(g->buf_offset % 4096, 0);
	}
	paste_store_close(st);
}

/* Open must fail with code and text, name the path, and change nothing. */
static void expect_open_error(const struct paste_store_config *cfg, int code, const char *text)
{
	struct paste_store *st = NULL;
	struct paste_error err = {0};
	size_t len;
	uint8_t *before = read_file(path, &len);
	CHECK_EQ(paste_store_open(&st, path, cfg, 0, &err), code);
	CHECK(st == NULL);
	CHECK(strncmp(err.msg, path, strlen(path)) == 0);
	if (!strstr(err.msg, text)) {
		fprintf(stderr, "want \"%s\" in \"%s\"\n", text, err.msg);
		CHECK(0);
	}
	CHECK(file_equals(path, before, len));
	/* CREATE on a bad existing file must not "repair" it either. */
	CHECK_EQ(paste_store_open(&st, path, cfg, PASTE_STORE_CREATE, &err), code);
	CHECK(file_equals(path, before, len));
	free(before);
}

static void test_validation_errors(void)
{
	paste_store_close(create_small());
	poke(path, 0, "PASTEST0", 8);
	expect_open_error(NULL, -EINVAL, "not a paste store (bad magic)");

	paste_store_close(create_small());
	uint32_t v3 = 3;
	poke(path, SB_VERSION, &v3, 4);
	expect_open_error(NULL, -EPROTO, "layout version 3, this build reads 2");

	paste_store_close(create_small());
	uint8_t x = 0x5a;
	poke(path, SB_UUID + 3, &x, 1);
	expect_open_error(NULL, -EBADMSG, "superblock checksum mismatch: corrupted");

	/* A checksum-valid superblock whose geometry cannot be right. */
	paste_store_close(create_small());
	uint32_t nbufs = 100000;
	poke(path, SB_NBUFS, &nbufs, 4);
	fix_crc(path);
	expect_open_error(NULL, -EBADMSG, "inconsistent superblock geometry");

	paste_store_close(create_small());
	CHECK_EQ(truncate(path, 3 * MIB), 0);
	expect_open_error(NULL, -EBADMSG, "truncated: file has 3145728 bytes, superblock says 4194304");

	CHECK_EQ(truncate(path, 0), 0);
	expect_open_error(NULL, -EBADMSG, "empty file (truncated, 0 bytes)");
}

static void test_geometry_mismatch(void)
{
	paste_store_close(create_small());
	expect_open_error(&(struct paste_store_config){ .buf_size = 4096 }, -EINVAL,
			  "geometry mismatch: store has 2048-byte buffers, asked for 4096");
	expect_open_error(&(struct paste_store_config){ .size = 8 * MIB }, -EINVAL,
			  "geometry mismatch: store has 4194304 bytes, asked for 8388608");
	expect_open_error(&(struct paste_store_config){ .log_lanes = 4 }, -EINVAL,
			  "geometry mismatch: store has 2 log lanes, asked for 4");
	expect_open_error(&(struct paste_store_config){ .log_size = 2 * MIB }, -EINVAL,
			  "geometry mismatch: store has a 1048576-byte log, asked for 2097152");
	expect_open_error(&(struct paste_store_config){ .node_size = 8192 * 4 }, -EINVAL,
			  "geometry mismatch: store has a 524288-byte node area, asked for 32768");
	expect_open_error(&(struct paste_store_config){ .node_size = PASTE_STORE_NO_NODES }, -EINVAL,
			  "geometry mismatch: store has a 524288-byte node area, asked for none");
	/* Matching values are fine. */
	struct paste_store *st = NULL;
	struct paste_store_config same = small;
	same.log_size = MIB;
	CHECK_EQ(paste_store_open(&st, path, &same, 0, NULL), 0);
	paste_store_close(st);
}

static void test_allocator(void)
{
	struct paste_store *st = create_small();
	if (!st)
		return;
	uint32_t n = paste_store_geom(st)->nbufs;
	uint32_t *idx = malloc(n * sizeof(*idx));
	CHECK_EQ(paste_store_alloc(st, idx, 4), 0);   /* before start */
	CHECK_EQ(paste_store_nfree(st), 0);
	CHECK_EQ(paste_store_start(st), 0);
	CHECK_EQ(paste_store_start(st), -EALREADY);
	CHECK_EQ(paste_store_nfree(st), n);
	CHECK_EQ(paste_store_nheld(st), 0);

	uint32_t got = 0, k;
	while ((k = paste_store_alloc(st, idx + got, 100)) > 0)
		got += k;
	CHECK_EQ(got, n);
	CHECK_EQ(paste_store_nfree(st), 0);
	CHECK_EQ(paste_store_nheld(st), n);
	CHECK_EQ(idx[0], 0);   /* low indices first */
	int distinct = 1;
	uint8_t *seen = calloc(n, 1);
	for (uint32_t i = 0; i < n; i++) {
		if (idx[i] >= n || seen[idx[i]] || paste_store_refcount(st, idx[i]) != 1)
			distinct = 0;
		else
			seen[idx[i]] = 1;
	}
	CHECK(distinct);
	free(seen);
	uint32_t one;
	CHECK_EQ(paste_store_alloc(st, &one, 1), 0);   /* exhausted */

	CHECK_EQ(paste_store_unref(st, 5, false), 0);
	CHECK_EQ(paste_store_nfree(st), 1);
	CHECK_EQ(paste_store_nheld(st), n - 1);
	CHECK_EQ(paste_store_alloc(st, &one, 1), 1);
	CHECK_EQ(one, 5);

	/* keep_if_free: count 0 but not on the list. */
	CHECK_EQ(paste_store_unref(st, 6, true), 0);
	CHECK_EQ(paste_store_refcount(st, 6), 0);
	CHECK_EQ(paste_store_nfree(st), 0);
	CHECK_EQ(paste_store_nheld(st), n - 1);
	CHECK_EQ(paste_store_ref(st, 6), 1);   /* the keeper reposts it */
	CHECK_EQ(paste_store_nheld(st), n);

	/* Shared references: freed only when the last goes. */
	CHECK_EQ(paste_store_ref(st, 9), 2);
	CHECK_EQ(paste_store_ref(st, 9), 3);
	CHECK_EQ(paste_store_unref(st, 9, false), 2);
	CHECK_EQ(paste_store_unref(st, 9, false), 1);
	CHECK_EQ(paste_store_nfree(st), 0);
	CHECK_EQ(paste_store_unref(st, 9, false), 0);
	CHECK_EQ(paste_store_nfree(st), 1);

	/* Out-of-range indices are refused, not followed. */
	CHECK_EQ(paste_store_ref(st, n), 0);
	CHECK_EQ(paste_store_unref(st, PASTE_NO_BUF, false), 0);
	CHECK_EQ(paste_store_refcount(st, n), 0);
	CHECK_EQ(paste_store_nfree(st), 1);
	free(idx);
	paste_store_close(st);
}

/* Recovery takes references before start; start must leave those out. */
static void test_refs_before_start(void)
{
	struct paste_store *st = create_small();
	if (!st)
		return;
	uint32_t n = paste_store_geom(st)->nbufs;
	CHECK_EQ(paste_store_ref(st, 0), 1);
	CHECK_EQ(paste_store_ref(st, 3), 1);
	CHECK_EQ(paste_store_ref(st, 3), 2);
	CHECK_EQ(paste_store_ref(st, n - 1), 1);
	CHECK_EQ(paste_store_unref(st, n - 1, false), 0);   /* back to 0 before start */
	CHECK_EQ(paste_store_nheld(st), 2);
	CHECK_EQ(paste_store_start(st), 0);
	CHECK_EQ(paste_store_nfree(st), n - 2);
	uint32_t *idx = malloc(n * sizeof(*idx));
	uint32_t got = paste_store_alloc(st, idx, n);
	CHECK_EQ(got, n - 2);
	int clash = 0;
	for (uint32_t i = 0; i < got; i++)
		clash += idx[i] == 0 || idx[i] == 3;
	CHECK_EQ(clash, 0);
	CHECK_EQ(paste_store_refcount(st, 3), 2);
	free(idx);
	paste_store_close(st);
}

/* Runs fn in a child with stderr silenced; returns the signal it died of. */
static int child_signal(struct paste_store *st, void (*fn)(struct paste_store *))
{
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 2);
		fn(st);
		_exit(0);
	}
	int status = 0;
	waitpid(pid, &status, 0);
	return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

static void double_unref(struct paste_store *st)
{
	uint32_t b;
	paste_store_alloc(st, &b, 1);
	paste_store_unref(st, b, false);
	paste_store_unref(st, b, false);
}

static void unref_never_taken(struct paste_store *st)
{
	paste_store_unref(st, 11, true);
	paste_store_unref(st, 11, true);
}

static void ref_free_buffer(struct paste_store *st)
{
	uint32_t b;
	paste_store_alloc(st, &b, 1);
	paste_store_unref(st, b, false);
	paste_store_ref(st, b);
}

static void single_unref(struct paste_store *st)
{
	uint32_t b;
	paste_store_alloc(st, &b, 1);
	paste_store_unref(st, b, false);
}

static void test_ownership_bugs_abort(void)
{
	struct paste_store *st = create_small();
	if (!st)
		return;
	paste_store_start(st);
	paste_store_close(st);   /* the lock must not be held across fork */
	CHECK_EQ(paste_store_open(&st, path, NULL, 0, NULL), 0);
	if (!st)
		return;
	paste_store_start(st);
	CHECK_EQ(child_signal(st, single_unref), 0);
	CHECK_EQ(child_signal(st, double_unref), SIGABRT);
	CHECK_EQ(child_signal(st, unref_never_taken), SIGABRT);
	CHECK_EQ(child_signal(st, ref_free_buffer), SIGABRT);
	paste_store_close(st);
}

static void test_bounds(void)
{
	struct paste_store *st = create_small();
	if (!st)
		return;
	const struct paste_store_geom *g = paste_store_geom(st);
	uint8_t *base = paste_store_base(st);
	uint32_t n = g->nbufs;
	CHECK(paste_store_buf(st, 0) == base + g->buf_offset);
	CHECK(paste_store_buf(st, n - 1) == base + g->buf_offset + (uint64_t)(n - 1) * g->buf_size);
	CHECK(paste_store_buf(st, n) == NULL);
	CHECK(paste_store_buf(st, PASTE_NO_BUF) == NULL);
	CHECK_EQ(paste_store_index(st, paste_store_buf(st, 0)), 0);
	CHECK_EQ(paste_store_index(st, paste_store_buf(st, 5) + 100), 5);
	CHECK_EQ(paste_store_index(st, paste_store_buf(st, 5) + g->buf_size - 1), 5);
	CHECK_EQ(paste_store_index(st, paste_store_buf(st, n - 1) + g->buf_size - 1), n - 1);
	CHECK_EQ(paste_store_index(st, paste_store_buf(st, n - 1) + g->buf_size), PASTE_NO_BUF);
	CHECK_EQ(paste_store_index(st, base), PASTE_NO_BUF);
	CHECK_EQ(paste_store_index(st, base + g->buf_offset - 1), PASTE_NO_BUF);
	CHECK_EQ(paste_store_index(st, NULL), PASTE_NO_BUF);
	CHECK_EQ(paste_store_index(st, (void *)UINTPTR_MAX), PASTE_NO_BUF);

	uint64_t len = 0;
	CHECK(paste_store_lane(st, 0, &len) == base + g->log_offset);
	CHECK_EQ(len, g->lane_size);
	CHECK(paste_store_lane(st, 1, NULL) == base + g->log_offset + g->lane_size);
	CHECK(paste_store_lane(st, 2, &len) == NULL);
	CHECK(paste_store_ckpt(st, 0, 0) == base + g->ckpt_offset);
	CHECK(paste_store_ckpt(st, 1, 1) == base + g->ckpt_offset + 3 * PASTE_CKPT_SLOT_SIZE);
	CHECK(paste_store_ckpt(st, 0, 2) == NULL);
	CHECK(paste_store_ckpt(st, 2, 0) == NULL);
	int nonzero = 0;
	for (uint8_t *p = paste_store_ckpt(st, 0, 0); p < paste_store_ckpt(st, 1, 1) + 64; p++)
		nonzero += *p != 0;
	CHECK_EQ(nonzero, 0);   /* slots are zero after format */
	paste_store_close(st);
}

static bool mapping_is_readonly(const void *addr)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	bool ro = false;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 &&
		    (uintptr_t)addr >= lo && (uintptr_t)addr < hi)
			ro = perms[0] == 'r' && perms[1] == '-' && perms[3] == 's';
	}
	if (f)
		fclose(f);
	return ro;
}

static void test_rdonly_and_lock(void)
{
	struct paste_store *st = create_small(), *other = NULL, *ro = NULL;
	struct paste_error err = {0};
	if (!st)
		return;
	CHECK(!mapping_is_readonly(paste_store_base(st)));
	CHECK_EQ(paste_store_open(&other, path, NULL, 0, &err), -EBUSY);
	CHECK(strstr(err.msg, "in use") != NULL);
	CHECK_EQ(paste_store_open(&ro, path, NULL, PASTE_STORE_RDONLY, &err), 0);
	if (ro) {
		CHECK(mapping_is_readonly(paste_store_base(ro)));
		CHECK_EQ(paste_store_geom(ro)->uuid[1], paste_store_geom(st)->uuid[1]);
	}
	paste_store_close(ro);
	paste_store_close(st);
	CHECK_EQ(paste_store_open(&other, path, NULL, 0, &err), 0);
	paste_store_close(other);
}

/* The shared lock of read-only opens: a reader that gets it keeps
 * writers out; one that finds a writer says the store is in use. */
static void test_in_use(void)
{
	struct paste_store *st = create_small(), *ro = NULL, *w = NULL;
	struct paste_error err = {0};
	if (!st)
		return;
	CHECK(!paste_store_in_use(st));
	CHECK_EQ(paste_store_open(&ro, path, NULL, PASTE_STORE_RDONLY, &err), 0);
	CHECK(ro && paste_store_in_use(ro));
	paste_store_close(ro);
	paste_store_close(st);
	CHECK_EQ(paste_store_open(&ro, path, NULL, PASTE_STORE_RDONLY, &err), 0);
	CHECK(ro && !paste_store_in_use(ro));
	CHECK_EQ(paste_store_open(&w, path, NULL, 0, &err), -EBUSY);
	paste_store_close(ro);
}

static uint64_t read_bytes(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	char line[128];
	unsigned long long v = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "read_bytes: %llu", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

/* After an I/O error the page cache may hold pages the disk never got:
 * a writable open of a disk-backed store drops the cached pages, so
 * recovery reads (MAP_POPULATE) what the disk really holds. Seen as
 * storage reads in /proc/self/io: without the drop, the open is served
 * from the cache and reads ~nothing. */
static void test_open_rereads_disk(void)
{
	char d[64], p[96];
	snprintf(d, sizeof(d), "/var/tmp/paste-test-store-XXXXXX");
	if (!mkdtemp(d))
		return;
	snprintf(p, sizeof(p), "%s/t.store", d);
	struct paste_store *st = NULL;
	struct paste_store_config c = { .size = 16u << 20 };
	struct paste_error err = {0};
	CHECK_EQ(paste_store_open(&st, p, &c, PASTE_STORE_CREATE, &err), 0);
	if (!st)
		return;
	uint64_t from = paste_store_geom(st)->buf_offset, to = paste_store_geom(st)->file_size;
	paste_store_close(st);
	/* Written extents (a fresh store is fallocated: unwritten extents
	 * read as zeros without any I/O), synced, then all in the cache. */
	char buf[1 << 16];
	memset(buf, 'x', sizeof(buf));
	int fd = open(p, O_RDWR);
	for (uint64_t off = from; fd >= 0 && off < to; off += sizeof(buf))
		CHECK(pwrite(fd, buf, sizeof(buf), (off_t)off) == (ssize_t)sizeof(buf));
	CHECK_EQ(fsync(fd), 0);
	lseek(fd, 0, SEEK_SET);
	while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
	uint64_t before = read_bytes();
	CHECK_EQ(paste_store_open(&st, p, NULL, 0, &err), 0);
	uint64_t reread = read_bytes() - before;
	CHECK(reread >= (12u << 20));
	if (reread < (12u << 20))
		fprintf(stderr, "  open read %llu bytes from the disk\n", (unsigned long long)reread);
	paste_store_close(st);
	unlink(p);
	rmdir(d);
}

static void *churn(void *arg)
{
	struct paste_store *st = arg;
	uint32_t b[16];
	for (int i = 0; i < 5000; i++) {
		uint32_t k = paste_store_alloc(st, b, 16);
		for (uint32_t j = 0; j < k; j++) {
			paste_store_ref(st, b[j]);
			paste_store_unref(st, b[j], false);
			paste_store_unref(st, b[j], false);
		}
	}
	return NULL;
}

static void test_threads(void)
{
	struct paste_store *st = create_small();
	if (!st)
		return;
	paste_store_start(st);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, churn, st);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(paste_store_nfree(st), paste_store_geom(st)->nbufs);
	CHECK_EQ(paste_store_nheld(st), 0);
	paste_store_close(st);
}

/* Rewrite the superblock of the (closed) version-2 store at path as the
 * previous build wrote it: a store without a node area has version 1's
 * layout, and the first 92 bytes of its superblock are version 1's;
 * version 1 put its CRC at 92 (header size 96). */
static void to_v1(void)
{
	uint8_t sb[112];
	int fd = open(path, O_RDWR);
	CHECK_EQ(pread(fd, sb, sizeof(sb), 0), (ssize_t)sizeof(sb));
	uint32_t one = 1, hs = 96;
	memcpy(sb + SB_VERSION, &one, 4);
	memcpy(sb + SB_HDRSIZE, &hs, 4);
	memset(sb + SB_V1_CRC, 0, sizeof(sb) - SB_V1_CRC);
	uint32_t crc = paste_crc32c(0, sb, SB_V1_CRC);
	memcpy(sb + SB_V1_CRC, &crc, 4);
	CHECK_EQ(pwrite(fd, sb, sizeof(sb), 0), (ssize_t)sizeof(sb));
	close(fd);
}

static struct paste_store *create_no_nodes(void)
{
	struct paste_store_config c = { .size = 4 * MIB, .log_lanes = 2, .node_size = PASTE_STORE_NO_NODES };
	struct paste_store *st = NULL;
	unlink(path);
	CHECK_EQ(paste_store_open(&st, path, &c, PASTE_STORE_CREATE, NULL), 0);
	return st;
}

static void test_upgrade_v1(void)
{
	struct paste_persist *p = NULL;
	struct paste_wal *w = NULL;
	struct paste_error err = {0};
	struct paste_persist_config pc = { .mode = PASTE_DUR_EMULATED };
	/* A store with a log record, then made version 1. */
	struct paste_store *st = create_no_nodes();
	if (!st)
		return;
	uint64_t lsn = 0;
	uint32_t buf_before = paste_store_geom(st)->nbufs;
	uint64_t bo_before = paste_store_geom(st)->buf_offset;
	CHECK_EQ(paste_persist_open(&p, st, &pc, &err), 0);
	CHECK_EQ(paste_wal_open(&w, st, p, &err), 0);
	paste_store_start(st);
	uint32_t b;
	CHECK_EQ(paste_store_alloc(st, &b, 1), 1);
	memcpy(paste_store_buf(st, b), "kept across the upgrade", 23);
	struct paste_extent e = { b, 0, 23 };
	CHECK_EQ(paste_wal_append(w, 0, p, &e, 1, &lsn), 0);
	CHECK_EQ(paste_persist_fence(p), 0);
	paste_wal_close(w);
	paste_persist_close(p);
	paste_store_close(st);
	to_v1();

	/* Refused, saying how to upgrade, file untouched. */
	expect_open_error(NULL, -EPROTO, "layout version 1, this build reads 2");
	CHECK_EQ(paste_store_open(&st, path, NULL, 0, &err), -EPROTO);
	CHECK(strstr(err.msg, "paste-store --store") != NULL && strstr(err.msg, "upgrade") != NULL);
	/* Not while someone holds it. */
	struct paste_store *holder = NULL;
	CHECK_EQ(paste_store_open(&holder, path, NULL, PASTE_STORE_RDONLY, &err), -EPROTO);
	int lock_fd = open(path, O_RDONLY);
	CHECK_EQ(flock(lock_fd, LOCK_SH), 0);
	CHECK_EQ(paste_store_upgrade(path, &err), -EBUSY);
	close(lock_fd);
	/* The upgrade: same records, same buffers, no node area. */
	CHECK_EQ(paste_store_upgrade(path, &err), 0);
	CHECK_EQ(paste_store_upgrade(path, &err), -EALREADY);
	CHECK_EQ(paste_store_open(&st, path, NULL, 0, &err), 0);
	if (!st)
		return;
	const struct paste_store_geom *g = paste_store_geom(st);
	CHECK_EQ(g->version, 2);
	CHECK_EQ(g->node_size, 0);
	CHECK_EQ(g->nbufs, buf_before);
	CHECK_EQ(g->buf_offset, bo_before);
	CHECK_EQ(paste_wal_open(&w, st, NULL, &err), 0);
	const struct paste_extent *ext;
	uint32_t n, len;
	CHECK_EQ(paste_wal_lookup(w, lsn, &ext, &n, &len), 0);
	CHECK(n == 1 && len == 23 && memcmp(paste_store_buf(st, ext[0].buf), "kept across the upgrade", 23) == 0);
	CHECK_EQ(paste_wal_check(w, &err), 0);
	paste_wal_close(w);
	paste_store_close(st);

	/* What is not a sound version-1 store is left alone. */
	paste_store_close(create_no_nodes());
	to_v1();
	uint8_t x = 0x5a;
	poke(path, SB_UUID, &x, 1);
	size_t blen;
	uint8_t *before = read_file(path, &blen);
	CHECK_EQ(paste_store_upgrade(path, &err), -EBADMSG);
	CHECK(strstr(err.msg, "checksum") != NULL);
	CHECK(file_equals(path, before, blen));
	free(before);
	poke(path, 0, "NOTPASTE", 8);
	CHECK_EQ(paste_store_upgrade(path, &err), -EINVAL);
	uint32_t v7 = 7;
	paste_store_close(create_small());
	poke(path, SB_VERSION, &v7, 4);
	CHECK_EQ(paste_store_upgrade(path, &err), -EPROTO);
	char missing[160];
	snprintf(missing, sizeof(missing), "%s/none.store", dir);
	CHECK_EQ(paste_store_upgrade(missing, &err), -ENOENT);
}

int main(void)
{
	strcpy(dir, "/dev/shm/paste-test-store-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/t.store", dir);
	test_create_roundtrip();
	test_open_flags();
	test_create_config_errors();
	test_validation_errors();
	test_geometry_mismatch();
	test_allocator();
	test_refs_before_start();
	test_ownership_bugs_abort();
	test_bounds();
	test_rdonly_and_lock();
	test_in_use();
	test_open_rereads_disk();
	test_threads();
	test_upgrade_v1();
	unlink(path);
	rmdir(dir);
	return check_done();
}
