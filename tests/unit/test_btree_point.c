/* test_btree_point.c - the tree's DRAM point index (lib/btree_point.c):
 * lookups through it agree with the tree for keys on both sides of its
 * 32-byte limit and for values of 0, 1, 2 and 3 extents (2 is the most a
 * slot holds); it grows and survives deletes in the middle of probe runs;
 * clear empties it; it is rebuilt by recovery; it can be turned off; and
 * paste_btree_check compares it with the tree (so test_btree_model checks
 * it over millions of random operations); overwrites and deletes follow
 * the hints the slots keep, and a change of the entry a lookup or a
 * cursor just found starts from that descent. Out of memory for its table (at a growth, a
 * clear or the build at open) turns it off and lookups still agree.
 *
 * Allocation failures come from linking with -Wl,--wrap=mmap,--wrap=mmap64
 * (which of the two the library calls depends on _FILE_OFFSET_BITS): an
 * anonymous mapping fails while fail_anon is set. The index's table is
 * the library's only anonymous mapping; the store maps its file. */
#include <sys/mman.h>

#include "btree_fixture.h"

static struct tenv E;
static bool fail_anon;
static uint32_t anon_failed;

static bool fail_now(int flags)
{
	if (!fail_anon || !(flags & MAP_ANONYMOUS))
		return false;
	anon_failed++;
	errno = ENOMEM;
	return true;
}

void *__real_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off);
void *__wrap_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off);
void *__wrap_mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
	return fail_now(flags) ? MAP_FAILED : __real_mmap(a, n, prot, flags, fd, off);
}

void *__real_mmap64(void *a, size_t n, int prot, int flags, int fd, off_t off);
void *__wrap_mmap64(void *a, size_t n, int prot, int flags, int fd, off_t off);
void *__wrap_mmap64(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
	return fail_now(flags) ? MAP_FAILED : __real_mmap64(a, n, prot, flags, fd, off);
}

/* skip: the keys the point index leaves out (NULL: none). */
static void setup_skip(const char *name, bool no_index, bool (*skip)(const uint8_t *, uint32_t))
{
	memset(&E, 0, sizeof(E));
	E.scfg = (struct paste_store_config){ .size = 64u << 20, .buf_size = 2048, .log_lanes = 2,
					      .node_size = 16u << 20 };
	E.tcfg.no_point_index = no_index;
	E.tcfg.point_skip = skip;
	E.mode = PASTE_DUR_NONE;
	E.npool = 64;
	tenv_start(&E, name);
}

static void setup(const char *name, bool no_index)
{
	setup_skip(name, no_index, NULL);
}

/* Key i: length 4 + i % 57 (both sides of the 32-byte limit), unique:
 * its last 4 bytes are i's. */
static uint32_t key_len(uint32_t i)
{
	return 4 + i % 57;
}

/* Key i is short enough for the point index (32 bytes, BT_POINT_KEY). */
static bool indexed(uint32_t i)
{
	return key_len(i) <= 32;
}

static uint32_t key_of(uint32_t i, uint8_t *k)
{
	uint32_t len = key_len(i);
	memset(k, 'a' + (int)(i % 26), len);
	for (uint32_t b = 0; b < 4; b++)
		k[len - 1 - b] = (uint8_t)(i >> (8 * b));
	return len;
}

/* What each key should hold (the pool's buffers change at a reopen). */
struct want {
	bool present;
	uint32_t n;
	struct paste_extent v[3];
};

/* Value of key i in generation g: 0, 1, 2 or 3 extents. */
static uint32_t value_of(uint32_t i, uint32_t g, struct paste_extent *v)
{
	uint32_t n = (i + g) % 5 == 0 ? 0 : (i + g) % 5 == 1 ? 3 : (i + g) % 5 == 2 ? 2 : 1;
	for (uint32_t e = 0; e < n; e++)
		v[e] = (struct paste_extent){ E.pool[(i + e + g) % E.npool], (i + g) % 100, 1 + (i + e) % 900 };
	return n;
}

