/* test_btree_page.c - one slotted page (lib/btree_page.c): replacing an
 * entry against a model of the page's keys and entries, with the page
 * checked after every change; an entry replaced by one of its own size
 * takes the old bytes and leaves no hole; one that does not fit leaves the
 * page as it was; the binary search, which skips the bytes a probe's
 * bounds share with the key, finds what a scan finds, and so does a
 * leaf's search from any place (bt_search_near). */
#include <stdlib.h>
#include <string.h>
#include "btree_internal.h"
#include "check.h"

enum { NO = 7, NKEYS = 60 };
static const struct paste_store_geom G = { .buf_size = 2048, .nbufs = 4096 };

static uint32_t klen_of(uint32_t i)
{
	return 6 + i % 23;
}

static uint32_t key_of(uint32_t i, uint8_t *k)
{
	uint32_t len = klen_of(i);
	memset(k, 'k', len);
	k[0] = (uint8_t)('a' + i / 26);   /* rising with i */
	k[1] = (uint8_t)('a' + i % 26);
	return len;
}

/* Key i's leaf entry of n extents, their contents from seed. */
static uint32_t entry_of(uint8_t *out, uint32_t i, uint32_t n, uint32_t seed)
{
	uint8_t k[32];
	uint32_t klen = key_of(i, k), vlen = 0;
	struct paste_extent ext[8];
	for (uint32_t e = 0; e < n; e++) {
		ext[e] = (struct paste_extent){ (seed * 7 + e) % G.nbufs, seed % 1000, 1 + (seed + e) % 900 };
		vlen += ext[e].len;
	}
	struct paste_btree_attr a = { .tag = (uint8_t)(seed & 3), .crc = seed * 2654435761u };
	return bt_leaf_entry(out, k, klen, ext, n, vlen, &a);
}

/* The page holds exactly model[0..NKEYS) in order, and checks. */
static void agree(uint8_t *pg, uint8_t (*model)[256], const uint32_t *msize, const char *when)
{
	const char *why = bt_page_check(pg, NO, &G);
	uint32_t bad = bt_h(pg)->nkeys != NKEYS;
	for (uint32_t i = 0; !bad && i < NKEYS; i++) {
		const uint8_t *e = bt_entry(pg, i);
		bad += bt_esize(BT_LEAF, e) != msize[i] || memcmp(e, model[i], msize[i]) != 0;
	}
	if (why || bad)
		fprintf(stderr, "  %s: %s, %u entries differ\n", when, why ? why : "checks", bad);
	CHECK(why == NULL);
	CHECK_EQ(bad, 0);
}

/* A leaf of NKEYS entries of one extent each, and its model. */
static void fill(uint8_t *pg, uint8_t (*model)[256], uint32_t *msize)
{
	bt_page_init(pg, NO, BT_LEAF, 0, 1);
	for (uint32_t i = 0; i < NKEYS; i++) {
		msize[i] = entry_of(model[i], i, 1, i);
		CHECK(bt_page_insert(pg, i, model[i], msize[i]));
	}
	agree(pg, model, msize, "filled");
}

static void test_same_size(void)
{
	static uint8_t pg[BT_PAGE], model[NKEYS][256];
	uint32_t msize[NKEYS];
	fill(pg, model, msize);
	uint16_t top = bt_h(pg)->top;
	/* Thousands of overwrites by entries of the same size: without the
	 * in-place path each leaves a hole and the page compacts again and
	 * again; with it the page never has a hole. */
	uint32_t holes = 0;
	for (uint32_t r = 1; r <= 100; r++)
		for (uint32_t i = 0; i < NKEYS; i++) {
			msize[i] = entry_of(model[i], i, 1, r * 1000 + i);
			CHECK(bt_page_replace(pg, i, model[i], msize[i]));
			holes += bt_h(pg)->frag != 0 || bt_h(pg)->top != top;
		}
	CHECK_EQ(holes, 0);
	agree(pg, model, msize, "after same-size overwrites");
}

