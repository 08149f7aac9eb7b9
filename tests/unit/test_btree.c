/* test_btree.c - the B+tree's operations: get/set/del/clear and their
 * errors, every key size 1..512, keys of the bytes compares get wrong,
 * splits and merges down to an empty tree, ordered iteration and range scans (also while the tree changes), and
 * the references of replaced values, dropped only once durable. */
#include "btree_fixture.h"

static struct tenv E;

static void setup(const char *name, enum paste_durability mode)
{
	memset(&E, 0, sizeof(E));
	E.scfg = (struct paste_store_config){ .size = 32u << 20, .buf_size = 2048, .log_lanes = 2,
					      .node_size = 8u << 20 };
	E.mode = mode;
	E.npool = 64;
	tenv_start(&E, name);
}

static struct paste_extent val(uint32_t i, uint32_t off, uint32_t len)
{
	return (struct paste_extent){ E.pool[i % E.npool], off, len };
}

static void test_basics(void)
{
	setup("basics", PASTE_DUR_NONE);
	struct paste_btree *t = E.t;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS], v[2] = { val(1, 10, 5), val(2, 0, 7) };
	uint32_t n = 99, len = 99;
	uint64_t lsn = 0, lsn2 = 0;
	CHECK_EQ(paste_btree_count(t), 0);
	CHECK_EQ(paste_btree_get(t, "a", 1, ext, &n, &len), -ENOENT);
	CHECK_EQ(paste_btree_del(t, "a", 1, &lsn), -ENOENT);
	CHECK_EQ(lsn, 0);
	CHECK_EQ(paste_btree_set(t, "a", 1, v, 2, &lsn), 0);
	CHECK(lsn > 0);
	CHECK_EQ(paste_btree_get(t, "a", 1, ext, &n, &len), 0);
	CHECK_EQ(n, 2);
	CHECK_EQ(len, 12);
	CHECK(memcmp(ext, v, sizeof(v)) == 0);
	CHECK_EQ(paste_btree_set(t, "a", 1, v + 1, 1, &lsn2), 0);   /* overwrite */
	CHECK(lsn2 > lsn);
	CHECK_EQ(paste_btree_get(t, "a", 1, ext, &n, &len), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(len, 7);
	CHECK_EQ(paste_btree_count(t), 1);
	CHECK_EQ(paste_btree_set(t, "empty", 5, NULL, 0, NULL), 0);   /* an empty value */
	CHECK_EQ(paste_btree_get(t, "empty", 5, ext, &n, &len), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(len, 0);
	CHECK_EQ(paste_btree_count(t), 2);

	/* Bad arguments change nothing and log nothing. */
	struct paste_btree_info before, after;
	paste_btree_info(t, &before);
	uint8_t big[PASTE_BTREE_MAX_KEY + 1];
	memset(big, 'x', sizeof(big));
	CHECK_EQ(paste_btree_set(t, "", 0, v, 1, NULL), -EINVAL);
	CHECK_EQ(paste_btree_set(t, NULL, 1, v, 1, NULL), -EINVAL);
	CHECK_EQ(paste_btree_set(t, big, sizeof(big), v, 1, NULL), -ENAMETOOLONG);
	CHECK_EQ(paste_btree_get(t, big, sizeof(big), ext, &n, &len), -ENAMETOOLONG);
	CHECK_EQ(paste_btree_del(t, "", 0, NULL), -EINVAL);
	CHECK_EQ(paste_btree_set(t, "a", 1, v, PASTE_BTREE_MAX_EXTENTS + 1, NULL), -E2BIG);
	CHECK_EQ(paste_btree_set(t, "a", 1, NULL, 1, NULL), -EINVAL);
	struct paste_extent bad[3] = { { paste_store_geom(E.st)->nbufs, 0, 1 }, val(0, 2040, 9), val(0, 2049, 0) };
	for (int i = 0; i < 3; i++)
		CHECK_EQ(paste_btree_set(t, "a", 1, bad + i, 1, NULL), -EINVAL);
	paste_btree_info(t, &after);
	CHECK_EQ(after.last_lsn, before.last_lsn);
	CHECK_EQ(after.keys, 2);

	/* The longest key and the most extents. */
	struct paste_extent many[PASTE_BTREE_MAX_EXTENTS];
	for (uint32_t i = 0; i < PASTE_BTREE_MAX_EXTENTS; i++)
		many[i] = val(i, i, 100 + i);
	CHECK_EQ(paste_btree_set(t, big, PASTE_BTREE_MAX_KEY, many, PASTE_BTREE_MAX_EXTENTS, NULL), 0);
	CHECK_EQ(paste_btree_get(t, big, PASTE_BTREE_MAX_KEY, ext, &n, &len), 0);
	CHECK_EQ(n, PASTE_BTREE_MAX_EXTENTS);
	CHECK(memcmp(ext, many, sizeof(many)) == 0);
	CHECK_EQ(paste_btree_del(t, "a", 1, NULL), 0);
	CHECK_EQ(paste_btree_get(t, "a", 1, ext, &n, &len), -ENOENT);
	CHECK_EQ(paste_btree_count(t), 2);
	CHECK_EQ(tree_check(t), 0);
	CHECK_EQ(paste_btree_maintain(t), 0);
	CHECK_EQ(audit_refs(&E), 0);
	CHECK(paste_btree_keycmp("ab", 2, "abc", 3) < 0);
	CHECK(paste_btree_keycmp("b", 1, "abc", 3) > 0);
	CHECK_EQ(paste_btree_keycmp("abc", 3, "abc", 3), 0);
	tenv_finish(&E);
}

/* Keys of every length 1..512 sharing one prefix ("a", "aa", ...) and of
 * every length with distinct bytes: order, lookups, then deletion in a
 * scrambled order with the structure checked as it shrinks. */
static void key_of(uint8_t *k, uint32_t len, bool prefix)
{
	for (uint32_t i = 0; i < len; i++)
		k[i] = prefix ? 'a' : (uint8_t)(len * 37u + i * 11u);
	if (!prefix)
		k[0] = (uint8_t)(len >> 1);   /* distinct first bytes for most lengths */
}

static void test_key_sizes(void)
{
	setup("keysizes", PASTE_DUR_NONE);
	uint8_t k[PASTE_BTREE_MAX_KEY];
	for (int prefix = 1; prefix >= 0; prefix--) {
		for (uint32_t len = 1; len <= PASTE_BTREE_MAX_KEY; len++) {
			key_of(k, len, prefix);
			struct paste_extent v = val(len, len % 1000, len);
			CHECK_EQ(paste_btree_set(E.t, k, len, &v, 1, NULL), 0);
		}
	}
	uint64_t count = paste_btree_count(E.t);
	CHECK(count >= 2 * PASTE_BTREE_MAX_KEY - 1);   /* two keys may coincide */
	struct paste_btree_info in;
	paste_btree_info(E.t, &in);
	CHECK(in.height >= 2);
	CHECK_EQ(tree_check(E.t), 0);
	/* Every key found, with its value; the order strictly rising. */
	for (uint32_t len = 1; len <= PASTE_BTREE_MAX_KEY; len++) {
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		uint32_t n, vlen;
		key_of(k, len, true);
		CHECK_EQ(paste_btree_get(E.t, k, len, ext, &n, &vlen), 0);
		CHECK_EQ(vlen, len);
	}
	struct paste_btree_cursor c;
	const uint8_t *key;
	uint8_t prev[PASTE_BTREE_MAX_KEY];
	uint32_t klen, plen = 0, seen = 0, bad = 0;
	paste_btree_cursor_init(&c, E.t, NULL, 0);
	while (paste_btree_cursor_next(&c, &key, &klen, NULL, NULL, NULL) == 1) {
		bad += seen && paste_btree_keycmp(prev, plen, key, klen) >= 0;
		memcpy(prev, key, klen);
		plen = klen;
		seen++;
	}
	CHECK_EQ(seen, count);
	CHECK_EQ(bad, 0);
	/* Delete all, in a scrambled order; check the structure now and then. */
	uint64_t s = 42;
	uint32_t order[2 * PASTE_BTREE_MAX_KEY];
	for (uint32_t i = 0; i < 2 * PASTE_BTREE_MAX_KEY; i++)
		order[i] = i;
	for (uint32_t i = 2 * PASTE_BTREE_MAX_KEY - 1; i > 0; i--) {
		uint32_t j = (uint32_t)(rnd(&s) % (i + 1)), x = order[i];
		order[i] = order[j];
		order[j] = x;
	}
	uint32_t deleted = 0, checks_bad = 0;
	for (uint32_t i = 0; i < 2 * PASTE_BTREE_MAX_KEY; i++) {
		uint32_t len = order[i] % PASTE_BTREE_MAX_KEY + 1;
		key_of(k, len, order[i] < PASTE_BTREE_MAX_KEY);
		deleted += paste_btree_del(E.t, k, len, NULL) == 0;
		if (i % 64 == 0)
			checks_bad += tree_check(E.t) != 0;
	}
	CHECK_EQ(deleted, count);
	CHECK_EQ(checks_bad, 0);
	CHECK_EQ(paste_btree_count(E.t), 0);
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.height, 0);
	CHECK_EQ(in.pages_used, 0);
	CHECK_EQ(paste_btree_maintain(E.t) >= 0, 1);
	CHECK_EQ(audit_refs(&E), 0);
	tenv_finish(&E);
}