/* Every key < nkeys against want[]. Returns the disagreements. */
static uint32_t compare(uint32_t nkeys, const struct want *want)
{
	uint32_t bad = 0;
	for (uint32_t i = 0; i < nkeys; i++) {
		uint8_t k[64];
		uint32_t klen = key_of(i, k), n = 99, len = 99;
		struct paste_extent got[PASTE_BTREE_MAX_EXTENTS];
		int r = paste_btree_get(E.t, k, klen, got, &n, &len);
		if (!want[i].present) {
			bad += r != -ENOENT;
			continue;
		}
		uint32_t wl = 0;
		for (uint32_t e = 0; e < want[i].n; e++)
			wl += want[i].v[e].len;
		bad += r != 0 || n != want[i].n || len != wl ||
		       memcmp(got, want[i].v, sizeof(got[0]) * want[i].n) != 0;
	}
	return bad;
}

static uint64_t short_keys(uint32_t nkeys, const struct want *want)
{
	uint64_t c = 0;
	for (uint32_t i = 0; i < nkeys; i++)
		c += want[i].present && indexed(i);
	return c;
}

static void set_key(uint32_t i, uint32_t g, struct want *want)
{
	uint8_t k[64];
	uint32_t klen = key_of(i, k);
	want[i].present = true;
	want[i].n = value_of(i, g, want[i].v);
	CHECK_EQ(paste_btree_set(E.t, k, klen, want[i].v, want[i].n, NULL), 0);
}

/* Key i is there to delete, and then is not. */
static void del_key(uint32_t i, struct want *want)
{
	uint8_t k[64];
	uint32_t klen = key_of(i, k);
	CHECK_EQ(paste_btree_del(E.t, k, klen, NULL), 0);
	CHECK_EQ(paste_btree_del(E.t, k, klen, NULL), -ENOENT);
	want[i].present = false;
}

static void check_all(const char *when, uint32_t nkeys, const struct want *want, bool indexed)
{
	struct paste_btree_info bi;
	paste_btree_info(E.t, &bi);
	uint32_t bad = compare(nkeys, want);
	int chk = tree_check(E.t);
	if (bad || chk)
		fprintf(stderr, "  %s: %u lookups wrong, check %d\n", when, bad, chk);
	CHECK_EQ(bad, 0);
	CHECK_EQ(chk, 0);
	CHECK_EQ(bi.point_keys, indexed ? short_keys(nkeys, want) : 0);
	CHECK(indexed ? bi.point_bytes >= 64 * bi.point_keys * 4 / 3 : bi.point_bytes == 0);
}

/* The look ahead of key i (paste_btree_prefetch): a put after it loads
 * the leaf its slot names, whatever became of that slot and leaf. */
static void look_ahead(uint32_t i)
{
	uint8_t k[64];
	(void)paste_btree_prefetch(E.t, k, key_of(i, k));
}

/* Sets, overwrites and deletes of 3000 keys: the table grows past its
 * first 1024 slots, and deletes land inside probe runs; puts run after
 * the look ahead of keys absent, present, deleted and moved. */
