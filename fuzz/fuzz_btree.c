/* fuzz_btree.c - libFuzzer target for B+tree recovery over a damaged node
 * area, and for the tree's operations against a model.
 *
 * Once per process a small store (512-byte buffers, one 16 KiB lane, a
 * node area of 12 pages) is built in /dev/shm with the real writer: a tree
 * of height 2 with long and short keys, two checkpoints (both meta slots
 * used), and a log tail after the last one. Each input then:
 *
 *   byte 0, bit 0  0: patches - the rest is (u16 position, u8 length,
 *                     bytes) edits of the node area (positions wrap);
 *                  1: operations - the rest drives set/del/clear/get,
 *                     checkpoints and reopens of a fresh store, checked
 *                     against a model (every key's presence and value)
 *           bit 1  reseal: after the patches, recompute the CRC of every
 *                  page that carries the page magic and of every meta slot
 *                  that carries the meta magic, so the damage reaches the
 *                  checks behind the CRCs (bad slots, entries, orders,
 *                  levels, generations, bounds, counts, cycles)
 *           bit 2  open writable (replay writes pages, open truncates the
 *                  log), then set/del a few keys and checkpoint; else
 *                  read-only (the replay goes to a private mapping)
 *
 * Every open must either fail with an error or give a tree that passes
 * paste_btree_check, whose cursor walk agrees with its count, and that
 * takes further changes and passes the check again; after a reseal, a
 * value that fails its CRC32C may be the check's one finding. A failed
 * invariant aborts. This mirrors the formats described at the top of lib/btree.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "paste.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PAGE 4096u
static char path[64];
static struct paste_store_geom geom;
static uint8_t *baseline;

__attribute__((noreturn)) static void fail(const char *why, const char *detail)
{
	fprintf(stderr, "fuzz_btree: %s%s%s\n", why, detail ? ": " : "", detail ? detail : "");
	abort();
}

static void remove_store(void)
{
	unlink(path);
}

struct env {
	struct paste_store *st;
	struct paste_persist *p;
	struct paste_wal *w;
	struct paste_btree *t;
	struct paste_error err;
};

static const struct paste_store_config scfg = {
	.size = 256u * 1024, .buf_size = 512, .log_lanes = 1, .log_size = 16u * 1024,
	.node_size = 16u * PAGE,     /* a change may need 3 x (height + 1) + 2 free pages */
};

/* Open store, log and tree (writable with a NONE persist object, or
 * read-only); 0, or the tree's error with everything else closed. */
static int env_open(struct env *e, bool writable)
{
	struct paste_persist_config pc = { .mode = PASTE_DUR_NONE };
	memset(e, 0, sizeof(*e));
	if (paste_store_open(&e->st, path, &scfg, writable ? PASTE_STORE_CREATE : PASTE_STORE_RDONLY,
			     &e->err) < 0)
		fail("cannot open the store", e->err.msg);
	if (writable && paste_persist_open(&e->p, e->st, &pc, &e->err) < 0)
		fail("cannot open persistence", e->err.msg);
	if (paste_wal_open(&e->w, e->st, e->p, &e->err) < 0)
		fail("cannot open the log", e->err.msg);
	int rc = paste_btree_open(&e->t, e->st, e->w, e->p, NULL, &e->err);
	if (rc == 0)
		paste_store_start(e->st);
	return rc;
}

static void env_close(struct env *e)
{
	paste_btree_close(e->t);
	paste_wal_close(e->w);
	paste_persist_close(e->p);
	paste_store_close(e->st);
}

static void key_of(uint8_t *k, uint32_t *len, uint32_t i)
{
	*len = i % 5 == 0 ? 150 + i % 300 : 3 + i % 20;
	for (uint32_t j = 0; j < *len; j++)
		k[j] = (uint8_t)(j < 2 ? (j ? i : i >> 8) : 'a' + (i + j) % 26);
}