/* Keys of the bytes a compare gets wrong: 0x00 (a shorter key padded
 * with zeros must still sort first: "ab" < "ab\0"), 0x01, 0x7f, 0x80 and
 * 0xff (unsigned order), at every length 1-4, and families sharing a
 * prefix at lengths 5-18 (word boundaries of a compare done 4 or 8 bytes
 * at a time). Every other key is stored: lookups of both halves, the
 * order of a full scan, and a cursor started at each absent key (the
 * search's lower bound) checked against memcmp order. */
#define KB_MAX 2200u
static uint8_t kb_key[KB_MAX][20];
static uint32_t kb_len[KB_MAX];
static int kb_cmp(const void *a, const void *b)
{
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
	uint32_t m = kb_len[i] < kb_len[j] ? kb_len[i] : kb_len[j];
	int c = memcmp(kb_key[i], kb_key[j], m);
	return c ? c : (int)kb_len[i] - (int)kb_len[j];
}

static void test_key_bytes(void)
{
	static const uint8_t al[5] = { 0x00, 0x01, 0x7f, 0x80, 0xff };
	uint32_t n = 0;
	for (uint32_t len = 1; len <= 4; len++) {
		uint32_t combos = 1;
		for (uint32_t i = 0; i < len; i++)
			combos *= 5;
		for (uint32_t c = 0, x; c < combos; c++) {
			x = c;
			for (uint32_t i = 0; i < len; i++, x /= 5)
				kb_key[n][i] = al[x % 5];
			kb_len[n++] = len;
		}
	}
	for (uint32_t len = 5; len <= 18; len++)
		for (uint32_t last = 0; last < 5; last++)
			for (uint32_t pad = 0; pad < 5; pad++) {
				memcpy(kb_key[n], "key:00000000000000", len);
				kb_key[n][len - 1] = al[last];
				if (len >= 6)
					kb_key[n][len - 2] = al[pad];
				kb_len[n++] = len;
			}
	static uint32_t order[KB_MAX];
	for (uint32_t i = 0; i < n; i++)
		order[i] = i;
	qsort(order, n, sizeof(order[0]), kb_cmp);
	uint32_t u = 0;                      /* drop duplicates (the families repeat) */
	for (uint32_t i = 0; i < n; i++)
		if (!u || kb_cmp(&order[u - 1], &order[i]) != 0)
			order[u++] = order[i];
	CHECK(u > 1000);
	setup("keybytes", PASTE_DUR_NONE);
	/* Every other key in memcmp order, in a scrambled order: j -> j * p
	 * mod half is a permutation for a prime p not dividing half. */
	uint32_t bad_set = 0, bad_get = 0, bad_seek = 0, half = (u + 1) / 2;
	uint32_t p = half % 7919u ? 7919u : 7907u;
	for (uint32_t j = 0; j < half; j++) {
		uint32_t i = order[2 * (uint32_t)((uint64_t)j * p % half)];
		struct paste_extent v = val(i, i % 1000, kb_len[i]);
		bad_set += paste_btree_set(E.t, kb_key[i], kb_len[i], &v, 1, NULL) != 0;
	}
	CHECK_EQ(bad_set, 0);
	CHECK_EQ(tree_check(E.t), 0);
	for (uint32_t r = 0; r < u; r++) {
		uint32_t i = order[r], en, vlen;
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		int g = paste_btree_get(E.t, kb_key[i], kb_len[i], ext, &en, &vlen);
		bad_get += r % 2 ? g != -ENOENT : g != 0 || vlen != kb_len[i];
		if (r % 2 == 0)
			continue;
		struct paste_btree_cursor c;
		const uint8_t *key;
		uint32_t klen;
		paste_btree_cursor_init(&c, E.t, kb_key[i], kb_len[i]);
		int got = paste_btree_cursor_next(&c, &key, &klen, NULL, NULL, NULL);
		if (r + 1 < u) {
			uint32_t want = order[r + 1];
			bad_seek += got != 1 || klen != kb_len[want] || memcmp(key, kb_key[want], klen);
		} else {
			bad_seek += got != 0;
		}
	}
	CHECK_EQ(bad_get, 0);
	CHECK_EQ(bad_seek, 0);
	struct paste_btree_cursor c;
	const uint8_t *key;
	uint32_t klen, seen = 0, bad_order = 0;
	paste_btree_cursor_init(&c, E.t, NULL, 0);
	while (paste_btree_cursor_next(&c, &key, &klen, NULL, NULL, NULL) == 1) {
		uint32_t want = 2 * seen < u ? order[2 * seen] : 0;
		bad_order += 2 * seen >= u || klen != kb_len[want] || memcmp(key, kb_key[want], klen);
		seen++;
	}
	CHECK_EQ(seen, half);
	CHECK_EQ(bad_order, 0);
	tenv_finish(&E);
}