static void test_lookups(bool no_index)
{
	setup(no_index ? "point-off" : "point", no_index);
	enum { N = 3000 };
	static struct want want[N];
	memset(want, 0, sizeof(want));
	for (uint32_t i = 0; i < N; i++) {
		look_ahead(i % 2 ? i + 1 : i / 2);   /* absent, then present: the put loads its leaf */
		set_key(i, 0, want);
	}
	check_all("after the sets", N, want, !no_index);
	/* The look ahead: the index answers for short keys, and it changes
	 * nothing (the check above and below compare index and tree). */
	uint32_t prefetched = 0, long_keys = 0;
	for (uint32_t i = 0; i < N; i++) {
		uint8_t k[64];
		uint32_t klen = key_of(i, k);
		int r = paste_btree_prefetch(E.t, k, klen);
		CHECK_EQ(r, !no_index && indexed(i) ? 1 : 0);
		prefetched += r == 1;
		long_keys += !indexed(i);
	}
	CHECK_EQ(prefetched, no_index ? 0 : N - long_keys);
	CHECK(long_keys > 0);
	CHECK_EQ(paste_btree_prefetch(NULL, "k", 1), -EINVAL);
	CHECK_EQ(paste_btree_prefetch(E.t, NULL, 1), -EINVAL);
	check_all("after the look ahead", N, want, !no_index);
	for (uint32_t i = 0; i < N; i += 3) {   /* overwrite a third, with other extent counts */
		look_ahead(i + 3);
		set_key(i, 1, want);
	}
	for (uint32_t i = 1; i < N; i += 2) {   /* delete half, each looked ahead at first */
		look_ahead(i);
		del_key(i, want);
		if (i + 1 < N)
			set_key(i + 1, 0, want);   /* a put after the slot it loads went */
	}
	check_all("after overwrites and deletes", N, want, !no_index);
	uint8_t absent[64];
	memset(absent, 'z', sizeof(absent));
	for (uint32_t len = 1; len <= sizeof(absent); len++)
		CHECK_EQ(paste_btree_get(E.t, absent, len, NULL, NULL, NULL), -ENOENT);

	/* Recovery replays the log into the tree and builds the index anew. */
	CHECK(tenv_reopen(&E));
	check_all("after a reopen", N, want, !no_index);
	CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	CHECK(tenv_reopen(&E));
	check_all("after a checkpoint and a reopen", N, want, !no_index);

	CHECK_EQ(paste_btree_clear(E.t, NULL), 0);
	memset(want, 0, sizeof(want));
	check_all("after a clear", N, want, !no_index);
	for (uint32_t i = 0; i < N; i += 7) {
		set_key(i, 2, want);
	}
	check_all("after sets following the clear", N, want, !no_index);
	tenv_finish(&E);
}

static uint64_t hinted(bool dels)
{
	struct paste_btree_info bi;
	paste_btree_info(E.t, &bi);
	return dels ? bi.hinted_dels : bi.hinted_sets;
}

/* Keys 0..n-1 set twice (the inserts moved entries: the second sets
 * leave hints that hold); the keys the point index holds. */
static uint64_t fill_twice(uint32_t n, struct want *want)
{
	uint64_t nshort = 0;
	for (uint32_t i = 0; i < n; i++) {
		set_key(i, 0, want);
		nshort += indexed(i);
	}
	for (uint32_t i = 0; i < n; i++)
		set_key(i, 0, want);
	return nshort;
}

/* Overwrites and deletes follow the hint (leaf page, index) their key's
 * last set left in its slot, when that page may still be written in
 * place (and, for a delete, keeps enough entries not to merge). After a
 * checkpoint every page is the checkpointed tree's: the first change in a
 * leaf descends and copies it, and the hints of the leaf's other keys are
 * followed to the copy. A delete moves the entries after it: their hints
 * fail the check and those sets and deletes descend. Lookups and the
 * check (which audits each hint that passes) agree throughout. */
