/* test_kv_list.c - lists over the typed core (services/kv_list.c): pushes
 * and pops at both ends in the order a model keeps, positions dense
 * (element i at head + i, count = tail - head); what each change writes
 * (a push onto a list that exists: the element and the record, no group;
 * a new list: one group); the last element taking the key with it;
 * LSET, LTRIM, LINSERT's slot and LREM's removals against a model, from
 * both sides; changes cut off before their record (a crash) leaving the
 * list as it was, and the next push at that end writing over what they
 * left; a pop's record first; a group aborted putting the list back;
 * walks forward and back, a missing position found; values held where
 * they lie or packed; a deadline kept; elements left out of the point
 * index. */
#include "kv_fixture.h"
#include "kv_list.h"

static struct kenv E;

/* A model list: up to MAXN strings. */
#define MAXN 4096
static char *model[MAXN];
static uint64_t mcount;

static void model_clear(void)
{
	for (uint64_t i = 0; i < mcount; i++)
		free(model[i]);
	mcount = 0;
}

static void model_insert(uint64_t i, const char *s)
{
	memmove(model + i + 1, model + i, (mcount - i) * sizeof(*model));
	model[i] = strdup(s);
	mcount++;
}

static void model_remove(uint64_t i)
{
	free(model[i]);
	memmove(model + i, model + i + 1, (mcount - i - 1) * sizeof(*model));
	mcount--;
}

static int open_or_new(struct kv_list *l, const char *key)
{
	key_of(&E, &l->key, 0, key);
	int r = kv_list_open(E.kv, l, false);
	if (r == -ENOENT)
		kv_list_new(E.kv, l);
	return r;
}

static int push(struct kv_list *l, enum kv_end e, const char *s)
{
	int r = kv_list_begin(E.kv, l, 0, false);
	if (r == 0)
		r = kv_list_push_bytes(E.kv, l, e, s, strlen(s));
	return kv_list_end(E.kv, l, r);
}

static bool elem_is(const struct paste_extent *ext, uint32_t n, uint32_t len, const char *want)
{
	return kv_elem_equal(E.kv, ext, n, len, 0, want, strlen(want));
}

/* The stored list at key equals the model: count, positions dense, each
 * element by index and by a walk either way. */
static void check_model(const char *key)
{
	struct kv_list l;
	int r = open_or_new(&l, key);
	if (!mcount) {
		CHECK_EQ(r, -ENOENT);
		return;
	}
	CHECK_EQ(r, 0);
	CHECK_EQ(l.o.coll.count, mcount);
	CHECK_EQ((uint64_t)(l.o.coll.tail - l.o.coll.head), mcount);
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	uint64_t bad = 0;
	for (uint64_t i = 0; i < mcount; i++)
		bad += kv_list_get(E.kv, &l, i, ext, &n, &len, NULL) != 0 || !elem_is(ext, n, len, model[i]);
	CHECK_EQ(bad, 0);
	CHECK_EQ(kv_list_get(E.kv, &l, mcount, ext, &n, &len, NULL), -ENOENT);
	for (int back = 0; back < 2; back++) {
		struct kv_list_walk w;
		kv_list_walk_pos(E.kv, &w, l.o.coll.id, l.o.coll.head, l.o.coll.tail, back);
		uint64_t seen = 0;
		int g;
		while ((g = kv_list_walk_next(E.kv, &w)) == 1) {
			uint64_t i = back ? mcount - 1 - seen : seen;
			bad += w.at != l.o.coll.head + (int64_t)i || !elem_is(w.ext, w.n, w.len, model[i]);
			seen++;
		}
		CHECK_EQ(g, 0);
		CHECK_EQ(seen, mcount);
		CHECK_EQ(bad, 0);
	}
}

/* Elements of id in the tree (inside the list's range or not). */
static uint64_t entries(uint64_t id)
{
	uint8_t p[10];
	kv_member_prefix(p, id, KV_LIST_ELEM);
	return tree_count(&E, p, sizeof(p));
}

static uint64_t lsn(void)
{
	return paste_btree_last_lsn(E.kv->tree);
}

/* Pushes and pops at both ends, the key going with its last element, and
 * the records each writes. */
