/*
 * test_kv_elem.c - hash field values and list elements too long for one
 * tree entry (kv.h, "elements"): kept in chunks of their own, read back
 * whole and in pieces, moved without a copy, and their chunks buried
 * whenever the element goes (HDEL, overwrites, LREM, LSET, LTRIM, the
 * collection dropped, a COPY's source deleted), so the store's buffers
 * come back; a write that finds no room leaves nothing behind.
 */
#include <inttypes.h>

#include "kv_fixture.h"
#include "kv_copy.h"
#include "kv_hash.h"
#include "kv_list.h"

static struct kenv E;

#define BS 2048u
#define ONE (63u * BS)          /* what one entry's extents hold */

static uint8_t *model(size_t n, uint32_t s)
{
	uint8_t *p = malloc(n ? n : 1);
	fill(p, n, s);
	return p;
}

/* The value read by kv_elem_read whole and in two pieces equals want. */
static bool same(const struct paste_extent *ext, uint32_t n, uint32_t len, uint64_t big,
		 const uint8_t *want, size_t wlen)
{
	if (len != wlen)
		return false;
	uint8_t *b = malloc(wlen + 1);
	bool ok = kv_elem_read(E.kv, ext, n, len, big, 0, b, wlen) == wlen && !memcmp(b, want, wlen);
	size_t half = wlen / 2 + 7 < wlen ? wlen / 2 + 7 : 0;
	ok = ok && kv_elem_read(E.kv, ext, n, len, big, half, b, wlen - half) == wlen - half &&
	     !memcmp(b, want + half, wlen - half);
	ok = ok && kv_elem_equal(E.kv, ext, n, len, big, want, wlen);
	if (wlen)
		ok = ok && !kv_elem_equal(E.kv, ext, n, len, big, b, wlen - 1);
	free(b);
	return ok;
}

static int hash_open(struct kv_hash *h, const char *key)
{
	key_of(&E, &h->key, 0, key);
	int r = kv_hash_open(E.kv, h, false);
	if (r == -ENOENT)
		kv_hash_new(E.kv, h);
	return r;
}

static bool field_is(struct kv_hash *h, const void *f, size_t flen, const uint8_t *want, size_t wlen,
		     bool far)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	uint64_t big = 7;
	if (kv_hash_get(E.kv, h, f, flen, ext, &n, &len, &big))
		return false;
	return (big != 0) == far && same(ext, n, len, big, want, wlen);
}

/* Hash values: in place up to one entry, in chunks past it; an overwrite
 * and an HDEL bury the old chunks; a long field name too; a restart
 * keeps them. */
