/* store_fixture.h - what the packet store's unit tests (test_store*.c)
 * share: a directory of the test's own on /dev/shm with one store path in
 * it, the small store most tests create there, superblock byte offsets,
 * helpers that read and poke the file behind the store's back, and the
 * check that a refused open named the path and changed nothing.
 * Header-only: each test program includes it once. */
#ifndef PASTE_STORE_FIXTURE_H
#define PASTE_STORE_FIXTURE_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "paste.h"

#define MIB (1ull << 20)

/* Superblock byte offsets (layout version 2, see lib/store_format.c). */
#define SB_VERSION 8
#define SB_HDRSIZE 12
#define SB_NBUFS   20
#define SB_UUID    68
#define SB_CRC     108
#define SB_V1_CRC  92   /* version 1: 92 bytes, then the CRC */

static char dir[64];
static char path[128];

static const struct paste_store_config small = { .size = 4 * MIB, .buf_size = 2048, .log_lanes = 2 };

static inline uint8_t *read_file(const char *p, size_t *len)
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

static inline bool file_equals(const char *p, const uint8_t *want, size_t len)
{
	size_t n = 0;
	uint8_t *got = read_file(p, &n);
	bool eq = got && n == len && memcmp(got, want, len) == 0;
	free(got);
	return eq;
}

static inline void poke(const char *p, off_t off, const void *b, size_t n)
{
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	if (pwrite(fd, b, n, off) != (ssize_t)n)
		perror("poke");
	close(fd);
}

/* Invert the byte at off: a change whatever it held (writing a fixed
 * byte left a random uuid byte that already held it unchanged, 1 run in
 * 256). */
static inline void flip(const char *p, off_t off)
{
	uint8_t b = 0;
	int fd = open(p, O_RDWR);
	if (pread(fd, &b, 1, off) != 1)
		perror("flip");
	b = (uint8_t)~b;
	if (pwrite(fd, &b, 1, off) != 1)
		perror("flip");
	close(fd);
}

static inline struct paste_store *create_small_with(int flags)
{
	struct paste_store *st = NULL;
	struct paste_error err = {0};
	unlink(path);
	int r = paste_store_open(&st, path, &small, PASTE_STORE_CREATE | PASTE_STORE_EXCL | flags, &err);
	CHECK_EQ(r, 0);
	if (r)
		fprintf(stderr, "create: %s\n", err.msg);
	return st;
}

static inline struct paste_store *create_small(void)
{
	return create_small_with(0);
}

/* Open must fail with code and text, name the path, and change nothing. */
static inline void expect_open_error(const struct paste_store_config *cfg, int code, const char *text)
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

/* The test's own directory; path names the store in it. */
static inline int sf_begin(void)
{
	strcpy(dir, "/dev/shm/paste-test-store-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return -1;
	}
	snprintf(path, sizeof(path), "%s/t.store", dir);
	return 0;
}

/* Removes the store and the directory; the exit status. */
static inline int sf_end(void)
{
	unlink(path);
	rmdir(dir);
	return check_done();
}

#endif