static void test_ends(void)
{
	kenv_start(&E, "ends", 64u << 20, 2048);
	struct kv_list l;
	model_clear();
	CHECK_EQ(open_or_new(&l, "q"), -ENOENT);
	uint64_t at = lsn();
	CHECK_EQ(push(&l, KV_TAIL, "a"), 0);       /* a new list: element, record, COMMIT */
	CHECK_EQ(lsn() - at, 3);
	model_insert(0, "a");
	at = lsn();
	CHECK_EQ(push(&l, KV_TAIL, "b"), 0);       /* onto a list that exists: no group */
	CHECK_EQ(lsn() - at, 2);
	model_insert(1, "b");
	char s[32];
	for (int i = 0; i < 300; i++) {
		snprintf(s, sizeof(s), "e%d", i);
		enum kv_end e = i % 3 ? KV_TAIL : KV_HEAD;
		CHECK_EQ(push(&l, e, s), 0);
		model_insert(e == KV_HEAD ? 0 : mcount, s);
	}
	check_model("q");
	/* The elements stay out of the tree's point index (read by descents,
	 * as check_model just did): the list's key and the store's own few
	 * entries are all it holds, here and after a reopen rebuilds it. */
	struct kv_key mk;
	kv_list_pos_key(&mk, l.o.coll.id, 5);
	CHECK(kv_list_elem_key(mk.t, mk.tlen));
	kv_member_key(E.kv, &mk, l.o.coll.id, 's', "abcdefgh", 8);
	CHECK(!kv_list_elem_key(mk.t, mk.tlen));
	struct paste_btree_info bi;
	paste_btree_info(E.kv->tree, &bi);
	CHECK(bi.point_keys >= 1 && bi.point_keys < 8);
	/* k elements in one change: k elements, then the record once */
	at = lsn();
	CHECK_EQ(kv_list_begin(E.kv, &l, 0, false), 0);
	for (int i = 0; i < 5; i++) {
		snprintf(s, sizeof(s), "m%d", i);
		CHECK_EQ(kv_list_push_bytes(E.kv, &l, KV_HEAD, s, strlen(s)), 0);
		model_insert(0, s);
	}
	CHECK_EQ(kv_list_end(E.kv, &l, 0), 0);
	CHECK_EQ(lsn() - at, 6);
	check_model("q");
	CHECK(kenv_reopen(&E));
	check_model("q");
	paste_btree_info(E.kv->tree, &bi);
	CHECK(bi.point_keys >= 1 && bi.point_keys < 8);

	/* Pops: the record, then one delete (a range delete for several). */
	CHECK_EQ(open_or_new(&l, "q"), 0);
	uint64_t id = l.o.coll.id;
	while (mcount > 1) {
		enum kv_end e = mcount % 2 ? KV_HEAD : KV_TAIL;
		uint64_t k = mcount > 40 ? 7 : 1;
		int64_t pos;
		at = lsn();
		CHECK_EQ(kv_list_begin(E.kv, &l, 0, false), 0);
		CHECK_EQ(kv_list_take(E.kv, &l, e, k, &pos), 0);
		CHECK_EQ(lsn() - at, 1);                /* the record first */
		/* the taken elements are still readable */
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		uint32_t n, len;
		for (uint64_t j = 0; j < k; j++) {
			uint64_t mi = e == KV_HEAD ? j : mcount - k + j;
			CHECK_EQ(kv_list_get_pos(E.kv, id, pos + (int64_t)j, ext, &n, &len, NULL), 0);
			CHECK(elem_is(ext, n, len, model[mi]));
		}
		CHECK_EQ(kv_list_drop(E.kv, &l, pos, pos + (int64_t)k), 0);
		CHECK_EQ(lsn() - at, 2);
		CHECK_EQ(kv_list_end(E.kv, &l, 0), 0);
		for (uint64_t j = 0; j < k; j++)
			model_remove(e == KV_HEAD ? 0 : mcount - 1);
	}
	check_model("q");
	CHECK_EQ(entries(id), 1);
	/* The last one: the key and a grave, the element left to the sweeper. */
	int64_t pos;
	CHECK_EQ(kv_list_begin(E.kv, &l, 0, false), 0);
	CHECK_EQ(kv_list_take(E.kv, &l, KV_TAIL, 1, &pos), 0);
	CHECK_EQ(kv_list_drop(E.kv, &l, pos, pos + 1), 0);
	CHECK_EQ(kv_list_end(E.kv, &l, 0), 0);
	model_remove(0);
	check_model("q");
	CHECK(absent(&E, 0, "q"));
	CHECK_EQ(entries(id), 1);
	kenv_settle(&E);
	kv_sweep_step(E.kv, 100);
	CHECK_EQ(entries(id), 0);
	CHECK_EQ(kv_list_take(E.kv, &l, KV_HEAD, 1, &pos), -EINVAL);   /* nothing to take */
	check_counts(&E);
	kenv_finish(&E);
}

