/* test_kv_zset.c - sets and sorted sets over the typed core
 * (services/kv_set.c, kv_zset.c): score keys that sort as the doubles
 * do; members added, rescored and removed with both entries of a sorted
 * set and the record's count agreeing; ranks, counts and walks by rank,
 * score and member, forward and back, against a model; a batch cut off
 * before its commit gone after a reopen; long members (named by a digest)
 * in both entries; a member held where it landed (zero copy); sets;
 * collections written whole under a grave; uniform distinct draws; a
 * pop's delete that searches the tree once. */
#include <errno.h>
#include <math.h>

#include "kv_fixture.h"
#include "cmd_set.h"
#include "kv_zset.h"
#include "pkvs_resp.h"

static struct kenv E;

static int open_or_new(struct kv_cset *s, const char *key, enum kv_type type)
{
	key_of(&E, &s->key, 0, key);
	int r = kv_cset_open(E.kv, s, type, false);
	if (r == -ENOENT)
		kv_cset_new(E.kv, s, type);
	return r;
}

static struct kv_name name_of(const void *p, size_t len)
{
	return (struct kv_name){ p, len, NULL };
}

static int zset(struct kv_cset *s, const char *m, double d)
{
	struct kv_name nm = name_of(m, strlen(m));
	double was;
	bool had = kv_zset_score(E.kv, s, m, strlen(m), &was) == 0;
	return kv_zset_set(E.kv, s, &nm, d, had, was);
}

/* Entries of kind of collection id. */
static uint64_t entries(uint64_t id, uint8_t kind)
{
	uint8_t p[10];
	kv_member_prefix(p, id, kind);
	return tree_count(&E, p, sizeof(p));
}

/* The record's count, both entry kinds, and every member's score entry
 * agreeing with its member entry. */
static void check_zset(const char *key, uint64_t want)
{
	struct kv_cset s;
	if (want == 0) {
		CHECK(open_or_new(&s, key, KV_ZSET) == -ENOENT);
		return;
	}
	CHECK_EQ(open_or_new(&s, key, KV_ZSET), 0);
	CHECK_EQ(s.o.coll.count, want);
	CHECK_EQ(entries(s.o.coll.id, KV_ZSET_MEMBER), want);
	CHECK_EQ(entries(s.o.coll.id, KV_ZSET_SCORE), want);
	struct kv_cwalk w;
	kv_zwalk_score(E.kv, &w, &s, false, NULL, false);
	double prev = -INFINITY;
	uint64_t bad = 0;
	while (kv_cwalk_next(E.kv, &w) == 1) {
		double d = kv_zwalk_scoreof(&w), m;
		bad += kv_zset_score(E.kv, &s, w.name, w.nlen, &m) != 0 || m != d || d < prev;
		prev = d;
	}
	CHECK_EQ(bad, 0);
}

/* ---- score keys ---------------------------------------------------------- */

static int cmp_key(const double *a, const double *b)
{
	uint8_t x[KV_ZSCORE], y[KV_ZSCORE];
	kv_zscore_put(x, *a);
	kv_zscore_put(y, *b);
	return memcmp(x, y, KV_ZSCORE);
}

