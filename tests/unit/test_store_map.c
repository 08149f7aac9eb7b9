/* test_store_map.c - packet store mapping: buffer, lane, node and
 * checkpoint addresses and their bounds, read-only mappings and the lock
 * that keeps a second writer out, paste_store_in_use, and the re-read from
 * the disk at open. */
#include <sys/ioctl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include "store_fixture.h"

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

/* A field of /proc/self/io: "read_bytes" (storage reads) or "write_bytes"
 * (bytes this process dirtied in the page cache, counted per folio). */
static uint64_t proc_io(const char *field)
{
	FILE *f = fopen("/proc/self/io", "r");
	char line[128], fmt[64];
	unsigned long long v = 0;
	snprintf(fmt, sizeof(fmt), "%s: %%llu", field);
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, fmt, &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

static uint64_t read_bytes(void)
{
	return proc_io("read_bytes");
}

/* A store of size bytes created (and closed) in a fresh directory under
 * /var/tmp, a disk: the cases below are about disk-backed stores. */
struct disk_store {
	char dir[64], path[96];
};

static bool disk_store_create(struct disk_store *ds, uint32_t size)
{
	snprintf(ds->dir, sizeof(ds->dir), "/var/tmp/paste-test-store-XXXXXX");
	if (!mkdtemp(ds->dir)) {
		CHECK(0);
		return false;
	}
	snprintf(ds->path, sizeof(ds->path), "%s/t.store", ds->dir);
	struct paste_store *st = NULL;
	struct paste_store_config c = { .size = size };
	struct paste_error err = {0};
	CHECK_EQ(paste_store_open(&st, ds->path, &c, PASTE_STORE_CREATE, &err), 0);
	paste_store_close(st);
	return st != NULL;
}

static void disk_store_remove(struct disk_store *ds)
{
	unlink(ds->path);
	rmdir(ds->dir);
}

/* After an I/O error the page cache may hold pages the disk never got:
 * a writable open of a disk-backed store drops the cached pages, so
 * recovery reads (MAP_POPULATE) what the disk really holds. Seen as
 * storage reads in /proc/self/io: without the drop, the open is served
 * from the cache and reads ~nothing. */
static void test_open_rereads_disk(void)
{
	struct disk_store ds;
	if (!disk_store_create(&ds, 16u << 20))
		return;
	struct paste_store *st = NULL;
	struct paste_error err = {0};
	CHECK_EQ(paste_store_open(&st, ds.path, NULL, PASTE_STORE_RDONLY, &err), 0);
	if (!st)
		return;
	uint64_t from = paste_store_geom(st)->buf_offset, to = paste_store_geom(st)->file_size;
	paste_store_close(st);
	/* Contents of its own, synced, then all in the cache. */
	char buf[1 << 16];
	memset(buf, 'x', sizeof(buf));
	int fd = open(ds.path, O_RDWR);
	for (uint64_t off = from; fd >= 0 && off < to; off += sizeof(buf))
		CHECK(pwrite(fd, buf, sizeof(buf), (off_t)off) == (ssize_t)sizeof(buf));
	CHECK_EQ(fsync(fd), 0);
	lseek(fd, 0, SEEK_SET);
	while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
	uint64_t before = read_bytes();
	CHECK_EQ(paste_store_open(&st, ds.path, NULL, 0, &err), 0);
	uint64_t reread = read_bytes() - before;
	CHECK(reread >= (12u << 20));
	if (reread < (12u << 20))
		fprintf(stderr, "  open read %llu bytes from the disk\n", (unsigned long long)reread);
	paste_store_close(st);
	disk_store_remove(&ds);
}

/* A byte stored through the mapping of a disk-backed store dirties one
 * small page, not a large folio (up to 2 MiB on ext4 since Linux 6.16)
 * that the next fdatasync would write whole. /proc/self/io's write_bytes
 * counts what a store dirtied, a folio at a time: 16 bytes in buffers
 * 1 MiB apart must cost at most 16 x 8 KiB (measured without the
 * small-folio read at open: 16-32 MiB). */
static void test_store_dirties_small_pages(void)
{
	struct disk_store ds;
	if (!disk_store_create(&ds, 32u << 20))
		return;
	struct paste_store *st = NULL;
	struct paste_error err = {0};
	CHECK_EQ(paste_store_open(&st, ds.path, NULL, 0, &err), 0);
	if (!st)
		return;
	const struct paste_store_geom *g = paste_store_geom(st);
	uint32_t step = (1u << 20) / g->buf_size, touched = 0;
	uint64_t before = proc_io("write_bytes");
	for (uint32_t b = 0; b < g->nbufs && touched < 16; b += step, touched++)
		paste_store_buf(st, b)[100] = 'x';
	uint64_t dirtied = proc_io("write_bytes") - before;
	CHECK(touched == 16);
	CHECK(dirtied <= 16u * 8192u);
	if (dirtied > 16u * 8192u)
		fprintf(stderr, "  16 stored bytes dirtied %llu bytes of page cache\n",
			(unsigned long long)dirtied);
	paste_store_close(st);
	disk_store_remove(&ds);
}

/* A store created on a disk has its blocks written (zeros), not just
 * allocated: an unwritten extent costs a journal commit at the first
 * group commit that writes into it. FIEMAP tells unwritten extents. */
static void test_disk_store_zero_filled(void)
{
	struct disk_store ds;
	if (!disk_store_create(&ds, 8u << 20))
		return;
	int fd = open(ds.path, O_RDONLY);
	struct fiemap *fm = calloc(1, sizeof(*fm) + 64 * sizeof(struct fiemap_extent));
	if (fm) {
		fm->fm_length = FIEMAP_MAX_OFFSET;
		fm->fm_flags = FIEMAP_FLAG_SYNC;
		fm->fm_extent_count = 64;
	}
	if (fd >= 0 && fm && ioctl(fd, FS_IOC_FIEMAP, fm) == 0) {
		uint64_t unwritten = 0, mapped = 0;
		for (uint32_t i = 0; i < fm->fm_mapped_extents; i++) {
			mapped += fm->fm_extents[i].fe_length;
			if (fm->fm_extents[i].fe_flags & FIEMAP_EXTENT_UNWRITTEN)
				unwritten += fm->fm_extents[i].fe_length;
		}
		CHECK(mapped >= (8u << 20) - 4096);
		CHECK_EQ(unwritten, 0);
	} else {
		fprintf(stderr, "  FIEMAP not supported here: not checked\n");
	}
	free(fm);
	if (fd >= 0)
		close(fd);
	disk_store_remove(&ds);
}

int main(void)
{
	if (sf_begin())
		return 1;
	test_bounds();
	test_rdonly_and_lock();
	test_in_use();
	test_open_rereads_disk();
	test_store_dirties_small_pages();
	test_disk_store_zero_filled();
	return sf_end();
}