static void test_hash(void)
{
	kenv_start(&E, "elem-hash", 64u << 20, BS);
	uint32_t base = kenv_free(&E);
	struct kv_hash h;
	hash_open(&h, "h");
	uint8_t *fits = model(ONE - 4096, 1), *edge = model(ONE + 1, 2), *mib = model(1u << 20, 3);
	CHECK_EQ(kv_hash_set_bytes(E.kv, &h, "fits", 4, fits, ONE - 4096, NULL), 0);
	CHECK_EQ(kv_hash_set_bytes(E.kv, &h, "edge", 4, edge, ONE + 1, NULL), 0);
	bool created = false;
	CHECK_EQ(kv_hash_set_bytes(E.kv, &h, "mib", 3, mib, 1u << 20, &created), 0);
	CHECK(created);
	CHECK(field_is(&h, "fits", 4, fits, ONE - 4096, false));
	CHECK(field_is(&h, "edge", 4, edge, ONE + 1, true));
	CHECK(field_is(&h, "mib", 3, mib, 1u << 20, true));
	CHECK_EQ(h.o.coll.count, 3);
	/* A caller that cannot read chunks is told so, not given the record. */
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	CHECK_EQ(kv_hash_get(E.kv, &h, "mib", 3, ext, &n, &len, NULL), -EFBIG);
	/* A walk sees each one as it is. */
	struct kv_hash_walk w;
	CHECK_EQ(kv_hash_walk_init(E.kv, &h, &w, NULL, 0), 0);
	uint32_t fars = 0, seen = 0;
	while (kv_hash_walk_next(E.kv, &w) == 1) {
		seen++;
		fars += w.big != 0;
		if (w.nlen == 3)
			CHECK(same(w.ext, w.n, w.len, w.big, mib, 1u << 20));
	}
	CHECK_EQ(seen, 3);
	CHECK_EQ(fars, 2);

	/* Overwrites either way and a delete: the old chunks go. */
	uint32_t full = kenv_free(&E);
	CHECK_EQ(kv_hash_set_bytes(E.kv, &h, "mib", 3, "small", 5, &created), 0);
	CHECK(!created);
	CHECK(field_is(&h, "mib", 3, (const uint8_t *)"small", 5, false));
	CHECK_EQ(count_byte(&E, KV_PFX_GRAVE), 1);
	kenv_sweep(&E);
	CHECK(kenv_free(&E) >= full + (1u << 20) / BS - 8);
	CHECK_EQ(kv_hash_set_bytes(E.kv, &h, "fits", 4, mib, 1u << 20, NULL), 0);
	CHECK(field_is(&h, "fits", 4, mib, 1u << 20, true));
	CHECK_EQ(kv_hash_del(E.kv, &h, "edge", 4), 1);
	CHECK_EQ(h.o.coll.count, 2);
	kenv_sweep(&E);

	/* A long field name beside a value in chunks. */
	uint8_t *name = model(5000, 9);
	CHECK_EQ(kv_hash_set_bytes(E.kv, &h, name, 5000, edge, ONE + 1, NULL), 0);
	CHECK(field_is(&h, name, 5000, edge, ONE + 1, true));

	/* A restart keeps them; the counts agree with the tree. */
	CHECK(kenv_reopen(&E));
	CHECK_EQ(hash_open(&h, "h"), 0);
	CHECK_EQ(h.o.coll.count, 3);
	CHECK(field_is(&h, "fits", 4, mib, 1u << 20, true));
	CHECK(field_is(&h, name, 5000, edge, ONE + 1, true));
	CHECK(field_is(&h, "mib", 3, (const uint8_t *)"small", 5, false));
	check_counts(&E);

	/* Every field deleted: the key goes and nothing is left. */
	CHECK_EQ(kv_hash_del(E.kv, &h, name, 5000), 1);
	CHECK_EQ(kv_hash_del(E.kv, &h, "fits", 4), 1);
	CHECK_EQ(kv_hash_del(E.kv, &h, "mib", 3), 1);
	kenv_sweep(&E);
	CHECK_EQ(count_byte(&E, KV_PFX_MEMBER), 0);
	CHECK_EQ(count_byte(&E, KV_PFX_GRAVE), 0);
	CHECK(kenv_free(&E) + 8 >= base);
	free(fits);
	free(edge);
	free(mib);
	free(name);
	kenv_finish(&E);
}

static int list_open(struct kv_list *l, const char *key)
{
	key_of(&E, &l->key, 0, key);
	int r = kv_list_open(E.kv, l, false);
	if (r == -ENOENT)
		kv_list_new(E.kv, l);
	return r;
}

static bool elem_is(struct kv_list *l, uint64_t i, const uint8_t *want, size_t wlen)
{
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	uint32_t n, len;
	uint64_t big;
	return kv_list_get(E.kv, l, i, ext, &n, &len, &big) == 0 && same(ext, n, len, big, want, wlen);
}

static int push(struct kv_list *l, enum kv_end e, const void *p, size_t len)
{
	int r = kv_list_begin(E.kv, l, 0, false);
	if (r == 0)
		r = kv_list_push_bytes(E.kv, l, e, p, len);
	return kv_list_end(E.kv, l, r);
}

/* List elements: pushed, read, walked; LINSERT's shift moves them (their
 * chunks stay theirs); LREM, LSET and LTRIM bury the ones they remove;
 * the store remembers that it holds such elements. */