static void test_score_keys(void)
{
	double v[] = { -INFINITY, -1e308, -1.5, -1, -4.9e-324, -0.0, 0, 4.9e-324, 1e-300, 0.1, 1,
		       1.1, 2, 1e17, 1e308, INFINITY };
	size_t n = sizeof(v) / sizeof(v[0]);
	for (size_t i = 0; i < n; i++) {
		uint8_t k[KV_ZSCORE], a[KV_ZSCORE];
		kv_zscore_put(k, v[i]);
		double back = kv_zscore_get(k);
		CHECK(back == v[i]);
		CHECK(!signbit(back) || v[i] != 0);       /* -0 is kept as 0 */
		kv_zscore_after(a, v[i]);
		CHECK(memcmp(a, k, KV_ZSCORE) > 0);
		for (size_t j = 0; j < n; j++) {
			int c = cmp_key(&v[i], &v[j]);
			int want = v[i] < v[j] ? -1 : v[i] > v[j];
			CHECK_EQ(c < 0 ? -1 : c > 0, want);
			if (v[j] > v[i]) {               /* after(d) <= every larger score's key */
				uint8_t kj[KV_ZSCORE];
				kv_zscore_put(kj, v[j]);
				CHECK(memcmp(a, kj, KV_ZSCORE) <= 0);
			}
		}
	}
	/* random doubles: the keys' byte order is the doubles' order */
	uint64_t s = 7, bad = 0;
	for (int i = 0; i < 100000; i++) {
		uint64_t bits[2];
		double d[2];
		for (int j = 0; j < 2; j++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			bits[j] = s;
			memcpy(&d[j], &bits[j], 8);
			if (isnan(d[j]))
				d[j] = 0;
		}
		int c = cmp_key(&d[0], &d[1]);
		int want = d[0] < d[1] ? -1 : d[0] > d[1];
		bad += (c < 0 ? -1 : c > 0) != want;
	}
	CHECK_EQ(bad, 0);
}

/* ---- members ------------------------------------------------------------- */

static void test_members(void)
{
	kenv_start(&E, "members", 64u << 20, 2048);
	struct kv_cset s;
	CHECK_EQ(open_or_new(&s, "z", KV_ZSET), -ENOENT);
	CHECK_EQ(zset(&s, "a", 1), 0);
	CHECK_EQ(zset(&s, "b", 2), 0);
	CHECK_EQ(zset(&s, "c", -0.0), 0);
	check_zset("z", 3);
	double d;
	CHECK_EQ(kv_zset_score(E.kv, &s, "c", 1, &d), 0);
	CHECK(d == 0 && !signbit(d));
	/* a new score: the old score entry goes, the count stays */
	CHECK_EQ(zset(&s, "a", 5), 0);
	CHECK_EQ(kv_zset_score(E.kv, &s, "a", 1, &d), 0);
	CHECK(d == 5);
	check_zset("z", 3);
	CHECK_EQ(kv_zset_rank(E.kv, &s, "c", 1, 0), 0);
	CHECK_EQ(kv_zset_rank(E.kv, &s, "b", 1, 2), 1);
	CHECK_EQ(kv_zset_rank(E.kv, &s, "a", 1, 5), 2);
	CHECK_EQ(kv_zset_rem(E.kv, &s, "b", 1), 1);
	CHECK_EQ(kv_zset_rem(E.kv, &s, "b", 1), 0);
	CHECK_EQ(kv_zset_score(E.kv, &s, "b", 1, &d), -ENOENT);
	check_zset("z", 2);
	/* the last member takes the key; its entries go with the grave */
	uint64_t id = s.o.coll.id;
	CHECK_EQ(kv_zset_rem(E.kv, &s, "a", 1), 1);
	CHECK_EQ(kv_zset_rem(E.kv, &s, "c", 1), 1);
	check_zset("z", 0);
	CHECK(absent(&E, 0, "z"));
	kv_sweep_step(E.kv, 100);
	CHECK_EQ(entries(id, KV_ZSET_MEMBER) + entries(id, KV_ZSET_SCORE), 0);
	/* a member added after: a new sorted set */
	CHECK_EQ(zset(&s, "x", 1), 0);
	CHECK(s.o.coll.id != id);
	check_zset("z", 1);
	CHECK(kenv_reopen(&E));
	check_zset("z", 1);
	check_counts(&E);
	kenv_finish(&E);
}

/* A pop: the walk finds the lowest member's score entry and the delete
 * removes that entry first, on the walk's path, so of the two entries
 * only the member entry (whose hint a checkpoint made stale) searches
 * the tree. */
