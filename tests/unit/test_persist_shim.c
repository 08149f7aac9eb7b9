/* test_persist_shim.c - the crash image (libpaste_shim) holds exactly the
 * lines that were written back and then fenced or committed, with the
 * bytes they were written back with: in emulated PM the write-back queue's
 * ranges at the fence (so a range lost in its merging is missing), in
 * fsync mode the blocks a commit writes. At a failed barrier the shim's
 * crash policy (PASTE_SHIM_CRASH) decides which unfenced lines reach it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "paste.h"

static char dir[64], path[96], image[96];
static struct paste_store *st;
static int image_fd = -1;

/* Does the image hold 64 bytes of `c` at the line of addr? */
static bool image_has(const uint8_t *addr, uint8_t c)
{
	uint8_t line[64], want[64];
	uint64_t off = (uint64_t)(addr - paste_store_base(st)) & ~63ull;
	memset(want, c, sizeof(want));
	return pread(image_fd, line, 64, (off_t)off) == 64 && memcmp(line, want, 64) == 0;
}

static uint8_t *line_at(uint32_t buf, uint32_t n)
{
	return paste_store_buf(st, buf) + 64 * n;
}

static void test_image_starts_as_copy(void)
{
	size_t size = paste_store_geom(st)->file_size;
	uint8_t *copy = malloc(size);
	CHECK_EQ(pread(image_fd, copy, size, 0), (ssize_t)size);
	CHECK(memcmp(copy, paste_store_base(st), size) == 0);
	CHECK(image_has(line_at(0, 0), 'i'));   /* written before the first open */
	free(copy);
}

static void test_emulated(void)
{
	struct paste_persist *p = NULL;
	struct paste_persist_config cfg = { .mode = PASTE_DUR_EMULATED };
	CHECK_EQ(paste_persist_open(&p, st, &cfg, NULL), 0);
	if (!p)
		return;
	memset(line_at(1, 0), 'A', 64);
	paste_persist_flush(p, line_at(1, 0), 64);
	memset(line_at(1, 1), 'B', 64);
	paste_persist_flush(p, line_at(1, 1) + 10, 5);   /* any byte flushes its line */
	memset(line_at(1, 1), 'b', 64);   /* the write-back waits for the fence: it takes this */
	CHECK(!image_has(line_at(1, 0), 'A'));            /* flushed, not fenced */
	CHECK_EQ(paste_persist_fence(p), 0);
	CHECK(image_has(line_at(1, 0), 'A'));
	CHECK(image_has(line_at(1, 1), 'b'));

	memset(line_at(1, 2), 'C', 64);
	paste_persist_flush(p, line_at(1, 2), 64);
	memset(line_at(1, 3), 'D', 64);                   /* never flushed */
	CHECK(image_has(line_at(1, 2), 0));
	CHECK(image_has(line_at(1, 3), 0));
	CHECK_EQ(paste_persist_fence(p), 0);
	CHECK(image_has(line_at(1, 2), 'C'));
	CHECK(image_has(line_at(1, 3), 0));

	/* A range across a line boundary takes both whole lines. */
	memset(line_at(2, 0), 'E', 128);
	paste_persist_flush(p, line_at(2, 0) + 60, 8);
	memset(line_at(2, 2), 'F', 64);
	CHECK_EQ(paste_persist_fence(p), 0);
	CHECK(image_has(line_at(2, 0), 'E'));
	CHECK(image_has(line_at(2, 1), 'E'));
	CHECK(image_has(line_at(2, 2), 0));

	/* Flushed, then the process "crashes": close drops unfenced lines. */
	memset(line_at(2, 3), 'G', 64);
	paste_persist_flush(p, line_at(2, 3), 64);
	paste_persist_close(p);
	CHECK(image_has(line_at(2, 3), 0));
}

/* ---- the write-back queue ------------------------------------------------ */