static void setup(void)
{
	snprintf(path, sizeof(path), "/dev/shm/paste-fuzz-btree-%d.store", (int)getpid());
	unlink(path);
	atexit(remove_store);
	struct env e;
	if (env_open(&e, true) < 0)
		fail("cannot open the tree", e.err.msg);
	geom = *paste_store_geom(e.st);
	uint32_t b;
	if (paste_store_alloc(e.st, &b, 1) != 1)
		fail("no buffer", NULL);
	memset(paste_store_buf(e.st, b), 'v', 512);
	uint8_t k[512];
	uint32_t klen;
	for (uint32_t i = 0; i < 60; i++) {
		struct paste_extent v = { b, i, 1 + i };
		key_of(k, &klen, i);
		int rc = paste_btree_set(e.t, k, klen, &v, 1, NULL);
		if (rc < 0)
			fail("baseline set", strerror(-rc));
		if ((i == 20 || i == 40) && paste_btree_checkpoint(e.t) < 0)
			fail("baseline checkpoint", NULL);
	}
	for (uint32_t i = 0; i < 60; i += 9) {
		key_of(k, &klen, i);
		paste_btree_del(e.t, k, klen, NULL);
	}
	paste_store_unref(e.st, b, false);
	env_close(&e);
	baseline = malloc(geom.file_size);
	int fd = open(path, O_RDONLY);
	if (!baseline || fd < 0 || pread(fd, baseline, geom.file_size, 0) != (ssize_t)geom.file_size)
		fail("cannot read the baseline", NULL);
	close(fd);
}

static void write_file(const uint8_t *img)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0 || pwrite(fd, img, geom.file_size, 0) != (ssize_t)geom.file_size)
		fail("cannot write the store", NULL);
	close(fd);
}

static void reseal(uint8_t *img)
{
	uint8_t *nodes = img + geom.node_offset;
	uint32_t npages = (uint32_t)(geom.node_size / PAGE);
	for (uint32_t s = 0; s < 2; s++) {
		uint8_t *m = nodes + (size_t)s * PAGE;
		uint32_t magic, crc;
		memcpy(&magic, m, 4);
		if (magic != 0x4d544250u)   /* "PBTM" */
			continue;
		crc = paste_crc32c(0, m + 8, 120);
		memcpy(m + 4, &crc, 4);
	}
	for (uint32_t no = 2; no < npages; no++) {
		uint8_t *pg = nodes + (size_t)no * PAGE;
		uint16_t magic;
		memcpy(&magic, pg + 4, 2);
		if (magic != 0x5442u)   /* "BT" */
			continue;
		uint32_t crc = paste_crc32c(0, pg + 4, PAGE - 4);
		memcpy(pg, &crc, 4);
	}
}

/* paste_btree_check's verdict on a tree that opened. A resealed patch
 * can change an entry's extent or value CRC and forge its page's CRC:
 * no open finds that short of reading every value, so the check must,
 * as its one problem (the first message names the key). */
static void checked(struct env *e, bool forged, const char *what)
{
	struct paste_error err = { 0 };
	int bad = paste_btree_check(e->t, &err);
	if (bad != 0 && !(forged && bad == 1 && !strncmp(err.msg, "the value of key ", 17)))
		fail(what, err.msg);
}

/* The invariants of an open tree; then (writable) more changes. */
static void exercise(struct env *e, bool writable, bool forged)
{
	checked(e, forged, "a tree that opened fails its check");
	struct paste_btree_cursor c;
	const uint8_t *key;
	uint8_t prev[512];
	uint32_t klen, plen = 0, n, len;
	uint64_t count = 0;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	paste_btree_cursor_init(&c, e->t, NULL, 0);
	while (paste_btree_cursor_next(&c, &key, &klen, ext, &n, &len) == 1) {
		if (count && paste_btree_keycmp(prev, plen, key, klen) >= 0)
			fail("cursor out of order", NULL);
		uint64_t sum = 0;
		for (uint32_t i = 0; i < n; i++) {
			if (ext[i].buf >= geom.nbufs || ext[i].off > geom.buf_size ||
			    ext[i].len > geom.buf_size - ext[i].off)
				fail("an extent outside the buffer area", NULL);
			sum += ext[i].len;
		}
		if (sum != len)
			fail("extents do not add up", NULL);
		memcpy(prev, key, klen);
		plen = klen;
		count++;
	}
	if (count != paste_btree_count(e->t))
		fail("cursor and count disagree", NULL);
	if (!writable)
		return;
	uint32_t b;
	if (paste_store_alloc(e->st, &b, 1) != 1)
		return;
	uint8_t k[512];
	for (uint32_t i = 0; i < 30; i++) {
		struct paste_extent v = { b, i, 7 };
		key_of(k, &klen, i * 7);
		int rc = i % 3 ? paste_btree_set(e->t, k, klen, &v, 1, NULL) : paste_btree_del(e->t, k, klen, NULL);
		if (rc < 0 && rc != -ENOENT && rc != -ENOSPC)
			fail("a change to a recovered tree failed", strerror(-rc));
	}
	paste_store_unref(e->st, b, false);
	int rc = paste_btree_checkpoint(e->t);
	if (rc < 0)
		fail("checkpoint of a recovered tree", strerror(-rc));
	checked(e, forged, "the recovered tree fails its check after changes");
}