/* LSET, LTRIM, and the middle (LINSERT's slot, LREM's removals) against
 * the model, at random places: each moves the nearer side. */
static void test_middle(void)
{
	kenv_start(&E, "middle", 64u << 20, 2048);
	struct kv_list l;
	model_clear();
	char s[32];
	open_or_new(&l, "m");
	for (int i = 0; i < 200; i++) {
		snprintf(s, sizeof(s), "v%d", i % 13);
		CHECK_EQ(push(&l, KV_TAIL, s), 0);
		model_insert(mcount, s);
	}
	uint64_t seed = 7;
	for (int round = 0; round < 300; round++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t pick = (seed >> 33) % (mcount + 1);
		CHECK_EQ(open_or_new(&l, "m"), 0);
		int kind = round % 4;
		if (kind == 0) {                        /* LINSERT */
			snprintf(s, sizeof(s), "i%d", round);
			CHECK_EQ(kv_list_begin(E.kv, &l, 0, true), 0);
			int64_t head = l.o.coll.head;
			CHECK_EQ(kv_list_open_slot(E.kv, &l, pick), 0);
			/* the nearer side moved */
			CHECK_EQ(l.o.coll.head, pick <= mcount - pick ? head - 1 : head);
			CHECK_EQ(kv_list_set_bytes(E.kv, &l, pick, s, strlen(s)), 0);
			CHECK_EQ(kv_list_end(E.kv, &l, 0), 0);
			model_insert(pick, s);
		} else if (kind == 1 && mcount) {      /* LREM of some equal values */
			snprintf(s, sizeof(s), "v%d", (int)(pick % 13));
			uint64_t idx[MAXN], k = 0;
			for (uint64_t i = 0; i < mcount && k < 1 + pick % 4; i++)
				if (!strcmp(model[i], s))
					idx[k++] = i;
			CHECK_EQ(kv_list_begin(E.kv, &l, 0, true), 0);
			CHECK_EQ(kv_list_remove_at(E.kv, &l, idx, k), 0);
			CHECK_EQ(kv_list_end(E.kv, &l, 0), 0);
			while (k--)
				model_remove(idx[k]);
		} else if (kind == 2 && mcount) {      /* LSET */
			snprintf(s, sizeof(s), "s%d", round);
			uint64_t i = pick % mcount;
			CHECK_EQ(kv_list_set_bytes(E.kv, &l, i, s, strlen(s)), 0);
			free(model[i]);
			model[i] = strdup(s);
		} else if (kind == 3 && mcount > 150) { /* LTRIM a little off both ends */
			CHECK_EQ(kv_list_begin(E.kv, &l, 0, false), 0);
			CHECK_EQ(kv_list_trim(E.kv, &l, 2, mcount - 4), 0);
			CHECK_EQ(kv_list_end(E.kv, &l, 0), 0);
			for (int j = 0; j < 3; j++)
				model_remove(mcount - 1);
			for (int j = 0; j < 2; j++)
				model_remove(0);
		}
		if (round % 50 == 0)
			check_model("m");
	}
	check_model("m");
	CHECK_EQ(open_or_new(&l, "m"), 0);
	CHECK_EQ(entries(l.o.coll.id), mcount);    /* nothing left outside the range */
	CHECK(kenv_reopen(&E));
	check_model("m");
	/* LREM of everything: the key goes */
	CHECK_EQ(open_or_new(&l, "m"), 0);
	uint64_t *all = malloc(mcount * sizeof(*all));
	for (uint64_t i = 0; i < mcount; i++)
		all[i] = i;
	CHECK_EQ(kv_list_begin(E.kv, &l, 0, true), 0);
	CHECK_EQ(kv_list_remove_at(E.kv, &l, all, mcount), 0);
	CHECK_EQ(kv_list_end(E.kv, &l, 0), 0);
	free(all);
	model_clear();
	check_model("m");
	/* LTRIM to nothing: the key goes */
	open_or_new(&l, "t");
	CHECK_EQ(push(&l, KV_TAIL, "x"), 0);
	CHECK_EQ(kv_list_begin(E.kv, &l, 0, false), 0);
	CHECK_EQ(kv_list_trim(E.kv, &l, 1, 0), 0);
	CHECK_EQ(kv_list_end(E.kv, &l, 0), 0);
	CHECK(absent(&E, 0, "t"));
	check_counts(&E);
	kenv_finish(&E);
}

/* Stop before the record (a crash), then reopen: the list is as it was;
 * the next push at that end writes the same position again. */