/* Many small keys in order (splits at every level), then removed from the
 * middle outwards (merges and borrowing), with checkpoints in between so
 * copy-on-write meets splits and merges. */
static void test_splits_merges(void)
{
	setup("splits", PASTE_DUR_NONE);
	const uint32_t N = 60000;
	char k[32];
	uint32_t bad = 0;
	for (uint32_t i = 0; i < N; i++) {
		snprintf(k, sizeof(k), "key%08u", i * 7919u % N);
		struct paste_extent v = val(i, 0, 8);
		bad += set_str(E.t, k, &v, 1) != 0;
		if (i % 10000 == 0)
			bad += paste_btree_checkpoint(E.t) != 0;
	}
	CHECK_EQ(bad, 0);
	struct paste_btree_info in;
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.keys, N);
	CHECK(in.height >= 3);
	CHECK(in.pages_used > N / 200);
	CHECK_EQ(tree_check(E.t), 0);
	uint32_t pages_full = in.pages_used;
	for (uint32_t i = 0; i < N; i++) {
		uint32_t x = i % 2 ? N / 2 + i / 2 : N / 2 - 1 - i / 2;
		snprintf(k, sizeof(k), "key%08u", x);
		bad += paste_btree_del(E.t, k, (uint32_t)strlen(k), NULL) != 0;
		if (i % 5000 == 0) {
			bad += tree_check(E.t) != 0;
			bad += paste_btree_maintain(E.t) < 0;
		}
		if (i == N / 2) {
			paste_btree_info(E.t, &in);
			CHECK(in.pages_used < pages_full * 2 / 3);   /* merges give pages back */
		}
	}
	CHECK_EQ(bad, 0);
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.keys, 0);
	CHECK_EQ(in.height, 0);
	CHECK_EQ(in.pages_used, 0);
	CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.pages_free, in.pages_total);
	CHECK_EQ(in.releases_waiting, 4999);   /* since the last maintain (NONE: all durable) */
	CHECK_EQ(paste_btree_maintain(E.t), 0);
	CHECK_EQ(audit_refs(&E), 0);
	tenv_finish(&E);
}

static uint32_t scan(struct paste_btree *t, const char *from, const char *to, char out[][16], uint32_t max)
{
	struct paste_btree_cursor c;
	const uint8_t *key;
	uint32_t klen, n = 0;
	paste_btree_cursor_init(&c, t, from, from ? (uint32_t)strlen(from) : 0);
	while (n < max && paste_btree_cursor_next(&c, &key, &klen, NULL, NULL, NULL) == 1) {
		if (to && paste_btree_keycmp(key, klen, to, (uint32_t)strlen(to)) >= 0)
			break;
		memcpy(out[n], key, klen);
		out[n++][klen] = 0;
	}
	return n;
}

