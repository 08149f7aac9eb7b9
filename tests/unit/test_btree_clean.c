/* test_btree_clean.c - the tree's space accounting and its cleaner
 * (lib/btree_clean.c): live bytes per buffer stay exact through sets,
 * overwrites, deletes, clears and reopens; small long-lived values
 * scattered among overwritten ones are moved into few buffers and the
 * sparse ones come back; the moved values keep their bytes, tag and word
 * across a reopen; a damaged value is reported and left in place;
 * paste_btree_make_room frees what a write needs. */
#include "btree_fixture.h"

static struct tenv E;

#define VAL 100u            /* bytes per value */
#define PER_BUF 16u         /* values packed into one 2 KiB buffer */

/* free_pct 100: the cleaner runs whatever the store's free space (the
 * tests' stores are mostly free); buffers under half live are victims. */
static void setup(const char *name, bool clean)
{
	memset(&E, 0, sizeof(E));
	E.scfg = (struct paste_store_config){ .size = 8u << 20, .buf_size = 2048, .log_lanes = 2,
					      .node_size = 1u << 20 };
	E.mode = PASTE_DUR_EMULATED;
	E.tcfg.clean_free_pct = 100;
	E.tcfg.clean_live_pct = 50;
	E.tcfg.no_clean = !clean;
	tenv_start(&E, name);
}

static uint8_t pattern(uint32_t key, uint32_t version, uint32_t i)
{
	return (uint8_t)(key * 7u + version * 13u + i);
}

static void key_of(char *k, uint32_t key)
{
	snprintf(k, 16, "k%06u", key);
}

/* Write n values (keys first.., version v) packed PER_BUF to a buffer:
 * the way pkvs packs small values. */
static void put_packed(uint32_t first, uint32_t n, uint32_t v)
{
	uint32_t buf = PASTE_NO_BUF;
	for (uint32_t i = 0; i < n; i++) {
		if (i % PER_BUF == 0) {
			if (buf != PASTE_NO_BUF)
				paste_store_unref(E.st, buf, false);
			CHECK_EQ(paste_store_alloc(E.st, &buf, 1), 1);
		}
		uint32_t off = (i % PER_BUF) * 128u;
		uint8_t *p = paste_store_buf(E.st, buf) + off;
		for (uint32_t x = 0; x < VAL; x++)
			p[x] = pattern(first + i, v, x);
		char k[16];
		key_of(k, first + i);
		struct paste_extent e = { buf, off, VAL };
		struct paste_btree_attr a = { .tag = (uint8_t)((first + i) & 15),
					      .has_word = (first + i) % 3 == 0, .word = first + i };
		CHECK_EQ(paste_btree_put(E.t, k, (uint32_t)strlen(k), &e, 1, &a, NULL), 0);
	}
	if (buf != PASTE_NO_BUF)
		paste_store_unref(E.st, buf, false);
}

static bool value_is(uint32_t key, uint32_t v)
{
	char k[16];
	key_of(k, key);
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	struct paste_btree_attr a;
	uint32_t n, len;
	if (paste_btree_lookup(E.t, k, (uint32_t)strlen(k), ext, &n, &len, &a) || len != VAL)
		return false;
	if (a.tag != (key & 15) || a.has_word != (key % 3 == 0) || (a.has_word && a.word != key))
		return false;
	uint8_t got[VAL];
	paste_store_read(E.st, ext, n, 0, got, VAL);
	for (uint32_t x = 0; x < VAL; x++)
		if (got[x] != pattern(key, v, x))
			return false;
	return true;
}

static uint64_t live_sum(void)
{
	struct paste_btree_info in;
	paste_btree_info(E.t, &in);
	return in.live_bytes;
}

/* Drive maintain (releases, the cleaner, checkpoints) until quiet. */
static void settle(int passes)
{
	for (int i = 0; i < passes; i++) {
		CHECK(paste_btree_maintain(E.t) >= 0);
		paste_persist_fence(E.p);
	}
}

static void test_accounting(void)
{
	setup("clean-acct", false);
	put_packed(0, 64, 1);
	CHECK_EQ(live_sum(), 64 * VAL);
	put_packed(0, 32, 2);                /* overwrite half: old bytes go when durable */
	settle(2);
	CHECK_EQ(live_sum(), 64 * VAL);
	for (uint32_t i = 0; i < 16; i++) {
		char k[16];
		key_of(k, i);
		CHECK_EQ(paste_btree_del(E.t, k, (uint32_t)strlen(k), NULL), 0);
	}
	settle(2);
	CHECK_EQ(live_sum(), 48 * VAL);
	CHECK(tenv_reopen(&E));              /* recovery counts what the tree names */
	CHECK_EQ(live_sum(), 48 * VAL);
	CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	CHECK(tenv_reopen(&E));
	CHECK_EQ(live_sum(), 48 * VAL);
	CHECK_EQ(paste_btree_clear(E.t, NULL), 0);
	settle(2);
	CHECK_EQ(live_sum(), 0);
	struct paste_btree_info in;
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.live_bufs, 0);
	tenv_finish(&E);
}

/* 1 of every 16 values lives on, the rest are overwritten many times:
 * without the cleaner each long-lived value pins a whole buffer. */