static void crash_reopen(void)
{
	kenv_settle(&E);             /* what was written is durable ... */
	kv_close(E.kv);              /* ... and nothing more comes */
	E.kv = NULL;
	paste_persist_close(E.p);
	paste_store_close(E.st);
	CHECK(kenv_open(&E));
}

static void test_cut(void)
{
	kenv_start(&E, "cut", 64u << 20, 2048);
	struct kv_list l;
	model_clear();
	open_or_new(&l, "c");
	const char *init[] = { "a", "b", "c" };
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(push(&l, KV_TAIL, init[i]), 0);
		model_insert(mcount, init[i]);
	}
	/* A push of two whose record never came. */
	CHECK_EQ(kv_list_begin(E.kv, &l, 0, false), 0);
	CHECK_EQ(kv_list_push_bytes(E.kv, &l, KV_TAIL, "x", 1), 0);
	CHECK_EQ(kv_list_push_bytes(E.kv, &l, KV_HEAD, "y", 1), 0);
	crash_reopen();
	check_model("c");
	CHECK_EQ(open_or_new(&l, "c"), 0);
	CHECK_EQ(entries(l.o.coll.id), 5);          /* two outside the range, unread */
	CHECK_EQ(push(&l, KV_TAIL, "d"), 0);         /* over the one at the tail */
	model_insert(mcount, "d");
	CHECK_EQ(push(&l, KV_HEAD, "z"), 0);
	model_insert(0, "z");
	check_model("c");
	CHECK_EQ(entries(l.o.coll.id), 5);

	/* A pop whose deletes never came: the record left them out. */
	int64_t pos;
	CHECK_EQ(open_or_new(&l, "c"), 0);
	CHECK_EQ(kv_list_begin(E.kv, &l, 0, false), 0);
	CHECK_EQ(kv_list_take(E.kv, &l, KV_HEAD, 2, &pos), 0);
	crash_reopen();
	model_remove(0);
	model_remove(0);
	check_model("c");

	/* A new list whose group never committed: nothing, no key. */
	open_or_new(&l, "n");
	CHECK_EQ(kv_list_begin(E.kv, &l, 0, false), 0);
	CHECK(l.group);
	CHECK_EQ(kv_list_push_bytes(E.kv, &l, KV_TAIL, "p", 1), 0);
	uint64_t nid = l.o.coll.id;
	crash_reopen();
	CHECK(absent(&E, 0, "n"));
	CHECK_EQ(entries(nid), 0);

	/* A group aborted (LMOVE's error path): the list as it was. */
	CHECK_EQ(open_or_new(&l, "c"), 0);
	struct kv_coll was = l.o.coll;
	CHECK_EQ(kv_list_begin(E.kv, &l, 0, true), 0);
	CHECK_EQ(kv_list_take(E.kv, &l, KV_TAIL, 1, &pos), 0);
	CHECK_EQ(kv_list_push_bytes(E.kv, &l, KV_HEAD, "q", 1), 0);
	CHECK_EQ(kv_list_end(E.kv, &l, -ENOSPC), -ENOSPC);
	CHECK(l.o.coll.head == was.head && l.o.coll.tail == was.tail && l.o.coll.count == was.count);
	check_model("c");
	check_counts(&E);
	kenv_finish(&E);
}

/* Values: large ones held where they lie, small ones packed, the empty
 * one; too big for an entry refused; walks from an index, and a damaged
 * list (a position missing) found; a deadline kept by pushes and pops. */