static void test_cursors(void)
{
	setup("cursor", PASTE_DUR_NONE);
	char out[2000][16], k[16];
	CHECK_EQ(scan(E.t, NULL, NULL, out, 10), 0);   /* empty tree */
	for (uint32_t i = 0; i < 1000; i += 2) {   /* even keys k0000 .. k0998 */
		snprintf(k, sizeof(k), "k%04u", i);
		struct paste_extent v = val(i, 0, 4);
		CHECK_EQ(set_str(E.t, k, &v, 1), 0);
	}
	CHECK_EQ(scan(E.t, NULL, NULL, out, 2000), 500);
	CHECK(strcmp(out[0], "k0000") == 0 && strcmp(out[499], "k0998") == 0);
	CHECK_EQ(scan(E.t, "k0100", "k0200", out, 2000), 50);          /* [from, to) */
	CHECK(strcmp(out[0], "k0100") == 0 && strcmp(out[49], "k0198") == 0);
	CHECK_EQ(scan(E.t, "k0101", "k0105", out, 2000), 2);            /* start between keys */
	CHECK(strcmp(out[0], "k0102") == 0);
	CHECK_EQ(scan(E.t, "a", NULL, out, 2000), 500);                 /* before all */
	CHECK_EQ(scan(E.t, "k0998", NULL, out, 2000), 1);
	CHECK_EQ(scan(E.t, "k0999", NULL, out, 2000), 0);               /* after all */
	CHECK_EQ(scan(E.t, "k", "k0004", out, 2000), 2);                /* a prefix of them all */

	/* The tree changes under a cursor: it goes on after the last key it
	 * returned, sees keys inserted ahead, not ones deleted ahead. */
	struct paste_btree_cursor c;
	const uint8_t *key;
	uint32_t klen, got = 0, order_bad = 0;
	char prev[16] = "";
	paste_btree_cursor_init(&c, E.t, "k0500", 5);
	while (paste_btree_cursor_next(&c, &key, &klen, NULL, NULL, NULL) == 1) {
		char cur[16];
		memcpy(cur, key, klen);
		cur[klen] = 0;
		order_bad += prev[0] && strcmp(prev, cur) >= 0;
		strcpy(prev, cur);
		got++;
		unsigned x = (unsigned)atoi(cur + 1);
		snprintf(k, sizeof(k), "k%04u", x + 1);          /* an odd key just ahead */
		struct paste_extent v = val(x, 0, 4);
		if (x % 4 == 0)
			CHECK_EQ(set_str(E.t, k, &v, 1), 0);
		snprintf(k, sizeof(k), "k%04u", x + 4);          /* delete two ahead */
		if (x % 8 == 0)
			paste_btree_del(E.t, k, 5, NULL);
	}
	CHECK_EQ(order_bad, 0);
	/* From k0500: 250 even keys, minus the x+4 deleted before being
	 * reached, plus the odd keys inserted (each of them is reached). */
	CHECK(got > 250 && got < 400);
	CHECK_EQ(tree_check(E.t), 0);
	tenv_finish(&E);
}

/* Random descents (cursor_sample): every pick is a key of the range, an
 * empty range or tree gives -ENOENT, and over many seeds every part of
 * a range several leaves wide is picked about as often as its share. */
static void test_cursor_sample(void)
{
	setup("cursor_sample", PASTE_DUR_NONE);
	struct paste_btree_cursor c;
	const uint8_t *key;
	uint32_t klen;
	paste_btree_cursor_init(&c, E.t, NULL, 0);
	CHECK_EQ(paste_btree_cursor_sample(&c, "a", 1, "z", 1, 1), -ENOENT);     /* empty tree */
	enum { N = 4000, PARTS = 8, DRAWS = 16000 };
	for (uint32_t i = 0; i < N; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%05u", i);
		struct paste_extent v = val(i, 0, 4);
		CHECK_EQ(set_str(E.t, k, &v, 1), 0);
	}
	CHECK_EQ(set_str(E.t, "a-outside", &(struct paste_extent){ 0 }, 0), 0);
	CHECK_EQ(set_str(E.t, "z-outside", &(struct paste_extent){ 0 }, 0), 0);
	uint32_t hits[PARTS] = { 0 }, bad = 0, misses = 0;
	uint64_t seed = 42;
	for (uint32_t d = 0; d < DRAWS; d++) {
		seed = seed * 6364136223846793005ull + 1;
		int r = paste_btree_cursor_sample(&c, "k", 1, "l", 1, seed);
		if (r == -ENOENT) {
			misses++;
			continue;
		}
		CHECK_EQ(r, 0);
		CHECK_EQ(paste_btree_cursor_next(&c, &key, &klen, NULL, NULL, NULL), 1);
		unsigned n;
		if (klen != 6 || key[0] != 'k' || sscanf((const char *)key + 1, "%5u", &n) != 1 || n >= N) {
			bad++;
			continue;
		}
		hits[n * PARTS / N]++;
	}
	CHECK_EQ(bad, 0);
	CHECK(misses < DRAWS / 10);               /* edge leaves only */
	uint32_t got = DRAWS - misses;
	for (uint32_t p = 0; p < PARTS; p++)       /* each eighth: its share within 30 % */
		CHECK(hits[p] * PARTS > got * 7 / 10 && hits[p] * PARTS < got * 13 / 10);
	/* A range of one key: that key; a range between keys: -ENOENT. */
	CHECK_EQ(paste_btree_cursor_sample(&c, "k01234", 6, "k01235", 6, 7), 0);
	CHECK_EQ(paste_btree_cursor_next(&c, &key, &klen, NULL, NULL, NULL), 1);
	CHECK(klen == 6 && memcmp(key, "k01234", 6) == 0);
	CHECK_EQ(paste_btree_cursor_sample(&c, "k01234x", 7, "k01235", 6, 7), -ENOENT);
	tenv_finish(&E);
}

/* Backwards (cursor_prev) and counted skips (cursor_skip) against the
 * forward order: every key from every start, both directions mixed, a
 * count of every range, and changes between steps. */