static void test_list(void)
{
	kenv_start(&E, "elem-list", 64u << 20, BS);
	uint32_t base = kenv_free(&E);
	CHECK(!E.kv->far_lists);
	struct kv_list l;
	list_open(&l, "l");
	uint8_t *a = model(300000, 11), *b = model(ONE + 1, 12), *c = model(200000, 13);
	CHECK_EQ(push(&l, KV_TAIL, a, 300000), 0);
	CHECK_EQ(push(&l, KV_TAIL, "x", 1), 0);
	CHECK_EQ(push(&l, KV_HEAD, b, ONE + 1), 0);
	CHECK(E.kv->far_lists);
	CHECK(elem_is(&l, 0, b, ONE + 1));
	CHECK(elem_is(&l, 1, a, 300000));
	CHECK(elem_is(&l, 2, (const uint8_t *)"x", 1));
	struct kv_list_walk w;
	kv_list_walk_pos(E.kv, &w, l.o.coll.id, l.o.coll.head, l.o.coll.tail, true);
	CHECK_EQ(kv_list_walk_next(E.kv, &w), 1);
	CHECK(w.big == 0 && w.len == 1);
	CHECK_EQ(kv_list_walk_next(E.kv, &w), 1);
	CHECK(w.big && same(w.ext, w.n, w.len, w.big, a, 300000));

	/* LINSERT at index 1, shifting the head side: b moves, unburied. */
	CHECK_EQ(kv_list_begin(E.kv, &l, 0, true), 0);
	CHECK_EQ(kv_list_open_slot(E.kv, &l, 1), 0);
	CHECK_EQ(kv_list_set_bytes(E.kv, &l, 1, c, 200000), 0);
	CHECK_EQ(kv_list_end(E.kv, &l, 0), 0);
	CHECK_EQ(count_byte(&E, KV_PFX_GRAVE), 0);
	CHECK(elem_is(&l, 0, b, ONE + 1));
	CHECK(elem_is(&l, 1, c, 200000));
	CHECK(elem_is(&l, 2, a, 300000));

	/* LREM of a (index 2): buried, the rest whole. */
	uint32_t before = kenv_free(&E);
	uint64_t idx[1] = { 2 };
	CHECK_EQ(kv_list_begin(E.kv, &l, 0, true), 0);
	CHECK_EQ(kv_list_remove_at(E.kv, &l, idx, 1), 0);
	CHECK_EQ(kv_list_end(E.kv, &l, 0), 0);
	kenv_sweep(&E);
	CHECK(kenv_free(&E) >= before + 300000 / BS - 8);
	CHECK(elem_is(&l, 0, b, ONE + 1));
	CHECK(elem_is(&l, 1, c, 200000));
	CHECK(elem_is(&l, 2, (const uint8_t *)"x", 1));

	/* LSET over b: buried. */
	before = kenv_free(&E);
	CHECK_EQ(kv_list_set_bytes(E.kv, &l, 0, "y", 1), 0);
	kenv_sweep(&E);
	CHECK(kenv_free(&E) >= before + ONE / BS - 8);
	CHECK(elem_is(&l, 0, (const uint8_t *)"y", 1));

	/* LTRIM keeping only "x": c buried. */
	before = kenv_free(&E);
	CHECK_EQ(kv_list_trim(E.kv, &l, 2, 2), 0);
	kenv_sweep(&E);
	CHECK(kenv_free(&E) >= before + 200000 / BS - 8);
	CHECK_EQ(l.o.coll.count, 1);
	CHECK(elem_is(&l, 0, (const uint8_t *)"x", 1));

	/* The store says so across a restart, and FLUSHALL forgets it. */
	CHECK(kenv_reopen(&E));
	CHECK(E.kv->far_lists);
	CHECK_EQ(kv_flushall(E.kv), 0);
	CHECK(!E.kv->far_lists);
	CHECK(kenv_reopen(&E));
	CHECK(!E.kv->far_lists);
	CHECK(kenv_free(&E) + 8 >= base);
	free(a);
	free(b);
	free(c);
	kenv_finish(&E);
}