#define QLINES 4096u        /* 256 KiB of buffers: 64 blocks of 4 KiB */
#define QBUF 16u            /* the region starts at this buffer */

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* One round: the region takes the byte v, `n` ranges of whole lines
 * [lo, hi) are flushed (at any byte inside their first and last line),
 * then a barrier. Every flushed line must be in the image with v. With
 * exact (emulated PM: nothing but the queued lines is written back) every
 * other line must be as it was; in fsync mode a line of a written block
 * may be v as well. Returns the lines wrong. */
static uint32_t queue_round(struct paste_persist *p, uint8_t *img, uint8_t v, const uint32_t (*r)[2],
			    uint32_t n, bool exact, bool commit)
{
	uint8_t *region = paste_store_buf(st, QBUF);
	uint64_t at = (uint64_t)(region - paste_store_base(st));
	static bool flushed[QLINES];
	memset(flushed, 0, sizeof(flushed));
	memset(region, v, (size_t)QLINES * 64);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t lo = r[i][0], hi = r[i][1], head = (lo * 7 + hi) % 32, tail = (hi * 5 + lo) % 32;
		paste_persist_flush(p, region + (size_t)lo * 64 + head, (size_t)(hi - lo) * 64 - head - tail);
		for (uint32_t l = lo; l < hi; l++)
			flushed[l] = true;
	}
	if (commit && paste_persist_mode(p) == PASTE_DUR_FSYNC) {
		uint64_t t = 0;
		int fd = paste_persist_begin_commit(p, &t);
		CHECK(fd >= 0);
		CHECK_EQ(paste_persist_end_commit(p, t, fd >= 0 ? commit_wait(fd) : fd), 0);
	} else {
		CHECK_EQ(paste_persist_fence(p), 0);
	}
	uint8_t *now = malloc((size_t)QLINES * 64);
	CHECK_EQ(pread(image_fd, now, (size_t)QLINES * 64, (off_t)at), (ssize_t)QLINES * 64);
	uint32_t wrong = 0;
	for (uint32_t l = 0; l < QLINES; l++) {
		uint8_t want[64];
		memset(want, flushed[l] ? v : img[l], 64);
		bool ok = memcmp(now + (size_t)l * 64, want, 64) == 0;
		if (!ok && !flushed[l] && !exact) {
			memset(want, v, 64);
			ok = memcmp(now + (size_t)l * 64, want, 64) == 0;
		}
		wrong += !ok;
		img[l] = now[(size_t)l * 64];
	}
	free(now);
	return wrong;
}

/* Flushes that overlap the range before them (which the queue merges into
 * one), from below, inside, touching either end, and spanning the last
 * two; then random rounds of hundreds of ranges, half of them overlapping
 * or touching the previous one, more than the queue holds (a full queue
 * is written back at once). A merge that loses or shrinks a range leaves
 * flushed and fenced lines out of the image. */
static void queue_rounds(struct paste_persist *p, bool exact, const char *what)
{
	static const uint32_t fixed[][4][2] = {
		{ { 5, 7 }, { 3, 6 } },                      /* overlapping from below */
		{ { 10, 14 }, { 11, 12 } },                  /* inside */
		{ { 20, 22 }, { 22, 24 }, { 18, 20 } },      /* touching above, then below */
		{ { 30, 31 }, { 40, 41 }, { 29, 42 } },      /* spanning the last two */
		{ { 50, 52 }, { 60, 62 }, { 51, 61 } },      /* over the gap */
		{ { 100, 180 }, { 70, 120 }, { 90, 200 } },  /* across blocks */
	};
	static uint32_t ranges[800][2];
	static uint8_t img[QLINES];
	uint64_t at = (uint64_t)(paste_store_buf(st, QBUF) - paste_store_base(st));
	for (uint32_t l = 0; l < QLINES; l++)        /* each line holds one byte throughout */
		CHECK_EQ(pread(image_fd, &img[l], 1, (off_t)(at + 64ull * l)), 1);
	uint32_t wrong = 0, round = 0;
	for (size_t f = 0; f < sizeof(fixed) / sizeof(fixed[0]); f++, round++) {
		uint32_t n = 0;
		while (n < 4 && fixed[f][n][1])
			n++;
		wrong += queue_round(p, img, (uint8_t)('a' + round), fixed[f], n, exact, round % 2);
	}
	uint64_t s = 0x5eed;
	for (uint32_t k = 0; k < 24; k++, round++) {
		uint32_t n = 100 + (uint32_t)(rnd(&s) % 700);
		for (uint32_t i = 0; i < n; i++) {
			uint32_t lo, len = 1 + (uint32_t)(rnd(&s) % (k % 3 ? 6 : 90));
			if (i && rnd(&s) % 2) {
				uint32_t plo = ranges[i - 1][0], phi = ranges[i - 1][1];
				uint32_t back = (uint32_t)(rnd(&s) % 4);
				lo = (plo > back ? plo - back : 0) + (uint32_t)(rnd(&s) % (phi - plo + 4));
			} else {
				lo = (uint32_t)(rnd(&s) % QLINES);
			}
			if (lo >= QLINES)
				lo = QLINES - 1;
			ranges[i][0] = lo;
			ranges[i][1] = lo + len < QLINES ? lo + len : QLINES;
		}
		wrong += queue_round(p, img, (uint8_t)('a' + round % 26), ranges, n, exact, round % 2);
	}
	if (wrong)
		fprintf(stderr, "  %s: %u lines of the image wrong after flushes and barriers\n", what, wrong);
	CHECK_EQ(wrong, 0);
}

