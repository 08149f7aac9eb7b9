/* test_persist_shim.c - the crash image (libpaste_shim) holds exactly the
 * lines that were flushed and then fenced or committed, with the bytes they
 * had at flush time. */
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
	memset(line_at(1, 1), 'b', 64);                   /* after the flush: not in it */
	CHECK(!image_has(line_at(1, 0), 'A'));            /* flushed, not fenced */
	CHECK_EQ(paste_persist_fence(p), 0);
	CHECK(image_has(line_at(1, 0), 'A'));
	CHECK(image_has(line_at(1, 1), 'B'));

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