static void test_pop_searches(void)
{
	kenv_start(&E, "pop-searches", 64u << 20, 2048);
	struct kv_cset s;
	CHECK_EQ(open_or_new(&s, "q", KV_ZSET), -ENOENT);
	char m[32];
	for (int i = 0; i < 3000; i++) {
		snprintf(m, sizeof(m), "member:%06d", i);
		CHECK_EQ(zset(&s, m, i % 977), 0);
	}
	struct paste_btree_info bi;
	for (int i = 0; i < 50; i++) {
		CHECK_EQ(paste_btree_checkpoint(E.kv->tree), 0);
		CHECK_EQ(kv_cset_begin(E.kv, &s, 0), 0);   /* the record is saved at the end */
		struct kv_cwalk w;
		kv_zwalk_score(E.kv, &w, &s, false, NULL, false);
		CHECK_EQ(kv_cwalk_next(E.kv, &w), 1);
		double d = kv_zwalk_scoreof(&w);
		char name[32];
		memcpy(name, w.name, w.nlen);
		paste_btree_info(E.kv->tree, &bi);
		uint64_t before = bi.descents;
		CHECK_EQ(kv_zset_del(E.kv, &s, name, w.nlen, d), 0);
		paste_btree_info(E.kv->tree, &bi);
		CHECK_EQ(bi.descents - before, 1);
		CHECK_EQ(kv_cset_end(E.kv, &s, 0), 0);
	}
	check_zset("q", 2950);
	kenv_finish(&E);
}

/* A model of n members with random scores (some equal): ranks, walks by
 * rank both ways, by score with open and closed bounds, counts. */
struct mem {
	char name[16];
	double score;
};

static int mem_cmp(const void *pa, const void *pb)
{
	const struct mem *a = pa, *b = pb;
	if (a->score != b->score)
		return a->score < b->score ? -1 : 1;
	return strcmp(a->name, b->name);
}

static void test_order(void)
{
	kenv_start(&E, "order", 128u << 20, 2048);
	enum { N = 3000 };
	static struct mem m[N];
	struct kv_cset s;
	open_or_new(&s, "z", KV_ZSET);
	uint64_t seed = 11;
	CHECK_EQ(kv_cset_begin(E.kv, &s, 0), 0);
	for (int i = 0; i < N; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		snprintf(m[i].name, sizeof(m[i].name), "m%05d", i);
		m[i].score = (double)((int64_t)(seed >> 33) % 500) / 4.0;   /* many equal scores */
		CHECK_EQ(zset(&s, m[i].name, m[i].score), 0);
	}
	CHECK_EQ(kv_cset_end(E.kv, &s, 0), 0);
	qsort(m, N, sizeof(m[0]), mem_cmp);
	check_zset("z", N);
	uint64_t bad = 0;
	for (int i = 0; i < N; i += 7)
		bad += kv_zset_rank(E.kv, &s, m[i].name, strlen(m[i].name), m[i].score) != (uint64_t)i;
	CHECK_EQ(bad, 0);
	struct kv_cwalk w;
	for (int i = 0; i < N; i += 97) {
		kv_zwalk_rank(E.kv, &w, &s, false, (uint64_t)i);
		for (int j = i; j < i + 5 && j < N; j++) {
			CHECK_EQ(kv_cwalk_next(E.kv, &w), 1);
			CHECK(w.nlen == strlen(m[j].name) && !memcmp(w.name, m[j].name, w.nlen));
		}
		kv_zwalk_rank(E.kv, &w, &s, true, (uint64_t)i);
		for (int j = i; j > i - 5 && j >= 0; j--) {
			CHECK_EQ(kv_cwalk_next(E.kv, &w), 1);
			CHECK(w.nlen == strlen(m[j].name) && !memcmp(w.name, m[j].name, w.nlen));
			CHECK(kv_zwalk_scoreof(&w) == m[j].score);
		}
	}
	/* by score: the first member of score >= / > d forward, the last
	 * of <= / < d back */
	for (double d = -1; d <= 126; d += 0.75) {
		for (int after = 0; after < 2; after++) {
			int lo = 0;
			while (lo < N && (after ? m[lo].score <= d : m[lo].score < d))
				lo++;
			kv_zwalk_score(E.kv, &w, &s, false, &d, after);
			int got = kv_cwalk_next(E.kv, &w);
			CHECK_EQ(got, lo < N);
			if (got == 1 && lo < N)
				CHECK(!strncmp((const char *)w.name, m[lo].name, w.nlen));
			int hi = N - 1;
			while (hi >= 0 && (after ? m[hi].score >= d : m[hi].score > d))
				hi--;
			kv_zwalk_score(E.kv, &w, &s, true, &d, after);
			got = kv_cwalk_next(E.kv, &w);
			CHECK_EQ(got, hi >= 0);
			if (got == 1 && hi >= 0)
				CHECK(!strncmp((const char *)w.name, m[hi].name, w.nlen));
			/* a count of [lo, end of d's scores) by skipping leaves */
			kv_zwalk_score(E.kv, &w, &s, false, &d, after);
			uint8_t end[KV_ZSCORE];
			kv_zscore_after(end, d + 10);
			int want = 0;
			for (int i = lo; i < N && m[i].score <= d + 10; i++)
				want++;
			CHECK_EQ(kv_cwalk_skip(&w, UINT64_MAX, end, sizeof(end)), want);
		}
	}
	/* members of one score, by member bytes */
	double one = m[N / 2].score;
	int first = N / 2;
	while (first > 0 && m[first - 1].score == one)
		first--;
	kv_zwalk_lex(E.kv, &w, &s, false, one, m[first + 1].name, strlen(m[first + 1].name), false);
	CHECK_EQ(kv_cwalk_next(E.kv, &w), 1);
	CHECK(!memcmp(w.name, m[first + 1].name, w.nlen));
	kv_zwalk_lex(E.kv, &w, &s, false, one, m[first + 1].name, strlen(m[first + 1].name), true);
	CHECK_EQ(kv_cwalk_next(E.kv, &w), 1);
	CHECK(!memcmp(w.name, m[first + 2].name, w.nlen) || m[first + 2].score != one);
	kv_zwalk_lex(E.kv, &w, &s, true, one, m[first + 1].name, strlen(m[first + 1].name), true);
	CHECK_EQ(kv_cwalk_next(E.kv, &w), 1);
	CHECK(!memcmp(w.name, m[first].name, w.nlen));
	kenv_finish(&E);
}