static void test_cursor_prev_skip(void)
{
	setup("cursor_prev", PASTE_DUR_NONE);
	struct paste_btree_cursor c;
	const uint8_t *key;
	uint32_t klen;
	paste_btree_cursor_init(&c, E.t, NULL, 0);
	CHECK_EQ(paste_btree_cursor_prev(&c, &key, &klen, NULL, NULL, NULL), 0);   /* empty tree */
	CHECK_EQ(paste_btree_cursor_skip(&c, 5, NULL, 0), 0);
	enum { N = 3000 };                         /* keys k00000, k00002, ... (several leaves deep) */
	static char keys[N][16];
	for (uint32_t i = 0; i < N; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%05u", 2 * i);
		struct paste_extent v = val(i, 0, 4);
		CHECK_EQ(set_str(E.t, keys[i], &v, 1), 0);
	}
	/* From the end, all of them backwards. */
	uint32_t i = N, bad = 0;
	paste_btree_cursor_init(&c, E.t, NULL, 0);
	while (paste_btree_cursor_prev(&c, &key, &klen, NULL, NULL, NULL) == 1) {
		i--;
		bad += klen != 6 || memcmp(key, keys[i], 6) != 0;
	}
	CHECK_EQ(i, 0);
	CHECK_EQ(bad, 0);
	CHECK_EQ(paste_btree_cursor_prev(&c, &key, &klen, NULL, NULL, NULL), 0);
	/* Below a start key, present or absent; then forward again. */
	for (uint32_t j = 0; j < N; j += 97) {
		char k[16];
		snprintf(k, sizeof(k), "k%05u", 2 * j + 1);          /* absent, after keys[j] */
		paste_btree_cursor_init(&c, E.t, k, 6);
		CHECK_EQ(paste_btree_cursor_prev(&c, &key, &klen, NULL, NULL, NULL), 1);
		CHECK(memcmp(key, keys[j], 6) == 0);
		paste_btree_cursor_init(&c, E.t, keys[j], 6);       /* present: the one before */
		int got = paste_btree_cursor_prev(&c, &key, &klen, NULL, NULL, NULL);
		CHECK_EQ(got, j ? 1 : 0);
		if (j) {
			CHECK(memcmp(key, keys[j - 1], 6) == 0);
			CHECK_EQ(paste_btree_cursor_next(&c, &key, &klen, NULL, NULL, NULL), 1);
			CHECK(memcmp(key, keys[j], 6) == 0);         /* the direction turns */
			CHECK_EQ(paste_btree_cursor_prev(&c, &key, &klen, NULL, NULL, NULL), 1);
			CHECK(memcmp(key, keys[j - 1], 6) == 0);
		}
	}
	/* Skips: to the i-th key, and counts of ranges [a, b). */
	uint64_t s = 42;
	for (int round = 0; round < 300; round++) {
		uint32_t a = (uint32_t)(rnd(&s) % N), b = (uint32_t)(rnd(&s) % (N + 1)), n = (uint32_t)(rnd(&s) % (N + 5));
		paste_btree_cursor_init(&c, E.t, keys[a], 6);
		uint32_t want = n < N - a ? n : N - a;
		CHECK_EQ(paste_btree_cursor_skip(&c, n, NULL, 0), want);
		int got = paste_btree_cursor_next(&c, &key, &klen, NULL, NULL, NULL);
		CHECK_EQ(got, a + want < N);
		if (got == 1)
			CHECK(memcmp(key, keys[a + want], 6) == 0);
		paste_btree_cursor_init(&c, E.t, keys[a], 6);
		uint64_t cnt = b < N ? paste_btree_cursor_skip(&c, UINT64_MAX, keys[b], 6)
				     : paste_btree_cursor_skip(&c, UINT64_MAX, "l", 1);
		CHECK_EQ(cnt, b > a ? b - a : 0);
		if (b > a && b < N) {
			CHECK_EQ(paste_btree_cursor_next(&c, &key, &klen, NULL, NULL, NULL), 1);
			CHECK(memcmp(key, keys[b], 6) == 0);
			CHECK_EQ(paste_btree_cursor_prev(&c, &key, &klen, NULL, NULL, NULL), 1);
			CHECK(memcmp(key, keys[b - 1], 6) == 0);
		}
	}
	/* Changes between backward steps: a re-seek below the last key. */
	paste_btree_cursor_init(&c, E.t, NULL, 0);
	uint32_t seen = 0;
	char prev[16] = "zzzzzz";
	bad = 0;
	while (paste_btree_cursor_prev(&c, &key, &klen, NULL, NULL, NULL) == 1) {
		char cur[16];
		memcpy(cur, key, klen);
		cur[klen] = 0;
		bad += strcmp(cur, prev) >= 0;
		strcpy(prev, cur);
		seen++;
		unsigned x = (unsigned)atoi(cur + 1);
		if (x >= 8 && x % 8 == 0)
			paste_btree_del(E.t, keys[x / 2 - 2], 6, NULL);   /* two keys below */
	}
	CHECK_EQ(bad, 0);
	CHECK(seen > N / 2 && seen < N);
	CHECK_EQ(tree_check(E.t), 0);
	tenv_finish(&E);
}

/* The old value's references go only once the change is durable: with
 * emulated PM, after the barrier and maintain. */