static void test_sparse_reclaimed(bool clean)
{
	setup(clean ? "clean-on" : "clean-off", clean);
	const uint32_t n = 1024;            /* 64 buffers' worth of packed values */
	put_packed(0, n, 1);
	uint32_t churn[PER_BUF - 1];
	for (uint32_t round = 2; round < 40; round++) {
		/* Overwrite every value but those of key % 16 == 0. */
		uint32_t buf = PASTE_NO_BUF, k = 0;
		for (uint32_t key = 0; key < n; key++) {
			if (key % PER_BUF == 0)
				continue;
			if (k % PER_BUF == 0) {
				if (buf != PASTE_NO_BUF)
					paste_store_unref(E.st, buf, false);
				if (paste_store_alloc(E.st, &buf, 1) != 1) {
					int64_t r = paste_btree_make_room(E.t, 64, 64);
					CHECK(r >= 0);
					CHECK_EQ(paste_store_alloc(E.st, &buf, 1), 1);
				}
			}
			uint32_t off = (k++ % PER_BUF) * 128u;
			uint8_t *p = paste_store_buf(E.st, buf) + off;
			for (uint32_t x = 0; x < VAL; x++)
				p[x] = pattern(key, round, x);
			char kk[16];
			key_of(kk, key);
			struct paste_extent e = { buf, off, VAL };
			struct paste_btree_attr a = { .tag = (uint8_t)(key & 15), .has_word = key % 3 == 0,
						      .word = key };
			int r = paste_btree_put(E.t, kk, (uint32_t)strlen(kk), &e, 1, &a, NULL);
			CHECK_EQ(r, 0);
			if (r)
				break;
		}
		if (buf != PASTE_NO_BUF)
			paste_store_unref(E.st, buf, false);
		settle(4);
	}
	(void)churn;
	/* Long-lived ones: their bytes, tag and word, through a reopen too. */
	bool ok = true;
	for (uint32_t key = 0; key < n; key += PER_BUF)
		ok &= value_is(key, 1);
	CHECK(ok);
	settle(200);
	struct paste_btree_info in;
	paste_btree_info(E.t, &in);
	uint32_t live_bufs = in.live_bufs;
	fprintf(stderr, "  cleaner %s: %u buffers hold %llu live bytes; moved %llu values; "
		"%u of %u buffers free\n", clean ? "on" : "off", live_bufs,
		(unsigned long long)in.live_bytes, (unsigned long long)in.clean_moved,
		paste_store_nfree(E.st), paste_store_geom(E.st)->nbufs);
	if (clean) {
		CHECK(in.clean_moved > 0);
		/* 64 long-lived values of 100 bytes fit in 4 buffers; the
		 * last churn round's 960 in 60: well under the 64 + 60 a
		 * store without cleaning keeps. */
		CHECK(live_bufs <= 70);
	} else {
		CHECK_EQ(in.clean_moved, 0);
		CHECK(live_bufs >= 64 + 60);
	}
	CHECK_EQ(tree_check(E.t), 0);
	CHECK_EQ(audit_refs(&E), 0);
	CHECK(tenv_reopen(&E));
	ok = true;
	for (uint32_t key = 0; key < n; key += PER_BUF)
		ok &= value_is(key, 1);
	CHECK(ok);
	CHECK_EQ(tree_check(E.t), 0);
	tenv_finish(&E);
}

/* A value whose bytes changed under the tree is not moved: the cleaner
 * counts it and paste_btree_check names it. */
static void test_damaged_left(void)
{
	setup("clean-damage", false);
	put_packed(0, 32, 1);
	put_packed(1, 15, 2);      /* keys 1..15 move to a new buffer; 0 and 16.. stay */
	settle(2);
	char k[16];
	key_of(k, 0);
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	CHECK_EQ(paste_btree_get(E.t, k, (uint32_t)strlen(k), ext, &n, &len), 0);
	paste_store_buf(E.st, ext[0].buf)[ext[0].off + 5] ^= 1;
	E.tcfg.no_clean = false;
	CHECK(tenv_reopen(&E));
	/* Three sparse buffers: too few for a cycle of its own, so ask. */
	CHECK(paste_btree_make_room(E.t, paste_store_geom(E.st)->nbufs, 8) >= 0);
	settle(5);
	struct paste_btree_info in;
	paste_btree_info(E.t, &in);
	CHECK(in.clean_damaged >= 1);
	struct paste_extent now[PASTE_BTREE_MAX_EXTENTS];
	CHECK_EQ(paste_btree_get(E.t, k, (uint32_t)strlen(k), now, &n, &len), 0);
	CHECK(now[0].buf == ext[0].buf && now[0].off == ext[0].off);
	CHECK(tree_check(E.t) > 0);
	paste_store_buf(E.st, ext[0].buf)[ext[0].off + 5] ^= 1;
	CHECK_EQ(tree_check(E.t), 0);
	tenv_finish(&E);
}

int main(void)
{
	make_dir("btree-clean");
	test_accounting();
	test_sparse_reclaimed(false);
	test_sparse_reclaimed(true);
	test_damaged_left();
	rmdir(dir);
	return check_done();
}