/* A change of several members cut off before its COMMIT: none of it. */
static void test_cut_batch(void)
{
	kenv_start(&E, "cut", 64u << 20, 2048);
	struct kv_cset s;
	open_or_new(&s, "z", KV_ZSET);
	CHECK_EQ(zset(&s, "a", 1), 0);
	CHECK_EQ(zset(&s, "b", 2), 0);
	kenv_settle(&E);
	CHECK_EQ(kv_cset_begin(E.kv, &s, 0), 0);
	CHECK_EQ(zset(&s, "c", 3), 0);
	CHECK_EQ(zset(&s, "a", 10), 0);
	CHECK_EQ(kv_zset_rem(E.kv, &s, "b", 1), 1);
	s.batch = 1;
	CHECK_EQ(kv_coll_save(E.kv, &s.key, &s.o), 0);
	kenv_settle(&E);
	kv_close(E.kv);                  /* no COMMIT: a crash here */
	E.kv = NULL;
	paste_persist_close(E.p);
	paste_store_close(E.st);
	CHECK(kenv_open(&E));
	check_zset("z", 2);
	CHECK_EQ(open_or_new(&s, "z", KV_ZSET), 0);
	double d;
	CHECK(kv_zset_score(E.kv, &s, "a", 1, &d) == 0 && d == 1);
	CHECK(kv_zset_score(E.kv, &s, "b", 1, &d) == 0 && d == 2);
	CHECK_EQ(kv_zset_score(E.kv, &s, "c", 1, &d), -ENOENT);
	check_counts(&E);
	kenv_finish(&E);
}

