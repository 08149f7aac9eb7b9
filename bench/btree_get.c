/*
 * btree_get.c - what one paste_btree_get costs, apart from any server: a
 * tree of KEYS keys shaped like redis-benchmark's ("key:000000001234"),
 * each with a 64-byte value, is built in a new store, then LOOKUPS
 * lookups of random present keys are timed one after another. The tree
 * stays in the cache as far as it fits (2 MiB of L2 holds ~50 000 keys),
 * so this is the search's own cost: compares, mispredicted branches and
 * the chain of dependent loads in each page. In a server, values streaming
 * through the cache make it dearer.
 * pkvs's profile puts a pipelined GET's descent at ~0.17 us; this is the
 * yardstick for making it cheaper (docs/results.md, "The tree search").
 *
 *   btree-get STORE [KEYS [LOOKUPS]]   STORE: a file that must not exist
 *                                      (created, removed at the end);
 *                                      KEYS 10000, LOOKUPS 2000000.
 * Prints one JSON line. Exits 1 if a lookup missed its key or gave the
 * wrong value: the numbers are of correct lookups only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <paste.h>

#define KLEN 16
#define POOL 4096u                 /* value buffers: ~KEYS/4096 references each */
#define RING 4096u                 /* pre-made lookup keys, so no formatting is timed */

static uint64_t seed = 0x243f6a8885a308d3ull;
static uint64_t rnd(void)
{
	seed ^= seed >> 12;
	seed ^= seed << 25;
	seed ^= seed >> 27;
	return seed * 2685821657736338717ull;
}

static void key_of(char *k, uint64_t i)
{
	char tmp[32];   /* i < 10^8: 12 digits */
	snprintf(tmp, sizeof(tmp), "key:%012" PRIu64, i);
	memcpy(k, tmp, KLEN);
}

/* Key id's value: 64 bytes somewhere in one of the pool's buffers, so a
 * lookup can be checked against what was set. */
static struct paste_extent value_of(const uint32_t *pool, uint64_t id)
{
	return (struct paste_extent){ pool[id % POOL], (uint32_t)(id % 16) * 64, 64 };
}

static uint64_t parse_count(const char *s, const char *what)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v == 0 || v > 100000000ull) {
		fprintf(stderr, "btree-get: %s must be 1..100000000, not '%s'\n", what, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: btree-get STORE [KEYS [LOOKUPS]]\n");
		return 2;
	}
	const char *path = argv[1];
	uint64_t nkeys = argc > 2 ? parse_count(argv[2], "KEYS") : 10000;
	uint64_t lookups = argc > 3 ? parse_count(argv[3], "LOOKUPS") : 2000000;
	/* ~100 B of node area per key, twice for checkpoints' copies */
	struct paste_store_config sc = { .size = ((256u << 20) + nkeys * 256 + 4095) & ~4095ull,
					 .buf_size = 2048,
					 .node_size = (nkeys * 200 + (8u << 20) + 4095) & ~4095ull };
	struct paste_persist_config pc = { .mode = PASTE_DUR_NONE };
	struct paste_btree_config tc = { 0 };
	struct paste_store *st = NULL;
	struct paste_persist *p = NULL;
	struct paste_wal *w = NULL;
	struct paste_btree *t = NULL;
	struct paste_error err;
	if (paste_store_open(&st, path, &sc, PASTE_STORE_CREATE | PASTE_STORE_EXCL, &err) < 0) {
		fprintf(stderr, "btree-get: %s\n", err.msg);
		return 1;
	}
	int rc = 1;
	if (paste_persist_open(&p, st, &pc, &err) < 0 || paste_wal_open(&w, st, p, &err) < 0 ||
	    paste_btree_open(&t, st, w, p, &tc, &err) < 0) {
		fprintf(stderr, "btree-get: %s\n", err.msg);
		goto out;
	}
	paste_store_start(st);
	uint32_t pool[POOL];
	if (paste_store_alloc(st, pool, POOL) != POOL) {
		fprintf(stderr, "btree-get: the store has no %u free buffers\n", POOL);
		goto out;
	}
	/* Insert in a scrambled order, as a loaded server's tree is built:
	 * i -> i * P mod KEYS is a permutation for a prime P not dividing KEYS. */
	uint64_t P = nkeys % 1000003 ? 1000003 : 999983;
	char k[KLEN];
	for (uint64_t i = 0; i < nkeys; i++) {
		uint64_t id = i * P % nkeys;
		struct paste_extent v = value_of(pool, id);
		key_of(k, id);
		int r = paste_btree_set(t, k, KLEN, &v, 1, NULL);
		if (r == 0 && i % 4096 == 0 && (r = paste_btree_maintain(t)) > 0)
			r = 0;
		if (r < 0) {
			fprintf(stderr, "btree-get: set %" PRIu64 ": %s\n", i, strerror(-r));
			goto out;
		}
	}
	int c = paste_btree_checkpoint(t);
	if (c < 0) {
		fprintf(stderr, "btree-get: checkpoint: %s\n", strerror(-c));
		goto out;
	}
	static char ring[RING][KLEN];
	static uint64_t ids[RING];
	for (uint32_t i = 0; i < RING; i++) {
		ids[i] = rnd() % nkeys;
		key_of(ring[i], ids[i]);
	}
	uint64_t wrong = 0;
	uint64_t t0 = paste_clock_ns();
	for (uint64_t i = 0; i < lookups; i++) {
		uint32_t r = (uint32_t)(i % RING);
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		uint32_t n, len;
		struct paste_extent want = value_of(pool, ids[r]);
		int g = paste_btree_get(t, ring[r], KLEN, ext, &n, &len);
		wrong += g != 0 || n != 1 || len != want.len || ext[0].buf != want.buf ||
			 ext[0].off != want.off;
	}
	double ns = (double)(paste_clock_ns() - t0) / (double)lookups;
	struct paste_btree_info in;
	paste_btree_info(t, &in);
	printf("{\"keys\": %" PRIu64 ", \"lookups\": %" PRIu64 ", \"height\": %u, \"pages\": %u, "
	       "\"ns_per_get\": %.1f, \"wrong\": %" PRIu64 "}\n",
	       nkeys, lookups, in.height, in.pages_used, ns, wrong);
	if (wrong)
		fprintf(stderr, "btree-get: %" PRIu64 " lookups missed or gave the wrong value\n", wrong);
	rc = wrong ? 1 : 0;
out:
	paste_btree_close(t);
	paste_wal_close(w);
	paste_persist_close(p);
	paste_store_close(st);
	unlink(path);
	return rc;
}