/* Emulated PM (exactly the queued lines; no commits there: queue_round
 * fences every round) or fsync mode (the blocks written, or through the
 * page cache the flushed lines). */
static void test_writeback(enum paste_durability mode)
{
	struct paste_persist *p = NULL;
	struct paste_persist_config cfg = { .mode = mode };
	CHECK_EQ(paste_persist_open(&p, st, &cfg, NULL), 0);
	if (!p)
		return;
	queue_rounds(p, mode != PASTE_DUR_FSYNC, paste_persist_flush_insn(p));
	paste_persist_close(p);
}

/* A directory on a disk (direct writes), or "" when there is none. */
static char ddir[64];

/* fsync mode with direct writes: the image takes the blocks a commit
 * writes (sorted and merged), with the bytes written. In a child with a
 * store of its own on disk. */
static void direct_child(void)
{
	char dpath[96], dimage[96];
	struct paste_persist *first = NULL;
	struct paste_store_config cfg = { .size = 4u << 20, .log_lanes = 2 };
	snprintf(dpath, sizeof(dpath), "%s/d.store", ddir);
	snprintf(dimage, sizeof(dimage), "%s/d.image", ddir);
	setenv("PASTE_SHIM_IMAGE", dimage, 1);
	CHECK_EQ(paste_store_open(&st, dpath, &cfg, PASTE_STORE_CREATE, NULL), 0);
	if (!st)
		return;
	/* The image is written by the first open; PASTE_FSYNC_IO=direct makes
	 * an open that cannot write directly fail. */
	struct paste_persist_config pc = { .mode = PASTE_DUR_NONE };
	CHECK_EQ(paste_persist_open(&first, st, &pc, NULL), 0);
	image_fd = open(dimage, O_RDONLY);
	CHECK(image_fd >= 0);
	test_writeback(PASTE_DUR_FSYNC);
	close(image_fd);
	paste_persist_close(first);
	paste_store_close(st);
	unlink(dpath);
	unlink(dimage);
}

/* ---- the crash policies (PASTE_SHIM_CRASH) -------------------------------- */

#define NCRASH 32u
static char cpath[96], cimage[96], cmask[96];
static enum paste_durability crash_mode;
static const char *crash_fault;

/* The i-th line flushed before the barrier that fails: every other line of
 * buffer 1 (no two ranges touch: each is its own write-back), in an order
 * unlike their addresses'. */
static uint32_t crash_line(uint32_t i)
{
	return (i * 7) % NCRASH * 2 + 1;
}

/* In a child (a fresh shim: its own store and image): a barrier that
 * succeeds, then NCRASH lines flushed and a barrier that fails; which of
 * them reached the image goes to cmask as a bit mask in flush order. */