static void fill_bytes(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* Members over 400 bytes: named by a digest in both entries, read back
 * whole; two that share their first 375 bytes are two. */
static void test_long_members(void)
{
	kenv_start(&E, "long", 64u << 20, 2048);
	struct kv_cset s;
	open_or_new(&s, "z", KV_ZSET);
	size_t lens[] = { 392, 393, 400, 401, 1000, 5000, 60000, 0 };
	lens[7] = kv_max_key(E.kv) - KV_ZSCORE;
	uint8_t *a = malloc(lens[7] + 1);
	fill_bytes(a, lens[7] + 1, 3);
	uint64_t want = 0;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		for (int v = 0; v < 2; v++) {
			a[lens[i] - 1] ^= (uint8_t)(0x55 * v);
			struct kv_name nm = name_of(a, lens[i]);
			CHECK_EQ(kv_zset_set(E.kv, &s, &nm, (double)i, false, 0), 0);
			a[lens[i] - 1] ^= (uint8_t)(0x55 * v);
			want++;
		}
	}
	check_zset("z", want);
	/* the walks give every member whole, in score order */
	struct kv_cwalk w;
	kv_zwalk_score(E.kv, &w, &s, false, NULL, false);
	uint64_t seen = 0;
	double prev = -1;
	while (kv_cwalk_next(E.kv, &w) == 1) {
		seen++;
		double d = kv_zwalk_scoreof(&w);
		CHECK(d >= prev && w.nlen == lens[(size_t)d]);
		CHECK(!memcmp(w.name, a, w.nlen - 1));
		prev = d;
	}
	CHECK_EQ(seen, want);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		double d;
		CHECK(kv_zset_score(E.kv, &s, a, lens[i], &d) == 0 && d == (double)i);
		CHECK_EQ(kv_zset_rank(E.kv, &s, a, lens[i], d) / 2, i);
	}
	CHECK_EQ(kv_zset_rem(E.kv, &s, a, lens[5]), 1);
	check_zset("z", want - 1);
	CHECK(kenv_reopen(&E));
	check_zset("z", want - 1);
	free(a);
	kenv_finish(&E);
}

/* A long member held where it landed: its bytes stay in that buffer,
 * which both of a sorted set's entries name (no copy), and read back
 * whole after a reopen. */
static void test_held(void)
{
	kenv_start(&E, "held", 64u << 20, 2048);
	uint32_t buf;
	CHECK_EQ(paste_store_alloc(E.st, &buf, 1), 1);
	uint8_t *p = paste_store_buf(E.st, buf);
	fill_bytes(p, 1500, 9);
	struct paste_body b = { .n = 1, .len = 1500 };
	b.ext[0] = (struct paste_extent){ buf, 0, 1500 };
	struct kv_name nm = { p, 1500, &b };
	struct kv_cset s, t;
	open_or_new(&s, "z", KV_ZSET);
	CHECK_EQ(paste_store_refcount(E.st, buf), 1);
	CHECK_EQ(kv_zset_set(E.kv, &s, &nm, 7, false, 0), 0);
	/* the member entry, the score entry, and their log records */
	CHECK_EQ(paste_store_refcount(E.st, buf), 5);
	open_or_new(&t, "s", KV_SET);
	CHECK_EQ(kv_set_add(E.kv, &t, &nm), 1);
	CHECK_EQ(kv_set_add(E.kv, &t, &nm), 0);
	CHECK_EQ(paste_store_refcount(E.st, buf), 7);
	paste_store_unref(E.st, buf, false);
	uint8_t want[1500];
	fill_bytes(want, sizeof(want), 9);
	CHECK(kenv_reopen(&E));
	check_zset("z", 1);
	CHECK_EQ(open_or_new(&s, "z", KV_ZSET), 0);
	double d;
	CHECK(kv_zset_score(E.kv, &s, want, sizeof(want), &d) == 0 && d == 7);
	struct kv_cwalk w;
	kv_zwalk_score(E.kv, &w, &s, false, NULL, false);
	CHECK_EQ(kv_cwalk_next(E.kv, &w), 1);
	CHECK(w.nlen == sizeof(want) && !memcmp(w.name, want, sizeof(want)));
	CHECK_EQ(open_or_new(&t, "s", KV_SET), 0);
	CHECK(kv_set_has(E.kv, &t, want, sizeof(want)));
	kenv_finish(&E);
}

/* ---- sets ---------------------------------------------------------------- */