static void test_values(void)
{
	kenv_start(&E, "values", 64u << 20, 2048);
	struct kv_list l;
	open_or_new(&l, "v");
	uint32_t bufs[2];
	CHECK_EQ(paste_store_alloc(E.st, bufs, 2), 2);
	fill(paste_store_buf(E.st, bufs[0]), 2048, 5);
	fill(paste_store_buf(E.st, bufs[1]), 2048, 6);
	struct paste_extent big[2] = { { bufs[0], 0, 2048 }, { bufs[1], 10, 1000 } };
	CHECK_EQ(kv_list_begin(E.kv, &l, 0, false), 0);
	CHECK_EQ(kv_list_push(E.kv, &l, KV_TAIL, big, 2, false), 0);
	CHECK_EQ(kv_list_push_bytes(E.kv, &l, KV_TAIL, "", 0), 0);
	CHECK_EQ(kv_list_push_bytes(E.kv, &l, KV_HEAD, "small", 5), 0);
	CHECK_EQ(kv_list_end(E.kv, &l, 0), 0);
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	CHECK_EQ(kv_list_get(E.kv, &l, 1, ext, &n, &len, NULL), 0);
	CHECK(n == 2 && len == 3048 && ext[0].buf == bufs[0] && ext[1].buf == bufs[1]);
	CHECK_EQ(kv_list_get(E.kv, &l, 2, ext, &n, &len, NULL), 0);
	CHECK_EQ(len, 0);

	/* A small body: packed, its buffer given back. */
	struct paste_body body;
	kv_body_idle(&body);
	CHECK_EQ(paste_body_begin(&body, &E.kv->bc, E.st, 64), 0);
	body.ext[0] = (struct paste_extent){ bufs[1], 1000, 64 };
	body.n = body.bufs = 1;
	body.left = 0;
	paste_store_ref(E.st, bufs[1]);
	uint32_t before = paste_store_refcount(E.st, bufs[1]);
	CHECK_EQ(kv_list_begin(E.kv, &l, 0, false), 0);
	CHECK_EQ(kv_list_push_body(E.kv, &l, KV_TAIL, &body), 0);
	CHECK_EQ(kv_list_end(E.kv, &l, 0), 0);
	CHECK_EQ(paste_store_refcount(E.st, bufs[1]), before - 1);
	CHECK_EQ(kv_list_get(E.kv, &l, 3, ext, &n, &len, NULL), 0);
	CHECK(n == 1 && len == 64 && ext[0].buf != bufs[1]);

	/* Over --max-value: refused, the list as it was (one entry's worth
	 * and more goes to chunks: test_kv_elem.c). */
	uint64_t was = E.kv->max_value;
	E.kv->max_value = 1000;
	uint8_t huge[1001];
	fill(huge, sizeof(huge), 3);
	CHECK_EQ(kv_list_begin(E.kv, &l, 0, false), 0);
	CHECK_EQ(kv_list_push_bytes(E.kv, &l, KV_TAIL, huge, sizeof(huge)), -EFBIG);
	CHECK_EQ(kv_list_end(E.kv, &l, -EFBIG), -EFBIG);
	CHECK_EQ(l.o.coll.count, 4);
	E.kv->max_value = was;
	paste_store_unref(E.st, bufs[0], false);
	paste_store_unref(E.st, bufs[1], false);

	/* A walk from index 2; a hole makes a walk fail. */
	struct kv_list_walk w;
	kv_list_walk_init(E.kv, &l, &w, 2);
	CHECK_EQ(kv_list_walk_next(E.kv, &w), 1);
	CHECK_EQ(w.len, 0);
	CHECK_EQ(kv_list_walk_next(E.kv, &w), 1);
	CHECK_EQ(w.len, 64);
	CHECK_EQ(kv_list_walk_next(E.kv, &w), 0);
	struct kv_key mk;
	kv_list_pos_key(&mk, l.o.coll.id, l.o.coll.head + 1);
	CHECK_EQ(kv_member_remove(E.kv, &mk), 1);
	kv_list_walk_init(E.kv, &l, &w, 0);
	CHECK_EQ(kv_list_walk_next(E.kv, &w), 1);
	CHECK_EQ(kv_list_walk_next(E.kv, &w), -EBADMSG);
	CHECK_EQ(kv_list_get(E.kv, &l, 1, ext, &n, &len, NULL), -EBADMSG);

	/* A deadline stays through pushes and pops. */
	struct kv_key k;
	key_of(&E, &k, 0, "d");
	open_or_new(&l, "d");
	CHECK_EQ(push(&l, KV_TAIL, "1"), 0);
	CHECK_EQ(push(&l, KV_TAIL, "2"), 0);
	struct kv_obj o;
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	int64_t dl = E.kv->now_ms + 100000;
	CHECK_EQ(kv_set_expire(E.kv, &k, &o, dl), 0);
	CHECK_EQ(open_or_new(&l, "d"), 0);
	CHECK_EQ(push(&l, KV_HEAD, "0"), 0);
	int64_t pos;
	CHECK_EQ(kv_list_begin(E.kv, &l, 0, false), 0);
	CHECK_EQ(kv_list_take(E.kv, &l, KV_TAIL, 1, &pos), 0);
	CHECK_EQ(kv_list_end(E.kv, &l, 0), 0);
	CHECK_EQ(kv_lookup(E.kv, &k, &o, false), 0);
	CHECK_EQ(o.expire_ms, dl);
	CHECK_EQ(o.coll.count, 2);
	check_counts(&E);
	kenv_finish(&E);
}

int main(void)
{
	kv_make_dir("kvlist");
	test_ends();
	test_middle();
	test_cut();
	test_values();
	model_clear();
	rmdir(kv_dir);
	printf("%d passed, %d failed\n", check_pass, check_fail);
	return check_fail ? 1 : 0;
}