static void test_sizes_change(void)
{
	static uint8_t pg[BT_PAGE], model[NKEYS][256];
	uint32_t msize[NKEYS];
	fill(pg, model, msize);
	/* 1 to 6 extents at random: larger ones fill the page until one does
	 * not fit, which must leave it untouched. */
	srand(7);
	uint32_t refused = 0;
	static uint8_t before[BT_PAGE];
	for (uint32_t step = 0; step < 20000; step++) {
		uint32_t i = (uint32_t)rand() % NKEYS, n = 1 + (uint32_t)rand() % 6;
		uint8_t e[256];
		uint32_t size = entry_of(e, i, n, step);
		memcpy(before, pg, BT_PAGE);
		if (bt_page_replace(pg, i, e, size)) {
			memcpy(model[i], e, size);
			msize[i] = size;
		} else {
			refused++;
			CHECK(bt_used(pg) - bt_esize(BT_LEAF, bt_entry(pg, i)) + size > BT_CAP);
			CHECK(memcmp(before, pg, BT_PAGE) == 0);
		}
		if (step % 1000 == 0)
			agree(pg, model, msize, "while sizes change");
	}
	CHECK(refused > 0);   /* the page did fill */
	agree(pg, model, msize, "after sizes changed");
}

/* Keys over a small alphabet behind shared prefixes of 0 to 24 bytes
 * (around each word boundary), prefixes of one another among them. */
static uint32_t random_key(uint8_t *k)
{
	static const uint8_t abc[] = { 0x00, 0x01, 'a', 'b', 0xff };
	static const uint32_t shared[] = { 0, 7, 8, 9, 15, 16, 17, 24 };
	uint32_t pre = shared[(uint32_t)rand() % 8], len = pre + (uint32_t)rand() % 14;
	for (uint32_t i = 0; i < len; i++)
		k[i] = i < pre ? (uint8_t)('p' + i % 3) : abc[(uint32_t)rand() % 5];
	return len;
}

struct skey { uint8_t k[40]; uint32_t len; };

static int skey_cmp(const void *a, const void *b)
{
	const struct skey *x = a, *y = b;
	return bt_keycmp(x->k, x->len, y->k, y->len);
}

static void test_search(void)
{
	static uint8_t pg[BT_PAGE];
	static struct skey keys[200];
	srand(11);
	uint32_t wrong = 0, probes = 0, near_wrong = 0, near_probes = 0;
	for (uint32_t round = 0; round < 300; round++) {
		uint8_t type = round % 2 ? BT_INNER : BT_LEAF;
		uint32_t n = 0;
		for (; n < 60; n++)
			keys[n].len = random_key(keys[n].k);
		qsort(keys, n, sizeof(keys[0]), skey_cmp);
		uint32_t u = 0;              /* distinct, in order */
		for (uint32_t i = 0; i < n; i++)
			if (!u || skey_cmp(&keys[u - 1], &keys[i]))
				keys[u++] = keys[i];
		bt_page_init(pg, NO, type, type == BT_LEAF ? 0 : 1, 1);
		for (uint32_t i = 0; i < u; i++) {
			uint8_t e[128];
			struct paste_extent x = { i, 0, 10 };
			struct paste_btree_attr a = { 0 };
			uint32_t size = type == BT_LEAF
					? bt_leaf_entry(e, keys[i].k, keys[i].len, &x, 1, 10, &a)
					: bt_inner_entry(e, keys[i].k, keys[i].len, 100 + i);
			CHECK(bt_page_insert(pg, i, e, size));   /* 60 keys of <= 38 bytes fit */
		}
		for (uint32_t q = 0; q < 400; q++) {
			struct skey k;
			if (q % 2)
				k = keys[(uint32_t)rand() % u];
			else
				k.len = random_key(k.k);
			uint32_t below = 0;          /* keys < k, and whether k is one */
			bool has = false;
			for (uint32_t i = 0; i < u; i++) {
				int c = skey_cmp(&keys[i], &k);
				below += c < 0;
				has |= c == 0;
			}
			bool found;
			uint32_t at = bt_search(pg, k.k, k.len, &found);
			uint32_t want = has && type == BT_INNER ? below + 1 : below;
			wrong += found != has || at != want;
			probes++;
			/* A leaf's search from a place: every place, its own
			 * answer and its neighbours, past the end too. */
			for (uint32_t near = 0; type == BT_LEAF && near <= u + 1; near++) {
				at = bt_search_near(pg, near, k.k, k.len, &found);
				near_wrong += found != has || at != want;
				near_probes++;
			}
		}
	}
	CHECK_EQ(wrong, 0);
	CHECK(probes == 300 * 400);
	CHECK_EQ(near_wrong, 0);
	CHECK(near_probes > 150 * 400 * 2);
}

int main(void)
{
	test_same_size();
	test_sizes_change();
	test_search();
	return check_done();
}
