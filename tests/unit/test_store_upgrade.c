/* test_store_upgrade.c - packet store layout version 1 -> 2: a version-1
 * store is refused with a message naming the upgrade, the upgrade keeps
 * every record and buffer, and what is not a sound version-1 store (or is
 * in use) is left alone. */
#include <sys/file.h>
#include "store_fixture.h"

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
	expect_open_error(NULL, -EPROTO, "layout version 1, this build reads 3");
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
	CHECK_EQ(g->version, PASTE_STORE_VERSION);
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
	flip(path, SB_UUID);
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
	if (sf_begin())
		return 1;
	test_upgrade_v1();
	return sf_end();
}