static void test_release_when_durable(void)
{
	setup("release", PASTE_DUR_EMULATED);
	struct paste_btree *t = E.t;
	uint32_t b[2];
	CHECK_EQ(paste_store_alloc(E.st, b, 2), 2);
	struct paste_extent v1 = { b[0], 0, 100 }, v2 = { b[1], 0, 50 };
	CHECK_EQ(paste_btree_set(t, "k", 1, &v1, 1, NULL), 0);
	paste_store_unref(E.st, b[0], false);   /* the caller's reference */
	CHECK_EQ(paste_store_refcount(E.st, b[0]), 2);   /* the tree's and the record's */
	CHECK_EQ(paste_persist_fence(E.p), 0);
	CHECK_EQ(paste_btree_set(t, "k", 1, &v2, 1, NULL), 0);
	paste_store_unref(E.st, b[1], false);
	struct paste_btree_info in;
	paste_btree_info(t, &in);
	CHECK_EQ(in.releases_waiting, 1);
	CHECK_EQ(paste_btree_maintain(t), 0);
	CHECK_EQ(paste_store_refcount(E.st, b[0]), 2);   /* not durable yet: kept */
	CHECK_EQ(paste_persist_fence(E.p), 0);
	CHECK_EQ(paste_btree_maintain(t), 0);
	CHECK_EQ(paste_store_refcount(E.st, b[0]), 1);   /* the record's only */
	CHECK_EQ(paste_btree_del(t, "k", 1, NULL), 0);
	CHECK_EQ(paste_store_refcount(E.st, b[1]), 2);
	CHECK_EQ(paste_persist_fence(E.p), 0);
	CHECK_EQ(paste_btree_maintain(t), 0);
	CHECK_EQ(paste_store_refcount(E.st, b[1]), 1);
	/* A checkpoint truncates the log: the records' references go too. */
	CHECK_EQ(paste_btree_checkpoint(t), 0);
	CHECK_EQ(paste_store_refcount(E.st, b[0]), 0);
	CHECK_EQ(paste_store_refcount(E.st, b[1]), 0);
	CHECK_EQ(audit_refs(&E), 0);

	/* clear: every value released once durable, pages freed. */
	for (uint32_t i = 0; i < 3000; i++) {
		char k[16];
		snprintf(k, sizeof(k), "c%u", i);
		struct paste_extent v = val(i, i % 100, 10);
		CHECK_EQ(set_str(t, k, &v, 1), 0);
	}
	CHECK_EQ(paste_persist_fence(E.p), 0);
	CHECK_EQ(paste_btree_clear(t, NULL), 0);
	CHECK_EQ(paste_btree_count(t), 0);
	char none[1][16];
	CHECK_EQ(scan(t, NULL, NULL, none, 1), 0);
	paste_btree_info(t, &in);
	CHECK_EQ(in.releases_waiting, 3000);
	CHECK_EQ(paste_persist_fence(E.p), 0);
	CHECK_EQ(paste_btree_maintain(t), 0);
	paste_btree_info(t, &in);
	CHECK_EQ(in.releases_waiting, 0);
	CHECK_EQ(in.pages_used, 0);
	CHECK_EQ(audit_refs(&E), 0);
	CHECK_EQ(paste_btree_checkpoint(t), 0);
	CHECK_EQ(tree_check(t), 0);
	tenv_finish(&E);
}

/* fsync mode with the port's group commit in flight: a checkpoint's
 * fences are synchronous syncs that wait for it and cover it, not -EBUSY. */
static void test_fsync_commit_in_flight(void)
{
	setup("fsync", PASTE_DUR_FSYNC);
	struct paste_extent v = val(0, 0, 10);
	uint64_t ticket;
	CHECK_EQ(set_str(E.t, "a", &v, 1), 0);
	uint64_t e = paste_persist_epoch(E.p);
	int fd = paste_persist_begin_commit(E.p, &ticket);
	CHECK(fd >= 0);
	CHECK_EQ(set_str(E.t, "b", &v, 1), 0);
	CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	CHECK(paste_persist_durable(E.p) >= e);
	CHECK_EQ(paste_persist_end_commit(E.p, ticket, commit_wait(fd)), 0);
	struct paste_btree_info in;
	paste_btree_info(E.t, &in);
	CHECK_EQ(in.checkpoints, 1);
	CHECK_EQ(in.ckpt_lsn, in.last_lsn);
	CHECK_EQ(tree_check(E.t), 0);
	tenv_finish(&E);
}

/* Pages of the node area in the file that are not all zeros. */
static uint32_t file_pages_written(void)
{
	const struct paste_store_geom *g = paste_store_geom(E.st);
	int fd = open(path, O_RDONLY);
	static uint8_t pg[4096], zero[4096];
	uint32_t n = 0;
	for (uint64_t off = 2 * sizeof(pg); fd >= 0 && off < g->node_size; off += sizeof(pg))
		if (pread(fd, pg, sizeof(pg), (off_t)(g->node_offset + off)) == (ssize_t)sizeof(pg) &&
		    memcmp(pg, zero, sizeof(pg)) != 0)
			n++;
	if (fd >= 0)
		close(fd);
	return n;
}

/* kB of private (copy-on-write) pages in mappings of the store file. */
static unsigned long private_copy_kb(void)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	bool ours = false;
	unsigned long kb = 0, v;
	while (f && fgets(line, sizeof(line), f)) {
		char perms[8];
		if (sscanf(line, "%*x-%*x %7s", perms) == 1)      /* a mapping's first line */
			ours = strstr(line, path) && perms[3] == 'p';
		else if (ours && sscanf(line, "Anonymous: %lu kB", &v) == 1)
			kb += v;
	}
	if (f)
		fclose(f);
	return kb;
}

/* fsync mode works in a private copy of the node area: between
 * checkpoints the file's node pages stay untouched (a group commit's
 * fdatasync has no leaves to write), a checkpoint writes them, and then
 * the private copies are dropped. */
