/*
 * btree_point.c - the tree's point index: a hash table in DRAM from key to
 * value extents, beside the persistent tree, for point lookups.
 *
 * Why: a lookup in the tree is a descent of dependent loads (slot, entry,
 * key, a mispredicted branch per probe), and with a batch's values and the
 * kernel's buffers streaming through the cache the leaves are cold. In
 * pkvs's pipelined GET the descent costs a fifth of the server's CPU. One
 * probe here is a hash of the key and, most often, one 64-byte line.
 *
 * What it holds: every key of at most BT_POINT_KEY bytes (but those the
 * owner's point_skip names), with its value's
 * extents when the value has at most BT_POINT_EXT (longer keys are not
 * indexed). Two, because a value received in a pipeline often straddles
 * two receive buffers (half of pipelined 1 KiB SETs do), and with one
 * extent those GETs would go down the tree. For keys that short the index
 * is the whole truth: a miss is a miss. A value of more extents is marked
 * "in the tree" and read from there.
 *
 * Each slot also keeps a hint, where the key's leaf entry was last put, so
 * that an overwrite can skip the descent (bt_hint_entry in btree.c says
 * when a hint may be followed).
 *
 * It is not persistent and never written to the store: it is built by a
 * scan of the leaves after recovery, and every later change goes through
 * bt_apply, which updates it in the same step as the tree (one thread owns
 * a tree). Should it fail to grow (ENOMEM) it is dropped and lookups
 * descend the tree: it can be missing, never wrong.
 *
 * Cost: 64 bytes a slot, a table at most 3/4 full and doubled when it
 * would be fuller: 85-170 bytes of DRAM per indexed key (1 M keys: 128
 * MiB at most), a hash and a probe per SET and DEL (+5 % of a pipelined
 * SET's CPU, against -20 % of a pipelined GET's: docs/results.md, "The
 * point index"), and a rehash of everything at each doubling.
 *
 * Linear probing with backward-shift deletion (no tombstones): a probe
 * sequence never has holes, so a lookup stops at the first empty slot.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "btree_internal.h"

/* A slot's state: in the low four bits its kind (empty, "in the tree",
 * or a value of k <= BT_POINT_EXT extents: PT_VALUE + k), in the high
 * four the key's tag. A key with a word (pkvs: an expiry) is "in the
 * tree", so that a lookup reads the word from its leaf. */
enum { PT_EMPTY = 0, PT_TREE = 1, PT_VALUE = 2 };
#define PT_KIND(s) ((s)->state & 0x0fu)
#define PT_TAG(s) ((uint8_t)((s)->state >> 4))

/* The value's length is not kept (it is the sum of its extents'), nor the
 * key's hash (recomputed where a resize or a delete needs a home slot): the
 * room went to a second extent and to the hint. */
struct bt_pslot {
	uint32_t leaf;              /* the hint: where the key's leaf entry was put */
	uint16_t leaf_idx;
	uint8_t klen;
	uint8_t state;
	struct paste_extent ext[BT_POINT_EXT];
	uint8_t key[BT_POINT_KEY];
};
_Static_assert(sizeof(struct bt_pslot) == 64, "a slot is one cache line");

#define PT_MIN_SLOTS 1024u

/* A multiply-xorshift over 8-byte words, seeded per table: the index is
 * never written to the store, so its hash need not be the CRC, and this
 * one costs ~15 instructions for a 16-byte key against the CRC's ~80 (it
 * runs twice per command: the look-ahead and the lookup). The seed (random
 * at each resize) keeps a client from choosing keys that share a probe
 * run. */
static uint32_t key_hash(const struct bt_point *pi, const uint8_t *key, uint32_t klen)
{
	const uint64_t m = 0x9e3779b97f4a7c15ull;
	uint64_t h = pi->seed ^ klen;
	for (; klen >= 8; key += 8, klen -= 8) {
		uint64_t w;
		memcpy(&w, key, 8);
		h = (h ^ w) * m;
		h ^= h >> 29;
	}
	if (klen) {
		uint64_t w = 0;
		for (uint32_t i = 0; i < klen; i++)
			w |= (uint64_t)key[i] << (8 * i);
		h = (h ^ w) * m;
	}
	h ^= h >> 32;
	h *= 0xd6e8feb86659fd93ull;
	return (uint32_t)(h ^ h >> 32);
}

/* Keys of n <= BT_POINT_KEY bytes compared in words, the last one
 * overlapping: a call to memcmp costs more than the compare at this size,
 * and a lookup compares ~2 keys. */