static void test_sets(void)
{
	kenv_start(&E, "sets", 64u << 20, 2048);
	struct kv_cset s;
	open_or_new(&s, "s", KV_SET);
	const char *m[] = { "3", "1", "-7", "20" };
	for (int i = 0; i < 4; i++) {
		struct kv_name nm = name_of(m[i], strlen(m[i]));
		CHECK_EQ(kv_set_add(E.kv, &s, &nm), 1);
		CHECK_EQ(kv_set_add(E.kv, &s, &nm), 0);
	}
	CHECK_EQ(s.o.coll.count, 4);
	CHECK(kv_set_has(E.kv, &s, "20", 2) && !kv_set_has(E.kv, &s, "2", 1));
	CHECK(kv_set_intset(E.kv, &s.o, 512));
	CHECK(!kv_set_intset(E.kv, &s.o, 3));
	struct kv_name x = name_of("x", 1);
	CHECK_EQ(kv_set_add(E.kv, &s, &x), 1);
	CHECK(!kv_set_intset(E.kv, &s.o, 512));
	CHECK_EQ(kv_set_rem(E.kv, &s, "x", 1), 1);
	CHECK_EQ(kv_set_rem(E.kv, &s, "x", 1), 0);
	/* wrong type */
	struct kv_cset z;
	key_of(&E, &z.key, 0, "s");
	CHECK_EQ(kv_cset_open(E.kv, &z, KV_ZSET, false), -EMEDIUMTYPE);
	CHECK_EQ(entries(s.o.coll.id, KV_SET_MEMBER), 4);
	CHECK(kenv_reopen(&E));
	CHECK_EQ(open_or_new(&s, "s", KV_SET), 0);
	CHECK_EQ(s.o.coll.count, 4);
	check_counts(&E);
	kenv_finish(&E);
}

/* A collection written whole: under the key in one group at the end; a
 * failure (or a crash) part way leaves the members to the sweeper and
 * the key as it was. */
static void test_build(void)
{
	kenv_start(&E, "build", 64u << 20, 2048);
	CHECK_EQ(put_str(&E, 0, "dst", "old", KV_NO_TTL), 0);
	struct kv_cbuild b;
	struct kv_key k;
	key_of(&E, &k, 0, "dst");
	CHECK_EQ(kv_cbuild_begin(E.kv, &b, KV_ZSET), 0);
	char name[16];
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "m%03d", i);
		CHECK_EQ(kv_zbuild_add(E.kv, &b, name, strlen(name), i * 0.5), 0);
	}
	uint64_t id = b.o.coll.id;
	CHECK_EQ(kv_cbuild_end(E.kv, &b, &k, -EIO), -EIO);     /* given up */
	CHECK(has_str(&E, 0, "dst", "old"));
	for (int i = 0; i < 4; i++)
		kv_sweep_step(E.kv, 100);
	CHECK_EQ(entries(id, KV_ZSET_MEMBER) + entries(id, KV_ZSET_SCORE), 0);
	CHECK_EQ(kv_cbuild_begin(E.kv, &b, KV_ZSET), 0);
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "m%03d", i);
		CHECK_EQ(kv_zbuild_add(E.kv, &b, name, strlen(name), i * 0.5), 0);
	}
	CHECK_EQ(kv_cbuild_end(E.kv, &b, &k, 0), 0);
	check_zset("dst", 100);
	uint8_t g[16];
	uint32_t glen = kv_grave_key(g, KV_GRAVE_COLL, b.o.coll.id);
	CHECK_EQ(tree_count(&E, g, glen), 0);
	/* an empty result removes the key */
	CHECK_EQ(kv_cbuild_begin(E.kv, &b, KV_SET), 0);
	CHECK_EQ(kv_cbuild_end(E.kv, &b, &k, 0), 0);
	CHECK(absent(&E, 0, "dst"));
	check_counts(&E);
	kenv_finish(&E);
}

/* A large removal written as a rebuild: the kept members under a new id,
 * the old ones swept, the deadline kept; a set by skipped positions. */