/* ---- operations against a model ---------------------------------------- */

#define MKEYS 64u
struct mval {
	bool present;
	struct paste_extent v;
};

static void ops(const uint8_t *d, size_t n)
{
	static struct mval model[MKEYS];
	memset(model, 0, sizeof(model));
	uint8_t *img = calloc(1, geom.file_size);
	if (!img)
		fail("out of memory", NULL);
	memcpy(img, baseline, geom.node_offset);   /* superblock; a zeroed log and node area */
	memset(img + geom.ckpt_offset, 0, geom.node_offset - geom.ckpt_offset);
	write_file(img);
	free(img);
	struct env e;
	if (env_open(&e, true) < 0)
		fail("cannot open a fresh tree", e.err.msg);
	uint32_t b;
	if (paste_store_alloc(e.st, &b, 1) != 1)
		fail("no buffer", NULL);
	uint8_t k[512];
	uint32_t klen;
	for (size_t i = 0; i + 1 < n; i += 2) {
		uint32_t key = (d[i + 1] + (d[i] / 64u) * 17u) % MKEYS, op = d[i] % 16;
		key_of(k, &klen, key);   /* every fifth a long key */
		struct paste_extent v = { b, d[i], d[i + 1] };
		int rc = 0;
		if (op < 8) {
			rc = paste_btree_set(e.t, k, klen, &v, 1, NULL);
			if (rc == 0)
				model[key] = (struct mval){ true, v };
		} else if (op < 12) {
			rc = paste_btree_del(e.t, k, klen, NULL);
			if (rc != (model[key].present ? 0 : -ENOENT))
				fail("del disagrees with the model", NULL);
			model[key].present = false;
			rc = 0;
		} else if (op == 12) {
			rc = paste_btree_checkpoint(e.t);
		} else if (op == 13 && d[i + 1] < 8) {
			rc = paste_btree_clear(e.t, NULL);
			memset(model, 0, sizeof(model));
		} else if (op == 14) {
			paste_store_unref(e.st, b, false);
			env_close(&e);   /* no checkpoint: the log is replayed */
			if (env_open(&e, true) < 0)
				fail("reopen", e.err.msg);
			if (paste_store_alloc(e.st, &b, 1) != 1)
				fail("no buffer", NULL);
		} else {
			paste_btree_maintain(e.t);
		}
		if (rc < 0 && rc != -ENOSPC)
			fail("an operation failed", strerror(-rc));
	}
	uint64_t live = 0;
	for (uint32_t i = 0; i < MKEYS; i++) {
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		uint32_t cnt, len;
		key_of(k, &klen, i);
		int rc = paste_btree_get(e.t, k, klen, ext, &cnt, &len);
		if (model[i].present != (rc == 0) ||
		    (rc == 0 && (cnt != 1 || memcmp(ext, &model[i].v, sizeof(ext[0])) != 0)))
			fail("the tree disagrees with the model", NULL);
		live += model[i].present;
	}
	if (live != paste_btree_count(e.t))
		fail("count disagrees with the model", NULL);
	paste_store_unref(e.st, b, false);
	exercise(&e, false, false);
	env_close(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!baseline)
		setup();
	if (size < 1)
		return 0;
	uint8_t mode = data[0];
	if (mode & 1) {
		ops(data + 1, size - 1);
		return 0;
	}
	uint8_t *img = malloc(geom.file_size);
	if (!img)
		fail("out of memory", NULL);
	memcpy(img, baseline, geom.file_size);
	uint8_t *nodes = img + geom.node_offset;
	for (size_t i = 1; i + 3 <= size;) {
		uint32_t pos = (uint32_t)(data[i] | data[i + 1] << 8) % (uint32_t)geom.node_size;
		uint32_t len = data[i + 2];
		i += 3;
		for (uint32_t j = 0; j < len && i < size; j++, i++)
			nodes[(pos + j) % geom.node_size] = data[i];
	}
	if (mode & 2)
		reseal(img);
	write_file(img);
	free(img);
	bool writable = mode & 4;
	struct env e;
	if (env_open(&e, writable) == 0)
		exercise(&e, writable, mode & 2);
	env_close(&e);
	return 0;
}