static inline bool key_eq(const uint8_t *a, const uint8_t *b, uint32_t n)
{
	uint64_t x, y, diff = 0;
	if (n < 8) {
		for (uint32_t i = 0; i < n; i++)
			diff |= (uint64_t)(a[i] ^ b[i]);
		return diff == 0;
	}
	for (uint32_t i = 0; i + 8 < n; i += 8) {
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		diff |= x ^ y;
	}
	memcpy(&x, a + n - 8, 8);
	memcpy(&y, b + n - 8, 8);
	return (diff | (x ^ y)) == 0;
}

/* The slot holding key, or the empty slot ending its probe sequence.
 * With no hash stored, each slot of the run is compared by length and key,
 * both in the slot's own line (the line the probe reads anyway). */
static struct bt_pslot *probe(const struct bt_point *pi, uint32_t h, const uint8_t *key,
			      uint32_t klen)
{
	for (uint32_t i = h & pi->mask;; i = (i + 1) & pi->mask) {
		struct bt_pslot *s = &pi->slot[i];
		if (PT_KIND(s) == PT_EMPTY || (s->klen == klen && key_eq(s->key, key, klen)))
			return s;
	}
}

static uint32_t slot_extents(const struct bt_pslot *s)
{
	return PT_KIND(s) >= PT_VALUE ? PT_KIND(s) - PT_VALUE : 0;
}

/* The state a key of n extents with attr a gets. */
static uint8_t state_of(uint32_t n, const struct paste_btree_attr *a)
{
	uint8_t kind = n <= BT_POINT_EXT && !a->has_word ? (uint8_t)(PT_VALUE + n) : PT_TREE;
	return (uint8_t)(kind | (a->tag & BT_EF_TAG) << 4);
}

static void fill(struct bt_pslot *s, const uint8_t *key, uint32_t klen,
		 const struct paste_extent *ext, uint32_t n, const struct paste_btree_attr *a,
		 struct bt_hint hint)
{
	s->leaf = hint.leaf;
	s->leaf_idx = hint.idx;
	s->klen = (uint8_t)klen;
	memcpy(s->key, key, klen);
	s->state = state_of(n, a);
	for (uint32_t i = 0; i < slot_extents(s); i++)
		s->ext[i] = ext[i];
}

/* A table of cap slots (a power of two) holding what pi holds. */
static int resize(struct bt_point *pi, uint32_t cap)
{
	/* Anonymous zero pages; huge pages where the kernel gives them (a
	 * 4 KiB page fault per 64 slots would be half of building the index
	 * of 1 M keys). */
	size_t bytes = (size_t)cap * sizeof(struct bt_pslot);
	struct bt_pslot *ns = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				   -1, 0);
	if (ns == MAP_FAILED)
		return -ENOMEM;
	if (bytes >= (2u << 20))
		madvise(ns, bytes, MADV_HUGEPAGE);
	struct bt_point np = { .slot = ns, .mask = cap - 1, .used = pi->used, .on = true,
				.skip = pi->skip };
	if (getrandom(&np.seed, sizeof(np.seed), GRND_NONBLOCK) != sizeof(np.seed))
		np.seed = (uint64_t)(uintptr_t)ns ^ paste_clock_ns();   /* no entropy yet: still varies */
	for (uint32_t i = 0; pi->slot && i <= pi->mask; i++) {
		const struct bt_pslot *s = &pi->slot[i];
		if (PT_KIND(s) != PT_EMPTY)
			*probe(&np, key_hash(&np, s->key, s->klen), s->key, s->klen) = *s;
	}
	bt_point_drop(pi);
	*pi = np;
	return 0;
}

static int grow(struct bt_point *pi)
{
	if (pi->slot && pi->mask + 1 > (1u << 30))
		return -ENOMEM;
	return resize(pi, pi->slot ? 2 * (pi->mask + 1) : PT_MIN_SLOTS);
}

void bt_point_drop(struct bt_point *pi)
{
	if (pi->slot)
		munmap(pi->slot, (size_t)(pi->mask + 1) * sizeof(struct bt_pslot));
	bool (*skip)(const uint8_t *, uint32_t) = pi->skip;
	memset(pi, 0, sizeof(*pi));
	pi->skip = skip;
}

/* The index holds key: short enough, and not one the owner leaves to the
 * tree. */
static inline bool indexed(const struct bt_point *pi, const uint8_t *key, uint32_t klen)
{
	return klen <= BT_POINT_KEY && !(pi->skip && pi->skip(key, klen));
}