static void test_rebuild(void)
{
	kenv_start(&E, "rebuild", 64u << 20, 2048);
	struct kv_cset s;
	open_or_new(&s, "z", KV_ZSET);
	char name[16];
	CHECK_EQ(kv_cset_begin(E.kv, &s, 0), 0);
	for (int i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "m%03d", i);
		CHECK_EQ(zset(&s, name, 100 - i), 0);     /* order: m099 (score 1) .. m000 */
	}
	CHECK_EQ(kv_cset_end(E.kv, &s, 0), 0);
	kv_clock(E.kv);
	CHECK_EQ(open_or_new(&s, "z", KV_ZSET), 0);              /* the record as the key holds it */
	CHECK_EQ(kv_set_expire(E.kv, &s.key, &s.o, E.kv->now_ms + 100000), 0);
	CHECK_EQ(open_or_new(&s, "z", KV_ZSET), 0);
	uint64_t old = s.o.coll.id;
	CHECK_EQ(kv_cset_rebuild(E.kv, &s, 10, 90, NULL, 0), 0);    /* keep ranks 0-9, 90-99 */
	CHECK(s.o.coll.id != old);
	check_zset("z", 20);
	CHECK_EQ(open_or_new(&s, "z", KV_ZSET), 0);
	CHECK(s.o.expire_ms != KV_NO_TTL);
	double d;
	CHECK(kv_zset_score(E.kv, &s, "m099", 4, &d) == 0 && d == 1);
	CHECK(kv_zset_score(E.kv, &s, "m000", 4, &d) == 0 && d == 100);
	CHECK_EQ(kv_zset_score(E.kv, &s, "m050", 4, &d), -ENOENT);
	for (int i = 0; i < 4; i++)
		kv_sweep_step(E.kv, 100);
	CHECK_EQ(entries(old, KV_ZSET_MEMBER) + entries(old, KV_ZSET_SCORE), 0);
	/* a set: positions 1 and 3 of a, b, c, d, e go */
	struct kv_cset t;
	open_or_new(&t, "s", KV_SET);
	const char *m[] = { "a", "b", "c", "d", "e" };
	for (int i = 0; i < 5; i++) {
		struct kv_name nm = name_of(m[i], 1);
		CHECK_EQ(kv_set_add(E.kv, &t, &nm), 1);
	}
	uint64_t skip[] = { 1, 3 };
	CHECK_EQ(kv_cset_rebuild(E.kv, &t, 0, 0, skip, 2), 0);
	CHECK_EQ(t.o.coll.count, 3);
	CHECK(kv_set_has(E.kv, &t, "a", 1) && !kv_set_has(E.kv, &t, "b", 1) &&
	      kv_set_has(E.kv, &t, "c", 1) && !kv_set_has(E.kv, &t, "d", 1) && kv_set_has(E.kv, &t, "e", 1));
	CHECK(kenv_reopen(&E));
	check_zset("z", 20);
	check_counts(&E);
	kenv_finish(&E);
}

/* Distinct draws: k of n, increasing, each index as often as another. */
static void test_draws(void)
{
	uint64_t n = 10, hits[10] = { 0 }, out[10];
	for (int round = 0; round < 20000; round++) {
		uint64_t k = 1 + (uint64_t)round % 9;
		CHECK_EQ(kv_rand_distinct(n, k, out), 0);
		for (uint64_t i = 0; i < k; i++) {
			CHECK(out[i] < n && (i == 0 || out[i] > out[i - 1]));
			hits[out[i]]++;
		}
	}
	double total = 0, chi = 0;
	for (int i = 0; i < 10; i++)
		total += (double)hits[i];
	for (int i = 0; i < 10; i++)
		chi += ((double)hits[i] - total / 10) * ((double)hits[i] - total / 10) / (total / 10);
	CHECK(chi < 40);                 /* 9 degrees of freedom: p ~ 1e-5 */
	uint64_t below[7] = { 0 };
	for (int i = 0; i < 70000; i++)
		below[kv_rand_below(7)]++;
	for (int i = 0; i < 7; i++)
		CHECK(below[i] > 9000 && below[i] < 11000);
}