static void test_hints(void)
{
	setup("point-hints", false);
	enum { N = 2000 };
	static struct want want[N];
	memset(want, 0, sizeof(want));
	uint64_t nshort = fill_twice(N, want);
	CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	struct paste_btree_info bi;
	paste_btree_info(E.t, &bi);
	uint64_t h0 = hinted(false), d0 = hinted(true);
	for (uint32_t i = 0; i < N; i++)   /* same sizes: each entry stays where it is */
		set_key(i, 0, want);
	uint64_t h1 = hinted(false);
	CHECK(h1 - h0 < nshort);           /* each leaf's first set copied it */
	CHECK(h1 - h0 + bi.pages_used >= nshort);   /* the rest followed their hints to the copy */
	CHECK(h1 - h0 >= nshort / 2);
	check_all("after overwrites through copied leaves", N, want, true);
	CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	uint64_t ndel = 0;
	for (uint32_t i = 0; i < N; i += 10) {   /* every leaf is the checkpoint's again */
		del_key(i, want);
		ndel += indexed(i);
	}
	CHECK(hinted(true) - d0 < ndel);   /* a leaf's first delete copies it */
	for (uint32_t i = 0; i < N; i++)   /* same sizes: each entry stays where it is */
		set_key(i, 0, want);
	for (uint32_t i = 0; i < N; i++)   /* the re-inserts moved entries: new hints */
		set_key(i, 0, want);
	h1 = hinted(false);
	for (uint32_t i = 0; i < N; i++)
		set_key(i, 0, want);
	uint64_t h2 = hinted(false);
	CHECK_EQ(h2 - h1, nshort);
	check_all("after overwrites by hint", N, want, true);
	uint64_t dels = 0;
	for (uint32_t i = 0; i < N; i += 3) {
		del_key(i, want);
		dels += indexed(i);
	}
	uint64_t d1 = hinted(true);
	CHECK(d1 - d0 > 0);
	CHECK(d1 - d0 < dels);             /* entries after a deleted one moved */
	check_all("after deletes by hint", N, want, true);
	uint64_t left = 0;
	for (uint32_t i = 0; i < N; i++) {
		if (want[i].present) {
			set_key(i, 0, want);
			left += indexed(i);
		}
	}
	uint64_t h3 = hinted(false);
	CHECK(h3 - h2 < left);
	CHECK(h3 - h2 > 0);
	check_all("after deletes and overwrites", N, want, true);
	CHECK(tenv_reopen(&E));            /* a new open knows no hints */
	check_all("after a reopen", N, want, true);
	for (uint32_t i = 0; i < N; i++)   /* leaves empty out: merges, a shrinking root */
		if (want[i].present)
			set_key(i, 0, want);
	uint64_t d2 = hinted(true);
	for (uint32_t i = N; i-- > 0;)
		if (want[i].present)
			del_key(i, want);
	CHECK(hinted(true) > d2);
	check_all("after deleting every key", N, want, true);
	CHECK_EQ(paste_btree_count(E.t), 0u);
	tenv_finish(&E);
}

/* The table cannot be had: at a growth (the 769th key of 1024 slots), at a
 * clear and at the build after recovery. Each time the index goes off,
 * info says so, lookups descend the tree and still agree, and the check
 * passes; the next open with memory builds it again. */
/* A key not written for several checkpoints keeps a good hint: its leaf
 * was copied once per checkpoint, and each replaced page keeps naming its
 * copy while it waits in the free queue (reused oldest first, and only
 * once enough pages are free). Each round rewrites a quarter of the keys;
 * after the last checkpoint a set descends only as the first in its leaf. */
static void test_hints_across_checkpoints(void)
{
	setup("point-hints-ckpt", false);
	enum { N = 3000, ROUNDS = 4 };
	static struct want want[N];
	memset(want, 0, sizeof(want));
	uint64_t nshort = fill_twice(N, want);
	for (uint32_t r = 0; r < ROUNDS; r++) {
		CHECK_EQ(paste_btree_checkpoint(E.t), 0);
		for (uint32_t i = r; i < N; i += ROUNDS)
			set_key(i, 0, want);
	}
	CHECK_EQ(paste_btree_checkpoint(E.t), 0);
	struct paste_btree_info bi;
	paste_btree_info(E.t, &bi);
	uint64_t h0 = hinted(false);
	for (uint32_t i = 0; i < N; i++)
		set_key(i, 0, want);
	uint64_t h = hinted(false) - h0;
	CHECK(h < nshort);                 /* each leaf's first set copied it */
	CHECK(h + bi.pages_used >= nshort);   /* every other set followed its hint */
	check_all("after overwrites through several checkpoints", N, want, true);
	tenv_finish(&E);
}

static int by_key(const void *a, const void *b)
{
	uint8_t ka[64], kb[64];
	uint32_t la = key_of(*(const uint32_t *)a, ka), lb = key_of(*(const uint32_t *)b, kb);
	return paste_btree_keycmp(ka, la, kb, lb);
}

/* A key the index does not hold (longer than 32 bytes) is looked up,
 * then written or deleted, with a change to a neighbour in its leaf, a
 * checkpoint, or nothing in between: the write must not follow the
 * lookup's descent once anything changed (entries shift in the leaf). */