/* A key of at most BT_POINT_KEY bytes: its slot, or none (NULL) for a
 * key the owner leaves out. A key is in at most one slot, so a memo slot
 * holding it is its slot, and a key held is not left out: the owner's
 * test runs only past the memo (a write's second lookup skips it). */
static struct bt_point_pos locate(struct bt_point *pi, const uint8_t *key, uint32_t klen)
{
	struct bt_pslot *m = pi->memo;
	if (m && m->klen == klen && PT_KIND(m) != PT_EMPTY && key_eq(m->key, key, klen))
		return (struct bt_point_pos){ m };
	if (pi->skip && pi->skip(key, klen))
		return (struct bt_point_pos){ NULL };
	uint32_t h = key_hash(pi, key, klen);
	struct bt_pslot *s = probe(pi, h, key, klen);
	if (PT_KIND(s) != PT_EMPTY)
		pi->memo = s;
	return (struct bt_point_pos){ s };
}

struct bt_point_pos bt_point_find(struct bt_point *pi, const uint8_t *key, uint32_t klen)
{
	if (!pi->on || klen > BT_POINT_KEY)
		return (struct bt_point_pos){ NULL };
	return locate(pi, key, klen);
}

struct bt_hint bt_point_hint(struct bt_point_pos at)
{
	if (!at.slot || PT_KIND(at.slot) == PT_EMPTY)
		return (struct bt_hint){ 0, 0 };
	return (struct bt_hint){ at.slot->leaf, at.slot->leaf_idx };
}

void bt_point_put(struct bt_point *pi, struct bt_point_pos at, const uint8_t *key, uint32_t klen,
		  const struct paste_extent *ext, uint32_t n, const struct paste_btree_attr *a,
		  struct bt_hint hint)
{
	struct bt_pslot *s = at.slot;
	if (!s || !pi->on)
		return;
	if (PT_KIND(s) == PT_EMPTY) {
		if (4ull * (pi->used + 1) > 3ull * (pi->mask + 1)) {
			if (grow(pi) < 0) {
				bt_point_drop(pi);   /* lookups descend the tree */
				return;
			}
			s = probe(pi, key_hash(pi, key, klen), key, klen);   /* the new table's seed */
		}
		pi->used++;
	}
	fill(s, key, klen, ext, n, a, hint);
}

void bt_point_del(struct bt_point *pi, struct bt_point_pos at)
{
	struct bt_pslot *s = at.slot;
	if (!s || !pi->on || PT_KIND(s) == PT_EMPTY)
		return;
	/* Backward shift: move each later slot of the run into the hole
	 * unless its home lies cyclically in (hole, j]. */
	uint32_t hole = (uint32_t)(s - pi->slot);
	pi->memo = NULL;
	for (uint32_t j = (hole + 1) & pi->mask; PT_KIND(&pi->slot[j]) != PT_EMPTY; j = (j + 1) & pi->mask) {
		uint32_t home = key_hash(pi, pi->slot[j].key, pi->slot[j].klen) & pi->mask;
		if (((j - home) & pi->mask) >= ((j - hole) & pi->mask)) {
			pi->slot[hole] = pi->slot[j];
			hole = j;
		}
	}
	pi->slot[hole].state = PT_EMPTY;
	pi->used--;
}

void bt_point_clear(struct bt_point *pi)
{
	if (!pi->on)
		return;
	bt_point_drop(pi);
	grow(pi);   /* on again, or (ENOMEM) left off: lookups descend */
}

const void *bt_point_prefetch(struct bt_point *pi, const uint8_t *key, uint32_t klen)
{
	if (!pi->on || !indexed(pi, key, klen))
		return NULL;
	pi->ahead = key_hash(pi, key, klen);
	pi->has_ahead = true;
	const struct bt_pslot *s = &pi->slot[pi->ahead & pi->mask];
	__builtin_prefetch(s);
	return s;
}

/* A hint's page, if it is one the tree may be using. */
static uint8_t *hinted_page(const struct paste_btree *t, const struct bt_pslot *s)
{
	if (PT_KIND(s) == PT_EMPTY || s->leaf < BT_FIRST_PAGE || s->leaf >= t->hwm)
		return NULL;
	return bt_pg(t, s->leaf);
}

void bt_point_ahead_leaf(const struct paste_btree *t)
{
	const struct bt_point *pi = &t->point;
	if (!pi->on || !pi->has_ahead)
		return;
	const struct bt_pslot *s = &pi->slot[pi->ahead & pi->mask];
	uint8_t *pg = hinted_page(t, s);
	if (!pg)
		return;
	__builtin_prefetch(pg);
	__builtin_prefetch(bt_slots(pg) + s->leaf_idx);
}