static void crash_child(void)
{
	struct paste_store *s = NULL;
	struct paste_persist *p = NULL;
	struct paste_store_config cfg = { .size = 4u << 20, .log_lanes = 2 };
	struct paste_persist_config pc = { .mode = crash_mode };
	unlink(cpath);
	unlink(cimage);
	setenv("PASTE_SHIM_IMAGE", cimage, 1);
	setenv("PASTE_FAULT", crash_fault, 1);
	if (!getenv("PASTE_TEST_VERBOSE"))
		dup2(open("/dev/null", O_WRONLY), 2);   /* "store failed", as meant */
	CHECK_EQ(paste_store_open(&s, cpath, &cfg, PASTE_STORE_CREATE, NULL), 0);
	if (!s)
		return;
	CHECK_EQ(paste_persist_open(&p, s, &pc, NULL), 0);
	if (!p) {
		paste_store_close(s);
		return;
	}
	uint8_t *base = paste_store_buf(s, 1);
	memset(base, 'z', 64);
	paste_persist_flush(p, base, 64);
	CHECK_EQ(paste_persist_fence(p), 0);
	for (uint32_t i = 0; i < NCRASH; i++) {
		memset(base + 64 * crash_line(i), 0x80 + (int)i, 64);
		paste_persist_flush(p, base + 64 * crash_line(i), 64);
	}
	if (!strncmp(crash_fault, "commit", 6)) {
		uint64_t t = 0;
		int fd = paste_persist_begin_commit(p, &t);
		CHECK(fd >= 0);
		CHECK(paste_persist_end_commit(p, t, fd >= 0 ? commit_wait(fd) : fd) < 0);
	} else {
		CHECK(paste_persist_fence(p) < 0);
	}
	int fd = open(cimage, O_RDONLY);
	uint64_t mask = 0, line_off = (uint64_t)(base - paste_store_base(s));
	uint8_t got[64], want[64];
	CHECK(pread(fd, got, 64, (off_t)line_off) == 64 && got[0] == 'z' && got[63] == 'z');
	for (uint32_t i = 0; i < NCRASH; i++) {
		memset(want, 0x80 + (int)i, 64);
		if (pread(fd, got, 64, (off_t)(line_off + 64 * crash_line(i))) == 64 && !memcmp(got, want, 64))
			mask |= 1ull << i;
	}
	close(fd);
	int out = open(cmask, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(out >= 0 && write(out, &mask, sizeof(mask)) == (ssize_t)sizeof(mask));
	close(out);
	paste_persist_close(p);
	paste_store_close(s);
}

/* The lines of a crash under policy, as a mask in flush order; all ones
 * above NCRASH when the child failed. */
static uint64_t crash_with(const char *policy, enum paste_durability mode, const char *fault)
{
	uint64_t mask = ~0ull;
	const char *in = mode == PASTE_DUR_FSYNC && *ddir ? ddir : dir;
	snprintf(cpath, sizeof(cpath), "%s/c.store", in);
	snprintf(cimage, sizeof(cimage), "%s/c.image", in);
	crash_mode = mode;
	crash_fault = fault;
	unlink(cmask);
	check_in_child(policy, "PASTE_SHIM_CRASH", policy, crash_child);
	unlink(cpath);
	unlink(cimage);
	int fd = open(cmask, O_RDONLY);
	if (fd < 0 || read(fd, &mask, sizeof(mask)) != (ssize_t)sizeof(mask))
		fprintf(stderr, "  crash under %s (%s): no result\n", policy, fault);
	if (fd >= 0)
		close(fd);
	return mask;
}

static bool is_suffix(uint64_t m)
{
	uint64_t all = (1ull << NCRASH) - 1;
	for (uint32_t k = 0; k < NCRASH; k++)
		if (m == (all >> k << k))
			return true;
	return false;
}

static void bad_policy_child(void)
{
	struct paste_store *s = NULL;
	struct paste_persist *p = NULL;
	struct paste_error err = { 0 };
	struct paste_store_config cfg = { .size = 4u << 20, .log_lanes = 2 };
	unlink(cpath);
	unlink(cimage);
	setenv("PASTE_SHIM_IMAGE", cimage, 1);
	CHECK_EQ(paste_store_open(&s, cpath, &cfg, PASTE_STORE_CREATE, NULL), 0);
	if (!s)
		return;
	CHECK_EQ(paste_persist_open(&p, s, NULL, &err), -EINVAL);
	CHECK(strstr(err.msg, "PASTE_SHIM_CRASH=") && strstr(err.msg, "random[:SEED]"));
	CHECK(access(cimage, F_OK) != 0);          /* no image either */
	paste_persist_close(p);
	paste_store_close(s);
}

static void test_crash_policies(void)
{
	const enum paste_durability em = PASTE_DUR_EMULATED, fs = PASTE_DUR_FSYNC;
	const uint64_t all = (1ull << NCRASH) - 1;
	CHECK_EQ(crash_with("none", em, "fence:2"), 0);
	CHECK_EQ(crash_with("", em, "fence:2"), 0);              /* the default */
	CHECK_EQ(crash_with("all", em, "fence:2"), all);
	CHECK_EQ(crash_with("last", em, "fence:2"), 1ull << (NCRASH - 1));
	/* reverse: the last k lines written back, k from the seed. */
	uint64_t first = crash_with("reverse", em, "fence:2"), other = first;
	CHECK(first && is_suffix(first));
	for (uint32_t seed = 2; seed < 6; seed++) {
		char pol[32];
		snprintf(pol, sizeof(pol), "reverse:%u", seed);
		uint64_t m = crash_with(pol, em, "fence:2");
		CHECK(m && is_suffix(m));
		other = m != first ? m : other;
	}
	CHECK(other != first);
	/* random: any subset, the same for the same seed. */
	uint64_t r7 = crash_with("random:7", em, "fence:2");
	CHECK(r7 != 0 && r7 != all && !is_suffix(r7));
	CHECK_EQ(crash_with("random:7", em, "fence:2"), r7);
	CHECK(crash_with("random:8", em, "fence:2") != r7);
	/* fsync: what the failed sync, or the failed commit, wrote. */
	CHECK_EQ(crash_with("none", fs, "fdatasync:2"), 0);
	CHECK_EQ(crash_with("all", fs, "fdatasync:2"), all);
	CHECK_EQ(crash_with("none", fs, "commit:1"), 0);
	CHECK_EQ(crash_with("all", fs, "commit:1"), all);
	uint64_t rf = crash_with("random:3", fs, "commit:1");
	CHECK(rf != ~0ull && rf != 0 && rf != all);
	const char *bad[] = { "sometimes", "none:1", "all:2", "last:3", "random:", "random:x",
			      "reverse:1x", "random:-1", "Random" };
	snprintf(cpath, sizeof(cpath), "%s/c.store", dir);
	snprintf(cimage, sizeof(cimage), "%s/c.image", dir);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_in_child(bad[i], "PASTE_SHIM_CRASH", bad[i], bad_policy_child);
	unlink(cpath);
	unlink(cimage);
	unlink(cmask);
}

static void test_fsync(void)
{
	struct paste_persist *p = NULL;
	struct paste_persist_config cfg = { .mode = PASTE_DUR_FSYNC };
	uint64_t t = 0;
	CHECK_EQ(paste_persist_open(&p, st, &cfg, NULL), 0);
	if (!p)
		return;
	/* Group commit: durable when the fdatasync completes, not before. */
	memset(line_at(3, 0), 'H', 64);
	paste_persist_flush(p, line_at(3, 0), 64);
	memset(line_at(3, 1), 'I', 64);                   /* dirty, never flushed */
	CHECK(paste_persist_begin_commit(p, &t) >= 0);
	CHECK(!image_has(line_at(3, 0), 'H'));
	paste_persist_end_commit(p, t, 0);
	CHECK(image_has(line_at(3, 0), 'H'));
	CHECK(image_has(line_at(3, 1), 0));

	/* Synchronous fence. */
	memset(line_at(3, 3), 'K', 64);
	paste_persist_flush(p, line_at(3, 3), 64);
	CHECK(!image_has(line_at(3, 3), 'K'));
	CHECK_EQ(paste_persist_fence(p), 0);
	CHECK(image_has(line_at(3, 3), 'K'));

	/* A fence while a commit is in flight covers both, newest bytes last;
	 * the commit's later completion must not bring old bytes back. */
	memset(line_at(4, 0), 'L', 64);
	paste_persist_flush(p, line_at(4, 0), 64);
	CHECK(paste_persist_begin_commit(p, &t) >= 0);
	memset(line_at(4, 0), 'M', 64);
	paste_persist_flush(p, line_at(4, 0), 64);
	CHECK_EQ(paste_persist_fence(p), 0);
	CHECK(image_has(line_at(4, 0), 'M'));
	paste_persist_end_commit(p, t, 0);
	CHECK(image_has(line_at(4, 0), 'M'));

	/* A failed fdatasync makes nothing durable, and nothing after it
	 * either: the store is failed (last: it stays so). */
	memset(line_at(3, 2), 'J', 64);
	paste_persist_flush(p, line_at(3, 2), 64);
	CHECK(paste_persist_begin_commit(p, &t) >= 0);
	CHECK_EQ(paste_persist_end_commit(p, t, -EIO), -EIO);
	CHECK(image_has(line_at(3, 2), 0));
	memset(line_at(4, 1), 'N', 64);
	paste_persist_flush(p, line_at(4, 1), 64);
	CHECK_EQ(paste_persist_fence(p), -EIO);
	CHECK(image_has(line_at(4, 1), 0));
	paste_persist_close(p);
}

static void test_one_store_per_process(void)
{
	char other[128];
	struct paste_store *st2 = NULL;
	struct paste_persist *p = NULL;
	struct paste_error err = {0};
	struct paste_store_config cfg = { .size = 4u << 20, .log_lanes = 2 };
	snprintf(other, sizeof(other), "%s/other.store", dir);
	CHECK_EQ(paste_store_open(&st2, other, &cfg, PASTE_STORE_CREATE, NULL), 0);
	if (!st2)
		return;
	CHECK_EQ(paste_persist_open(&p, st2, NULL, &err), -EINVAL);
	CHECK(strstr(err.msg, "already mirrors another store") != NULL);
	paste_store_close(st2);
	unlink(other);
}

int main(void)
{
	struct paste_store_config cfg = { .size = 4u << 20, .log_lanes = 2 };
	struct paste_persist *first = NULL;
	strcpy(dir, "/dev/shm/paste-test-shim-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/t.store", dir);
	snprintf(image, sizeof(image), "%s/t.image", dir);
	snprintf(cmask, sizeof(cmask), "%s/c.mask", dir);
	const char *disk = disk_dir();
	snprintf(ddir, sizeof(ddir), "%s/paste-test-shim-XXXXXX", disk ? disk : "");
	if (!disk || !mkdtemp(ddir)) {
		printf("skip: direct writes (no disk-backed /var/tmp or /tmp)\n");
		ddir[0] = 0;
	}
	/* First: each child needs a shim not yet attached to a store. */
	test_crash_policies();
	if (*ddir) {
		check_in_child("direct writes", "PASTE_FSYNC_IO", "direct", direct_child);
		rmdir(ddir);
	}
	CHECK_EQ(paste_store_open(&st, path, &cfg, PASTE_STORE_CREATE, NULL), 0);
	if (st) {
		memset(line_at(0, 0), 'i', 64);
		setenv("PASTE_SHIM_IMAGE", image, 1);
		CHECK_EQ(paste_persist_open(&first, st, NULL, NULL), 0);
		image_fd = open(image, O_RDONLY);
		CHECK(image_fd >= 0);
		if (image_fd >= 0) {
			test_image_starts_as_copy();
			test_emulated();
			test_writeback(PASTE_DUR_EMULATED);
			test_writeback(PASTE_DUR_FSYNC);
			test_fsync();
			test_one_store_per_process();
			close(image_fd);
		}
		paste_persist_close(first);
		paste_store_close(st);
	}
	unlink(path);
	unlink(image);
	rmdir(dir);
	return check_done();
}