/* A dropped hash or list: the sweeper buries its members' chunks before
 * deleting the members. A COPY names chunks of its own. */
static void test_drop_and_copy(void)
{
	kenv_start(&E, "elem-drop", 64u << 20, BS);
	uint32_t base = kenv_free(&E);
	uint8_t *v = model(500000, 21);
	struct kv_hash h;
	hash_open(&h, "h");
	char f[16];
	for (int i = 0; i < 4; i++) {
		snprintf(f, sizeof(f), "f%d", i);
		CHECK_EQ(kv_hash_set_bytes(E.kv, &h, f, strlen(f), v, 500000, NULL), 0);
	}
	struct kv_list l;
	list_open(&l, "l");
	for (int i = 0; i < 3; i++)
		CHECK_EQ(push(&l, KV_TAIL, v, 500000), 0);

	/* COPY of the hash, then the source dropped: the copy stays whole. */
	struct kv_key src, dst;
	struct kv_obj o;
	key_of(&E, &src, 0, "h");
	key_of(&E, &dst, 0, "h2");
	CHECK_EQ(kv_lookup(E.kv, &src, &o, false), 0);
	CHECK_EQ(kv_copy(E.kv, &o, &dst), 0);
	CHECK_EQ(count_byte(&E, KV_PFX_GRAVE), 0);
	CHECK_EQ(kv_remove(E.kv, &src), 1);
	kenv_sweep(&E);
	struct kv_hash h2;
	CHECK_EQ(hash_open(&h2, "h2"), 0);
	for (int i = 0; i < 4; i++) {
		snprintf(f, sizeof(f), "f%d", i);
		CHECK(field_is(&h2, f, strlen(f), v, 500000, true));
	}
	/* Both dropped: every chunk goes. */
	CHECK_EQ(kv_remove(E.kv, &dst), 1);
	key_of(&E, &src, 0, "l");
	CHECK_EQ(kv_remove(E.kv, &src), 1);
	kenv_sweep(&E);
	CHECK_EQ(count_byte(&E, KV_PFX_MEMBER), 0);
	CHECK(kenv_free(&E) + 8 >= base);
	check_counts(&E);
	free(v);
	kenv_finish(&E);
}

/* No room: a value in chunks that does not fit is refused, and what it
 * wrote goes back; the store's other values are untouched. */
static void test_no_room(void)
{
	kenv_start(&E, "elem-room", 16u << 20, BS);
	uint32_t base = kenv_free(&E);
	struct kv_hash h;
	hash_open(&h, "h");
	uint8_t *v = model(3u << 20, 31);
	int r = 0;
	uint64_t kept = 0;
	char f[16];
	while (kept < 20) {
		snprintf(f, sizeof(f), "f%" PRIu64, kept);
		if ((r = kv_hash_set_bytes(E.kv, &h, f, strlen(f), v, 3u << 20, NULL)) != 0)
			break;
		kept++;
	}
	CHECK_EQ(r, -ENOSPC);
	CHECK(kept >= 1);
	CHECK_EQ(h.o.coll.count, kept);
	kenv_sweep(&E);
	for (uint64_t i = 0; i < kept; i++) {
		snprintf(f, sizeof(f), "f%" PRIu64, i);
		CHECK(field_is(&h, f, strlen(f), v, 3u << 20, true));
		CHECK_EQ(kv_hash_del(E.kv, &h, f, strlen(f)), 1);
	}
	kenv_sweep(&E);
	CHECK_EQ(count_byte(&E, KV_PFX_MEMBER), 0);
	CHECK(kenv_free(&E) + 8 >= base);
	free(v);
	kenv_finish(&E);
}

int main(void)
{
	kv_make_dir("kv-elem");
	test_hash();
	test_list();
	test_drop_and_copy();
	test_no_room();
	rmdir(kv_dir);
	return check_done();
}