void bt_point_warm_entry(const struct paste_btree *t, const uint8_t *key, uint32_t klen)
{
	const struct bt_pslot *m = t->point.memo;
	if (!m || m->klen != klen || !key_eq(m->key, key, klen))
		return;
	uint8_t *pg = hinted_page(t, m);
	if (pg && m->leaf_idx < bt_h(pg)->nkeys && bt_slots(pg)[m->leaf_idx] < BT_PAGE)
		__builtin_prefetch(bt_entry(pg, m->leaf_idx));
}

int bt_point_get(struct bt_point *pi, const uint8_t *key, uint32_t klen,
		 struct paste_extent *ext, uint32_t *n, uint32_t *len, struct paste_btree_attr *a)
{
	if (!pi->on || klen > BT_POINT_KEY)
		return 1;
	const struct bt_pslot *s = locate(pi, key, klen).slot;
	if (!s)
		return 1;
	if (PT_KIND(s) == PT_EMPTY)
		return -ENOENT;
	if (PT_KIND(s) == PT_TREE)
		return 1;
	if (a)
		*a = (struct paste_btree_attr){ .tag = PT_TAG(s) };
	uint32_t vlen = 0, k = slot_extents(s);
	for (uint32_t i = 0; i < k; i++) {
		vlen += s->ext[i].len;
		if (ext)
			ext[i] = s->ext[i];
	}
	if (n)
		*n = k;
	if (len)
		*len = vlen;
	return 0;
}

static int index_entry(void *arg, const uint8_t *e)
{
	struct bt_point *pi = arg;
	struct paste_extent ext[BT_POINT_EXT];
	struct paste_btree_attr a;
	bt_lattr(e, &a);
	if (e[2] <= BT_POINT_EXT)
		extents_copy(ext, bt_lext(e), e[2]);
	const uint8_t *key = bt_ekey(BT_LEAF, e);
	bt_point_put(pi, bt_point_find(pi, key, ld16(e)), key, ld16(e), ext, e[2], &a,
		     (struct bt_hint){ 0, 0 });
	return pi->on ? 0 : -ENOMEM;
}

int bt_point_build(struct paste_btree *t)
{
	struct bt_point *pi = &t->point;
	bt_point_drop(pi);
	/* Sized for the tree at once: no rehash while it fills. */
	uint64_t cap = PT_MIN_SLOTS;
	while (cap < (1u << 31) && 3 * cap < 4 * t->nkeys + 4)
		cap *= 2;
	int r = cap < (1u << 31) ? resize(pi, (uint32_t)cap) : -ENOMEM;
	return r ? r : bt_leaf_foreach(t, index_entry, pi);
}

/* What bt_point_check's walk carries: the index, the keys it should hold,
 * the first disagreement. */
struct point_audit {
	struct paste_btree *t;
	const struct bt_point *pi;
	uint64_t indexed;
	const char *why;
};

static int check_entry(void *arg, const uint8_t *e)
{
	struct point_audit *a = arg;
	uint32_t klen = ld16(e);
	const uint8_t *key = bt_ekey(BT_LEAF, e);
	if (!indexed(a->pi, key, klen))
		return 0;
	a->indexed++;
	const struct bt_pslot *s = probe(a->pi, key_hash(a->pi, key, klen), key, klen);
	struct paste_extent x[BT_POINT_EXT];
	struct bt_hint hint = { s->leaf, s->leaf_idx };
	struct paste_btree_attr at;
	bt_lattr(e, &at);
	uint8_t *hinted;
	if (PT_KIND(s) == PT_EMPTY)
		a->why = "a key of the tree is missing from the point index";
	else if (s->state != state_of(e[2], &at))
		a->why = "the point index has another value or tag for a key of the tree";
	else if ((hinted = bt_hint_entry(a->t, &hint, key, klen)) != NULL && hinted != e)
		a->why = "a point slot's hint passes its check but names a dead entry";
	if (a->why || PT_KIND(s) == PT_TREE)
		return a->why != NULL;
	extents_copy(x, bt_lext(e), slot_extents(s));
	if (memcmp(x, s->ext, sizeof(x[0]) * slot_extents(s)) != 0)
		a->why = "the point index has other extents for a key of the tree";
	return a->why != NULL;
}

const char *bt_point_check(struct paste_btree *t)
{
	struct point_audit a = { .t = t, .pi = &t->point };
	if (!a.pi->on)
		return NULL;
	if (bt_leaf_foreach(t, check_entry, &a))
		return a.why;
	return a.indexed != a.pi->used ? "the point index holds keys the tree does not" : NULL;
}