static void test_descent_memo(void)
{
	setup("point-memo", false);
	enum { N = 3000 };
	static struct want want[N];
	memset(want, 0, sizeof(want));
	static uint32_t longs[N];
	uint32_t nl = 0;
	for (uint32_t i = 0; i < N; i++)
		if (!indexed(i))
			longs[nl++] = i;
	qsort(longs, nl, sizeof(longs[0]), by_key);   /* neighbours share a leaf */
	for (uint32_t j = 0; j < nl; j += 2)
		set_key(longs[j], 0, want);
	srand(5);
	for (uint32_t step = 0; step < 40000; step++) {
		uint32_t p = 3 + (uint32_t)rand() % (nl - 3);
		uint32_t i = longs[p], nb = longs[p - 1 - (uint32_t)rand() % 3];   /* before it: i's index moves */
		uint8_t k[64];
		struct paste_extent got[PASTE_BTREE_MAX_EXTENTS];
		uint32_t n, len;
		(void)paste_btree_get(E.t, k, key_of(i, k), got, &n, &len);
		switch (rand() % 4) {
		case 0:                          /* a neighbour changes first */
			if (want[nb].present && rand() % 2)
				del_key(nb, want);
			else
				set_key(nb, step, want);
			break;
		case 1:
			if (step % 16 == 0)
				CHECK_EQ(paste_btree_checkpoint(E.t), 0);
			break;
		default:
			break;
		}
		if (want[i].present && rand() % 3 == 0)
			del_key(i, want);
		else
			set_key(i, step + 1, want);
	}
	check_all("after lookups followed by writes", N, want, true);
	tenv_finish(&E);
}

static uint64_t descents(void)
{
	struct paste_btree_info bi;
	paste_btree_info(E.t, &bi);
	return bi.descents;
}

/* A pop: a cursor finds an entry (next, prev, or a random sample, from
 * a fresh seek), then that entry is deleted or overwritten, with nothing,
 * more cursor steps, a lookup of it, a checkpoint, or a neighbour's change
 * in between. Without a change in between the write must not search the
 * tree again (the cursor's path is kept); after one it must, and the tree
 * must agree with the model either way. */
static void test_cursor_memo(void)
{
	setup("point-cursor", false);
	enum { N = 3000 };
	static struct want want[N];
	memset(want, 0, sizeof(want));
	for (uint32_t i = 0; i < N; i += 2)
		set_key(i, 0, want);
	uint8_t hi[64];
	memset(hi, 0xff, sizeof(hi));
	srand(11);
	uint32_t kept = 0;
	for (uint32_t step = 0; step < 30000; step++) {
		uint8_t s[64];
		uint32_t slen = key_of((uint32_t)rand() % N, s), how = (uint32_t)rand() % 3;
		struct paste_btree_cursor c;
		paste_btree_cursor_init(&c, E.t, s, slen);
		const uint8_t *k;
		uint32_t klen;
		int g;
		if (how == 2 && paste_btree_cursor_sample(&c, "", 0, hi, sizeof(hi), step) != 0)
			continue;
		g = how == 1 ? paste_btree_cursor_prev(&c, &k, &klen, NULL, NULL, NULL)
			     : paste_btree_cursor_next(&c, &k, &klen, NULL, NULL, NULL);
		if (g != 1)
			continue;
		uint32_t i = (uint32_t)k[klen - 4] << 24 | (uint32_t)k[klen - 3] << 16 |
			     (uint32_t)k[klen - 2] << 8 | k[klen - 1];
		CHECK(i < N && want[i].present);
		uint8_t key[64];
		memcpy(key, k, klen);
		bool changed = false;
		switch (rand() % 5) {
		case 0:                  /* a neighbour (an index below or above) */
		{
			uint32_t nb = i + 1 < N ? i + 1 : i - 1;
			if (want[nb].present && rand() % 2)
				del_key(nb, want);
			else
				set_key(nb, step, want);
			changed = true;
			break;
		}
		case 1:
			CHECK_EQ(paste_btree_checkpoint(E.t), 0);
			break;
		case 2:                  /* walk on (no re-seek): the first entry's path stays */
			for (int j = 0; j < 2; j++)
				(void)(how == 1 ? paste_btree_cursor_prev(&c, NULL, NULL, NULL, NULL, NULL)
						: paste_btree_cursor_next(&c, NULL, NULL, NULL, NULL, NULL));
			break;
		case 3:
			CHECK_EQ(paste_btree_get(E.t, key, klen, NULL, NULL, NULL), 0);
			break;
		default:
			break;
		}
		uint64_t before = descents();
		if (rand() % 4) {
			CHECK_EQ(paste_btree_del(E.t, key, klen, NULL), 0);
			want[i].present = false;
		} else {
			want[i].n = value_of(i, step + 1, want[i].v);
			CHECK_EQ(paste_btree_set(E.t, key, klen, want[i].v, want[i].n, NULL), 0);
		}
		if (!changed) {
			CHECK_EQ(descents(), before);
			kept++;
		}
		if (step % 5000 == 0)
			check_all("during the pops", N, want, true);
		set_key((uint32_t)rand() % N, step, want);   /* 1.5 sets a step: about half full */
		if (rand() % 2)
			set_key((uint32_t)rand() % N, step, want);
	}
	CHECK(kept > 20000);
	check_all("after the pops", N, want, true);
	CHECK(tenv_reopen(&E));
	check_all("after a reopen", N, want, true);
	tenv_finish(&E);
}