static void test_fsync_private_pages(void)
{
	setup("fsyncpriv", PASTE_DUR_FSYNC);
	struct paste_extent v = val(0, 0, 10);
	char k[32];
	for (int i = 0; i < 3000; i++) {
		snprintf(k, sizeof(k), "key-%06d", i * 7919 % 3000);
		CHECK_EQ(set_str(E.t, k, &v, 1), 0);
	}
	CHECK_EQ(paste_persist_fence(E.p), 0);
	CHECK_EQ(file_pages_written(), 0);
	unsigned long before = private_copy_kb();
	CHECK(before >= 4 * 10);
	CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	struct paste_btree_info in;
	paste_btree_info(E.t, &in);
	CHECK(in.pages_used >= 10);
	CHECK(file_pages_written() >= in.pages_used);
	unsigned long after = private_copy_kb();
	CHECK_EQ(after, 0);
	if (after)
		fprintf(stderr, "  private copies: %lu kB before the checkpoint, %lu kB after\n", before, after);
	CHECK_EQ(paste_btree_count(E.t), 3000);
	CHECK_EQ(tree_check(E.t), 0);
	CHECK_EQ(tenv_reopen(&E), true);
	CHECK_EQ(paste_btree_count(E.t), 3000);
	CHECK_EQ(tree_check(E.t), 0);
	tenv_finish(&E);
}

static void test_read_only(void)
{
	setup("readonly", PASTE_DUR_NONE);
	struct paste_extent v = val(0, 0, 10);
	CHECK_EQ(set_str(E.t, "a", &v, 1), 0);
	CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	CHECK_EQ(set_str(E.t, "b", &v, 1), 0);
	tenv_close(&E);
	struct paste_store *st = NULL;
	struct paste_wal *w = NULL;
	struct paste_btree *t = NULL;
	struct paste_error err = { 0 };
	CHECK_EQ(paste_store_open(&st, path, NULL, PASTE_STORE_RDONLY, &err), 0);
	CHECK_EQ(paste_wal_open(&w, st, NULL, &err), 0);
	CHECK_EQ(paste_btree_open(&t, st, w, NULL, NULL, &err), 0);
	if (t) {
		CHECK_EQ(paste_btree_count(t), 2);   /* "b" replayed into a private copy */
		CHECK_EQ(set_str(t, "c", &v, 1), -EROFS);
		CHECK_EQ(paste_btree_del(t, "a", 1, NULL), -EROFS);
		CHECK_EQ(paste_btree_checkpoint(t), -EROFS);
		CHECK_EQ(tree_check(t), 0);
	}
	paste_btree_close(t);
	paste_wal_close(w);
	paste_store_close(st);
	free(E.pool);
	E.pool = NULL;
	unlink(path);
}

/* A key's tag and word, and its value's CRC32C: kept through set, the
 * point index (which answers keys without a word), the leaf, a cursor, a
 * replay and a checkpoint; a value whose bytes change under the tree is
 * found by paste_btree_check. */
static void expect_attr(const char *k, uint8_t tag, bool has_word, uint64_t word, uint32_t vlen)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	struct paste_btree_attr a;
	uint32_t n, len;
	memset(&a, 0xee, sizeof(a));
	CHECK_EQ(paste_btree_lookup(E.t, k, (uint32_t)strlen(k), ext, &n, &len, &a), 0);
	CHECK_EQ(len, vlen);
	CHECK_EQ(a.tag, tag);
	CHECK_EQ(a.has_word, has_word);
	CHECK_EQ(a.word, has_word ? word : 0);
	if (a.has_crc) {
		uint32_t crc = 0;
		for (uint32_t i = 0; i < n; i++)
			crc = paste_crc32c(crc, paste_store_buf(E.st, ext[i].buf) + ext[i].off, ext[i].len);
		CHECK_EQ(a.crc, crc);
	}
}

static void test_attrs(void)
{
	setup("attrs", PASTE_DUR_EMULATED);
	struct paste_extent v[2] = { val(3, 5, 40), val(4, 0, 9) };
	struct paste_btree_attr plain = { 0 }, typed = { .tag = 7 },
				deadline = { .tag = 2, .has_word = true, .word = 0x0123456789abcdefull },
				bad = { .tag = PASTE_BTREE_TAG_MAX + 1 };
	CHECK_EQ(paste_btree_put(E.t, "plain", 5, v, 1, &plain, NULL), 0);
	CHECK_EQ(paste_btree_put(E.t, "typed", 5, v, 2, &typed, NULL), 0);
	CHECK_EQ(paste_btree_put(E.t, "deadline", 8, v + 1, 1, &deadline, NULL), 0);
	CHECK_EQ(paste_btree_put(E.t, "bad", 3, v, 1, &bad, NULL), -EINVAL);
	CHECK_EQ(set_str(E.t, "set", v, 1), 0);       /* paste_btree_set: tag 0, no word */
	for (int round = 0; round < 3; round++) {
		expect_attr("plain", 0, false, 0, 40);
		expect_attr("typed", 7, false, 0, 49);
		expect_attr("deadline", 2, true, deadline.word, 9);
		expect_attr("set", 0, false, 0, 40);
		struct paste_btree_cursor c;
		paste_btree_cursor_init(&c, E.t, "deadline", 8);
		const uint8_t *key;
		uint32_t klen;
		CHECK_EQ(paste_btree_cursor_next(&c, &key, &klen, NULL, NULL, NULL), 1);
		const struct paste_btree_attr *ca = paste_btree_cursor_attr(&c);
		CHECK(ca->tag == 2 && ca->has_word && ca->word == deadline.word && ca->has_crc);
		CHECK_EQ(paste_btree_cursor_next(&c, &key, &klen, NULL, NULL, NULL), 1);
		CHECK(klen == 5 && memcmp(key, "plain", 5) == 0 && paste_btree_cursor_attr(&c)->tag == 0);
		CHECK_EQ(tree_check(E.t), 0);
		if (round == 0)
			CHECK(tenv_reopen(&E));                 /* replayed from the log */
		else if (round == 1) {
			CHECK_EQ(paste_btree_checkpoint(E.t), 0);
			CHECK(tenv_reopen(&E));                 /* from the checkpoint's leaves */
		}
	}
	/* An overwrite replaces the word too; a plain set drops it. */
	CHECK_EQ(paste_btree_set(E.t, "deadline", 8, v, 1, NULL), 0);
	expect_attr("deadline", 0, false, 0, 40);
	/* One byte of a value changed under the tree: check names the key. */
	struct paste_error err = { 0 };
	uint8_t *b = paste_store_buf(E.st, v[1].buf) + v[1].off;
	b[3] ^= 0x40;
	CHECK(paste_btree_check(E.t, &err) > 0);
	CHECK(strstr(err.msg, "\"typed\"") != NULL && strstr(err.msg, "CRC32C") != NULL);
	b[3] ^= 0x40;
	CHECK_EQ(tree_check(E.t), 0);
	tenv_finish(&E);
}