/* A score's reply text is what "%.17g" prints (Redis's addReplyDouble),
 * integers included, and with listpack Redis's d2string ("%lld" for an
 * integer). */
static void test_score_text(void)
{
	static const double fixed[] = { 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e16, -1e16, 99999999999999984.0,
					1e17, -1e17, 1e18, 123456789012345678.0, 4503599627370496.5,
					9007199254740993.0, 1e-5, 3.0e-300, 1.7976931348623157e308 };
	uint32_t bad = 0;
	srand(11);
	for (uint32_t i = 0; i < 20000; i++) {
		double d;
		if (i < sizeof(fixed) / sizeof(fixed[0]))
			d = fixed[i];
		else if (i % 3 == 0)
			d = (double)((long long)rand() * rand() - (long long)rand() * rand());
		else if (i % 3 == 1)
			d = ldexp((double)rand(), rand() % 120 - 30) * (rand() % 2 ? 1 : -1);
		else
			d = (double)rand() / 7.0;
		char got[64], want[64];
		kv_zscore_str(got, sizeof(got), d, false);
		snprintf(want, sizeof(want), "%.17g", d);
		bad += strcmp(got, want) != 0;
		if (d == floor(d) && fabs(d) <= 4e18) {
			kv_zscore_str(got, sizeof(got), d, true);
			snprintf(want, sizeof(want), "%lld", (long long)d);
			bad += strcmp(got, want) != 0;
		}
	}
	CHECK_EQ(bad, 0);
}

/* kv_zscore_arg reads a score as strtod does, under Redis's rules (no
 * leading blank, all of it, no NaN, no overflow): integers of up to 15
 * digits take a path without strtod, which must agree to the bit. */
static bool score_ref(const char *s, size_t len, double *d)
{
	char *end;
	errno = 0;
	*d = strtod(s, &end);
	return len && !(s[0] == ' ' || (s[0] >= '\t' && s[0] <= '\r')) && (size_t)(end - s) == len &&
	       !(errno == ERANGE && (*d == HUGE_VAL || *d == -HUGE_VAL || *d == 0)) && !isnan(*d);
}

static void test_score_arg(void)
{
	static const char *const fixed[] = { "", "-", "+", "0", "-0", "+0", "007", "-007", "1e5", "12.5",
					     " 1", "1 ", "1x", "999999999999999", "-999999999999999",
					     "9999999999999999", "+123456789012345", "1234567890123456",
					     "0x10", "inf", "-inf", "nan", "1e400", "--1", "+-1" };
	uint32_t bad = 0, n = 0;
	char s[40];
	srand(13);
	for (uint32_t i = 0; i < 60000; i++) {
		if (i < sizeof(fixed) / sizeof(fixed[0])) {
			snprintf(s, sizeof(s), "%s", fixed[i]);
		} else {   /* a sign or none, then 1 to 17 digits, leading zeros too */
			size_t k = 0, nd = 1 + (size_t)rand() % 17;
			int sign = rand() % 4;
			if (sign == 1)
				s[k++] = '-';
			else if (sign == 2)
				s[k++] = '+';
			for (size_t j = 0; j < nd; j++)
				s[k++] = (char)('0' + (rand() % 10 < 2 ? 0 : rand() % 10));
			s[k] = 0;
		}
		double got = 0, want = 0;
		struct paste_resp_arg a = { s, strlen(s) };
		bool ok = kv_zscore_arg(&a, &got), ref = score_ref(s, strlen(s), &want);
		bad += ok != ref || (ok && memcmp(&got, &want, sizeof(got)) != 0);
		n += ok;
	}
	CHECK_EQ(bad, 0);
	CHECK(n > 50000);
}

int main(void)
{
	kv_make_dir("kvzset");
	test_score_text();
	test_score_arg();
	test_score_keys();
	test_members();
	test_pop_searches();
	test_order();
	test_cut_batch();
	test_long_members();
	test_held();
	test_sets();
	test_build();
	test_rebuild();
	test_draws();
	rmdir(kv_dir);
	return check_done();
}