/* Key of position pos in list l (one of three): l's letter, a 0 (so
 * the lists lie among test keys of that letter), pos big-endian. */
static uint32_t list_key(uint32_t l, uint32_t pos, uint8_t *k)
{
	k[0] = (uint8_t)"bmx"[l];
	k[1] = 0;
	for (uint32_t b = 0; b < 4; b++)
		k[2 + b] = (uint8_t)(pos >> (24 - 8 * b));
	return 6;
}

/* Pushes and pops at both ends of three lists, among sets and deletes
 * of other keys and checkpoints, with no point index (every lookup
 * descends): a descent beside the one before searches only its leaf, and
 * after any split, merge or copied page searches from the root again. The
 * tree agrees with the model throughout: the ends of the list just
 * changed at each step, everything every 2,000. */
static void test_finger(void)
{
	setup("point-finger", true);
	enum { N = 3000, P = 1u << 16 };
	static struct want want[N];
	static bool in[3][P];
	memset(want, 0, sizeof(want));
	memset(in, 0, sizeof(in));
	uint32_t head[3], tail[3];
	for (uint32_t l = 0; l < 3; l++)
		head[l] = tail[l] = P / 2;
	srand(17);
	struct paste_btree_info b0, b1;
	paste_btree_info(E.t, &b0);
	for (uint32_t step = 0; step < 60000; step++) {
		uint32_t l = (uint32_t)rand() % 3, op = (uint32_t)rand() % 10;
		uint8_t k[8];
		struct paste_extent v[3];
		/* Lists grow for the first half, then mostly shrink. */
		bool grow = step < 30000 ? op < 6 : op < 3;
		if (op == 9) {
			uint32_t i = (uint32_t)rand() % N;
			if (want[i].present && rand() % 2)
				del_key(i, want);
			else
				set_key(i, step, want);
		} else if (grow && head[l] > 1 && tail[l] < P - 1) {
			uint32_t pos = rand() % 2 ? --head[l] : tail[l]++;
			uint32_t n = value_of(pos % N, step, v);
			CHECK_EQ(paste_btree_set(E.t, k, list_key(l, pos, k), v, n, NULL), 0);
			in[l][pos] = true;
		} else if (head[l] < tail[l]) {
			uint32_t pos = rand() % 2 ? head[l]++ : --tail[l];
			CHECK_EQ(paste_btree_del(E.t, k, list_key(l, pos, k), NULL), 0);
			in[l][pos] = false;
		}
		if (rand() % 700 == 0)
			CHECK_EQ(paste_btree_checkpoint(E.t), 0);
		/* The ends of list l, and one past each. */
		uint32_t ends[4] = { head[l] - 1, head[l], tail[l] - 1, tail[l] };
		for (uint32_t e = 0; e < 4; e++)
			CHECK_EQ(paste_btree_get(E.t, k, list_key(l, ends[e], k), NULL, NULL, NULL),
				 in[l][ends[e]] ? 0 : -ENOENT);
		if (step % 2000 == 1999) {
			check_all("among pushes and pops", N, want, false);
			uint32_t bad = 0;
			for (uint32_t m = 0; m < 3; m++)
				for (uint32_t pos = 0; pos < P; pos++)
					bad += (paste_btree_get(E.t, k, list_key(m, pos, k), NULL, NULL,
								NULL) == 0) != in[m][pos];
			CHECK_EQ(bad, 0);
		}
	}
	paste_btree_info(E.t, &b1);
	uint64_t all = b1.descents - b0.descents, leaf = b1.leaf_descents - b0.leaf_descents;
	CHECK(leaf > all / 2);
	CHECK(leaf < all);
	CHECK(tenv_reopen(&E));
	check_all("after a reopen", N, want, false);
	tenv_finish(&E);
}