/* A range delete: one record for up to PASTE_BTREE_RANGE_MAX keys in
 * [lo, hi), across leaves, replayed the same way; a longer range is
 * refused whole. */
static bool has_key(uint32_t i)
{
	char k[16];
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	snprintf(k, sizeof(k), "r%05u", i);
	return paste_btree_get(E.t, k, (uint32_t)strlen(k), ext, &n, &len) == 0;
}

static void test_delrange(void)
{
	setup("delrange", PASTE_DUR_EMULATED);
	struct paste_extent v = val(1, 0, 300);
	char k[16];
	for (uint32_t i = 0; i < 2000; i++) {
		snprintf(k, sizeof(k), "r%05u", i);
		CHECK_EQ(set_str(E.t, k, &v, 1), 0);
	}
	uint64_t del = 99, lsn = 0;
	CHECK_EQ(paste_btree_delrange(E.t, "r00100", 6, "r00400", 6, &del, NULL), -E2BIG);
	CHECK(has_key(100) && has_key(399));
	CHECK_EQ(paste_btree_delrange(E.t, "r00100", 6, "r00356", 6, &del, &lsn), 0);
	CHECK_EQ(del, 256);
	CHECK(lsn > 0);
	CHECK(has_key(99) && !has_key(100) && !has_key(355) && has_key(356));
	CHECK_EQ(paste_btree_delrange(E.t, "r00100", 6, "r00356", 6, &del, &lsn), 0);
	CHECK_EQ(del, 0);                                   /* nothing: no record */
	CHECK_EQ(paste_btree_delrange(E.t, "r01800", 6, NULL, 0, &del, NULL), 0);   /* to the end */
	CHECK_EQ(del, 200);
	CHECK_EQ(paste_btree_delrange(E.t, "q", 1, "r00010", 6, &del, NULL), 0);    /* from before */
	CHECK_EQ(del, 10);
	CHECK_EQ(paste_btree_count(E.t), 2000 - 256 - 200 - 10);
	CHECK_EQ(tree_check(E.t), 0);
	CHECK(tenv_reopen(&E));                             /* replayed */
	CHECK_EQ(paste_btree_count(E.t), 2000 - 256 - 200 - 10);
	CHECK(has_key(10) && !has_key(9) && !has_key(200) && has_key(1799) && !has_key(1800));
	CHECK_EQ(tree_check(E.t), 0);
	paste_persist_fence(E.p);
	paste_btree_maintain(E.t);
	CHECK_EQ(audit_refs(&E), 0);
	tenv_finish(&E);
}

/* A range's record keeps its header and both bounds in one buffer: bounds
 * that do not fit are refused before anything is written, and the
 * buffers around stay as they were. */
static void test_delrange_bounds(void)
{
	memset(&E, 0, sizeof(E));
	E.scfg = (struct paste_store_config){ .size = 8u << 20, .buf_size = 512, .log_lanes = 2,
					      .node_size = 2u << 20 };
	E.mode = PASTE_DUR_EMULATED;
	E.npool = 64;
	tenv_start(&E, "delrange-bounds");
	struct paste_extent v = val(1, 0, 100);
	char k[16];
	for (uint32_t i = 0; i < 50; i++) {
		snprintf(k, sizeof(k), "m%05u", i);
		CHECK_EQ(set_str(E.t, k, &v, 1), 0);
	}
	uint8_t lo[256], hi[256];
	memset(lo, 'a', sizeof(lo));
	memset(hi, 'z', sizeof(hi));
	uint64_t del = 99;
	CHECK_EQ(paste_btree_delrange(E.t, lo, 250, hi, 250, &del, NULL), -ENAMETOOLONG);
	CHECK_EQ(del, 0);
	CHECK_EQ(paste_btree_count(E.t), 50);
	for (uint32_t i = 0; i < E.npool; i++) {
		const uint8_t *b = paste_store_buf(E.st, E.pool[i]);
		for (uint32_t j = 0; j < 512; j++)
			CHECK_EQ(b[j], (uint8_t)(i * 31u + j));
	}
	/* Exactly one buffer: taken. */
	CHECK_EQ(paste_btree_delrange(E.t, lo, 246, hi, 246, &del, NULL), 0);
	CHECK_EQ(del, 50);
	CHECK_EQ(tree_check(E.t), 0);
	CHECK(tenv_reopen(&E));
	CHECK_EQ(paste_btree_count(E.t), 0);
	tenv_finish(&E);
}

int main(void)
{
	make_dir("btree");
	test_basics();
	test_key_sizes();
	test_key_bytes();
	test_splits_merges();
	test_cursors();
	test_cursor_prev_skip();
	test_cursor_sample();
	test_release_when_durable();
	test_fsync_commit_in_flight();
	test_fsync_private_pages();
	test_read_only();
	test_attrs();
	test_delrange();
	test_delrange_bounds();
	rmdir(dir);
	return check_done();
}