/* The owner leaves keys of an odd length out of the index. */
static bool odd_len(const uint8_t *key, uint32_t klen)
{
	(void)key;
	return klen % 2 == 1;
}

/* Keys the owner leaves out of the point index are found by descents:
 * sets, overwrites and deletes of short keys of both kinds, checkpoints
 * and a reopen, the model everywhere, and the index holding only the
 * others (the tree's check audits it: a left-out key in it, or another
 * missing, fails). */
static void test_skip(void)
{
	setup_skip("point-skip", false, odd_len);
	enum { N = 3000 };
	static struct want want[N];
	memset(want, 0, sizeof(want));
	srand(23);
	for (uint32_t step = 0; step < 20000; step++) {
		uint32_t i = (uint32_t)rand() % N;
		if (want[i].present && rand() % 3 == 0)
			del_key(i, want);
		else
			set_key(i, step, want);
		if (step % 4000 == 3999) {
			CHECK_EQ(paste_btree_checkpoint(E.t), 0);
			CHECK_EQ(compare(N, want), 0);
			CHECK_EQ(tree_check(E.t), 0);
		}
	}
	for (int round = 0; round < 2; round++) {
		uint64_t even = 0;
		for (uint32_t i = 0; i < N; i++)
			even += want[i].present && indexed(i) && key_len(i) % 2 == 0;
		struct paste_btree_info bi;
		paste_btree_info(E.t, &bi);
		CHECK_EQ(bi.point_keys, even);
		CHECK(even > 500);
		CHECK_EQ(compare(N, want), 0);
		CHECK_EQ(tree_check(E.t), 0);
		CHECK(tenv_reopen(&E));
	}
	tenv_finish(&E);
}

static void test_nomem(void)
{
	setup("point-nomem", false);
	enum { N = 2000 };
	static struct want want[N];
	memset(want, 0, sizeof(want));
	for (uint32_t i = 0; i < 700; i++)
		set_key(i, 0, want);
	check_all("before the failed growth", N, want, true);
	fail_anon = true;
	for (uint32_t i = 700; i < N; i++)
		set_key(i, 0, want);
	CHECK_EQ(anon_failed, 1u);   /* dropped once, never retried */
	for (uint32_t i = 0; i < N; i += 4)
		del_key(i, want);
	check_all("after a failed growth", N, want, false);
	uint8_t k0[64];
	CHECK_EQ(paste_btree_prefetch(E.t, k0, key_of(1, k0)), 0);   /* no index: no look ahead */

	fail_anon = false;           /* the next open builds it */
	CHECK(tenv_reopen(&E));
	check_all("after a reopen with memory", N, want, true);

	fail_anon = true;            /* a clear cannot get its new table */
	anon_failed = 0;
	CHECK_EQ(paste_btree_clear(E.t, NULL), 0);
	CHECK_EQ(anon_failed, 1u);
	memset(want, 0, sizeof(want));
	for (uint32_t i = 0; i < N; i += 3)
		set_key(i, 1, want);
	check_all("after a failed clear", N, want, false);

	anon_failed = 0;             /* nor can the build at open */
	CHECK(tenv_reopen(&E));
	CHECK_EQ(anon_failed, 1u);
	check_all("after an open without memory", N, want, false);
	fail_anon = false;
	tenv_finish(&E);
}

int main(void)
{
	make_dir("btree-point");
	test_lookups(false);
	test_lookups(true);
	test_hints();
	test_hints_across_checkpoints();
	test_descent_memo();
	test_cursor_memo();
	test_finger();
	test_skip();
	test_nomem();
	rmdir(dir);
	return check_done();
}
