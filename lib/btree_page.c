/* btree_page.c - one node page of the B+tree, and the "wide" node used
 * while a page is split, merged or rebalanced.
 *
 * A page is slotted: the 32-byte header (struct bt_hdr), then an array of
 * nkeys u16 slots (entry offsets, in key order), free space, and the
 * entries packed from the end of the page down to `top`; removing an entry
 * leaves a hole (counted in `frag`) that the next insert that needs the
 * room compacts away. Capacity per page: BT_CAP = 4064 bytes of slots and
 * entries. A leaf entry is 12 (+ 8 with a word) + 12 x nexts + klen
 * bytes, an inner entry 8 + klen; an inner page with k entries has k + 1 children (child0 in the
 * header, then one per entry: entry i's child holds the keys >= its key
 * and < entry i+1's).
 *
 * Costs: a search is a binary search over the slots with one inline
 * compare per probe (bt_keycmp: a word at a time, from the first word
 * where the keys bounding the probe differ); an insert or remove
 * moves slots (2 bytes each) and copies one entry; a compaction copies
 * the page once (~0.3 us).
 */
#include <stdlib.h>
#include "btree_internal.h"

int paste_btree_keycmp(const void *a, uint32_t alen, const void *b, uint32_t blen)
{
	return bt_keycmp(a, alen, b, blen);
}

uint32_t bt_search(uint8_t *pg, const uint8_t *k, uint32_t klen, bool *found)
{
	const struct bt_hdr *h = bt_h(pg);
	uint32_t lo = 0, hi = h->nkeys;
	/* k agrees with the key below lo for lo_same bytes and with the key
	 * at hi for hi_same; every key between agrees with it for the fewer
	 * of the two, which the compares skip (the keys of one collection
	 * share their first word, and a probe then compares one word). */
	uint32_t lo_same = 0, hi_same = 0;
	*found = false;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2, same;
		const uint8_t *e = bt_entry(pg, mid);
		int c = bt_keycmp_from(bt_ekey(h->type, e), ld16(e), k, klen,
				       lo_same < hi_same ? lo_same : hi_same, &same);
		if (c < 0) {
			lo = mid + 1;
			lo_same = same;
		} else if (c > 0) {
			hi = mid;
			hi_same = same;
		} else {
			*found = true;
			return h->type == BT_LEAF ? mid : mid + 1;
		}
	}
	return lo;
}

uint32_t bt_search_near(uint8_t *pg, uint32_t near, const uint8_t *k, uint32_t klen, bool *found)
{
	const struct bt_hdr *h = bt_h(pg);
	uint32_t n = h->nkeys;
	if (near > n)
		return bt_search(pg, k, klen, found);
	/* c: entry near against k (past the last: greater); then its
	 * neighbour on k's side decides, unless k lies beyond it too. */
	const uint8_t *e = near < n ? bt_entry(pg, near) : NULL;
	int c = e ? bt_keycmp(bt_ekey(BT_LEAF, e), ld16(e), k, klen) : 1;
	*found = c == 0;
	if (c == 0)
		return near;
	uint32_t at = c > 0 ? near - 1 : near + 1;   /* the neighbour (near - 1 wraps when 0) */
	if (c > 0 && near == 0)
		return 0;
	if (c < 0 && at == n)
		return n;
	e = bt_entry(pg, at);
	int d = bt_keycmp(bt_ekey(BT_LEAF, e), ld16(e), k, klen);
	if (d == 0) {
		*found = true;
		return at;
	}
	if (c > 0 && d < 0)
		return near;             /* between near - 1 and near */
	if (c < 0 && d > 0)
		return at;               /* between near and near + 1 */
	return bt_search(pg, k, klen, found);
}

uint32_t bt_leaf_entry(uint8_t *out, const uint8_t *key, uint32_t klen,
		       const struct paste_extent *ext, uint32_t n, uint32_t vlen,
		       const struct paste_btree_attr *a)
{
	st16(out, (uint16_t)klen);
	out[2] = (uint8_t)n;
	out[3] = (uint8_t)((a->tag & BT_EF_TAG) | (a->has_word ? BT_EF_WORD : 0));
	st32(out + 4, vlen);
	st32(out + 8, a->crc);
	uint32_t at = BT_LFIX;
	if (a->has_word) {
		st64(out + at, a->word);
		at += BT_WORD;
	}
	if (n)
		extents_copy(out + at, ext, n);
	at += BT_EXT * n;
	memcpy(out + at, key, klen);
	return at + klen;
}

uint32_t bt_inner_entry(uint8_t *out, const uint8_t *key, uint32_t klen, uint32_t child)
{
	st16(out, (uint16_t)klen);
	st16(out + 2, 0);
	st32(out + 4, child);
	memmove(out + BT_IFIX, key, klen);
	return BT_IFIX + klen;
}

void bt_page_init(uint8_t *pg, uint32_t no, uint8_t type, uint8_t level, uint64_t gen)
{
	struct bt_hdr *h = bt_h(pg);
	memset(h, 0, sizeof(*h));
	h->magic = BT_PAGE_MAGIC;
	h->type = type;
	h->level = level;
	h->gen = gen;
	h->pageno = no;
	h->top = BT_PAGE;
}

/* Rewrite the entries densely at the end of the page (holes gone). */
static void page_compact(uint8_t *pg)
{
	uint8_t copy[BT_PAGE];
	struct bt_hdr *h = bt_h(pg);
	memcpy(copy, pg, BT_PAGE);
	uint32_t top = BT_PAGE;
	for (uint32_t i = 0; i < h->nkeys; i++) {
		const uint8_t *e = copy + bt_slots(copy)[i];
		uint32_t size = bt_esize(h->type, e);
		top -= size;
		memcpy(pg + top, e, size);
		bt_slots(pg)[i] = (uint16_t)top;
	}
	h->top = (uint16_t)top;
	h->frag = 0;
}

/* Insert entry e (size bytes) at index i if the page has the room
 * (compacting when only the holes make it fit). */
bool bt_page_insert(uint8_t *pg, uint32_t i, const uint8_t *e, uint32_t size)
{
	struct bt_hdr *h = bt_h(pg);
	if (bt_used(pg) + 2 + size > BT_CAP)
		return false;
	if (BT_HDR + 2u * (h->nkeys + 1u) + size > h->top)
		page_compact(pg);
	uint16_t *s = bt_slots(pg);
	h->top = (uint16_t)(h->top - size);
	memcpy(pg + h->top, e, size);
	memmove(s + i + 1, s + i, 2u * (h->nkeys - i));
	s[i] = h->top;
	h->nkeys++;
	return true;
}

/* Entry i becomes e (size bytes). One of the same size (an overwrite
 * with as many extents) takes the old one's bytes: no hole, so no
 * compaction every few overwrites of a page (docs/results.md,
 * "Instructions per pipelined request"). False when a larger e does not
 * fit (the page is unchanged). */
bool bt_page_replace(uint8_t *pg, uint32_t i, const uint8_t *e, uint32_t size)
{
	uint8_t *old = bt_entry(pg, i);
	uint32_t osize = bt_esize(bt_h(pg)->type, old);
	if (osize == size) {
		memcpy(old, e, size);
		return true;
	}
	if (bt_used(pg) - osize + size > BT_CAP)
		return false;
	bt_page_remove(pg, i);
	return bt_page_insert(pg, i, e, size);
}

void bt_page_remove(uint8_t *pg, uint32_t i)
{
	struct bt_hdr *h = bt_h(pg);
	uint16_t *s = bt_slots(pg);
	uint32_t size = bt_esize(h->type, pg + s[i]);
	if (s[i] == h->top)
		h->top = (uint16_t)(h->top + size);
	else
		h->frag = (uint16_t)(h->frag + size);
	memmove(s + i, s + i + 1, 2u * (h->nkeys - i - 1));
	h->nkeys--;
	if (h->nkeys == 0) {
		h->top = BT_PAGE;
		h->frag = 0;
	}
}

/* ---- wide nodes ---------------------------------------------------------- */

void bt_wide_load(struct bt_wide *w, uint8_t *pg)
{
	const struct bt_hdr *h = bt_h(pg);
	w->type = h->type;
	w->level = h->level;
	w->child0 = h->child0;
	w->n = 0;
	w->bytes = 0;
	w->used = 0;
	for (uint32_t i = 0; i < h->nkeys; i++) {
		const uint8_t *e = bt_entry(pg, i);
		bt_wide_insert(w, i, e, bt_esize(h->type, e));
	}
}

void bt_wide_insert(struct bt_wide *w, uint32_t i, const uint8_t *e, uint32_t size)
{
	if (w->n >= BT_WMAX || w->used + size > BT_WDATA)
		abort();   /* cannot happen: a node being fixed is at most ~2 pages */
	memmove(w->off + i + 1, w->off + i, sizeof(w->off[0]) * (w->n - i));
	memmove(w->len + i + 1, w->len + i, sizeof(w->len[0]) * (w->n - i));
	memcpy(w->data + w->used, e, size);
	w->off[i] = w->used;
	w->len[i] = (uint16_t)size;
	w->used += size;
	w->bytes += 2 + size;
	w->n++;
}

void bt_wide_remove(struct bt_wide *w, uint32_t i)
{
	w->bytes -= 2u + w->len[i];
	memmove(w->off + i, w->off + i + 1, sizeof(w->off[0]) * (w->n - i - 1));
	memmove(w->len + i, w->len + i + 1, sizeof(w->len[0]) * (w->n - i - 1));
	w->n--;
}

void bt_wide_append(struct bt_wide *w, const struct bt_wide *from, uint32_t lo, uint32_t hi)
{
	for (uint32_t i = lo; i < hi; i++)
		bt_wide_insert(w, w->n, from->data + from->off[i], from->len[i]);
}

/* Write entries [lo, hi) of w as page no (child0 for an inner page). */
void bt_wide_store(const struct bt_wide *w, uint32_t lo, uint32_t hi, uint32_t child0,
		   uint8_t *pg, uint32_t no, uint64_t gen)
{
	bt_page_init(pg, no, w->type, w->level, gen);
	struct bt_hdr *h = bt_h(pg);
	uint32_t top = BT_PAGE;
	for (uint32_t i = lo; i < hi; i++) {
		top -= w->len[i];
		memcpy(pg + top, w->data + w->off[i], w->len[i]);
		bt_slots(pg)[i - lo] = (uint16_t)top;
	}
	if (BT_HDR + 2u * (hi - lo) > top)
		abort();   /* the caller checked that it fits */
	h->nkeys = (uint16_t)(hi - lo);
	h->top = (uint16_t)top;
	h->child0 = w->type == BT_INNER ? child0 : 0;
}

/* Where to cut an overfull (or combined) node into two pages with the
 * bytes as even as they go. Leaf: entries [0, i) and [i, n). Inner: entry
 * i moves up; [0, i) and (i, n). Every choice keeps both halves within a
 * page: the node holds at most two pages' worth minus an entry. */
uint32_t bt_wide_split(const struct bt_wide *w)
{
	uint32_t best = 0, best_max = UINT32_MAX, left = 0;
	bool leaf = w->type == BT_LEAF;
	for (uint32_t i = 1; i + (leaf ? 0u : 1u) < w->n; i++) {
		left += 2u + w->len[i - 1];
		uint32_t right = w->bytes - left - (leaf ? 0u : 2u + w->len[i]);
		uint32_t m = left > right ? left : right;
		if (left <= BT_CAP && right <= BT_CAP && m < best_max) {
			best_max = m;
			best = i;
		}
	}
	if (!best)
		abort();   /* cannot happen: see the callers' size arguments */
	return best;
}

/* The shortest key s with a < s <= b (a < b): b cut after the first byte
 * where they differ. Separators bound the search, they need not be keys. */
uint32_t bt_separator(uint8_t *out, const uint8_t *a, uint32_t alen, const uint8_t *b, uint32_t blen)
{
	uint32_t cp = 0;
	while (cp < alen && cp < blen && a[cp] == b[cp])
		cp++;
	uint32_t len = cp + 1 <= blen ? cp + 1 : blen;
	memcpy(out, b, len);
	return len;
}

/* ---- validation ---------------------------------------------------------- */

/* Why page `no` cannot be a node we wrote, or NULL. Checks everything one
 * page can say about itself, so that every later access to it stays inside
 * it: header, slots below top, every entry inside the page with a sane
 * size, keys 1..512 bytes in strictly rising order, leaf extents inside the
 * buffer area and summing to the value length. CRC, generation, level and
 * bounds are the walk's (it knows the context). */
const char *bt_page_check(uint8_t *pg, uint32_t no, const struct paste_store_geom *g)
{
	const struct bt_hdr *h = bt_h(pg);
	if (h->magic != BT_PAGE_MAGIC)
		return "bad page magic";
	if (h->pageno != no)
		return "page number does not match its place";
	if ((h->type != BT_LEAF && h->type != BT_INNER) || (h->type == BT_LEAF) != (h->level == 0) ||
	    h->level >= BT_MAXH || h->zero)
		return "bad page type or level";
	if (h->top > BT_PAGE || BT_HDR + 2u * h->nkeys > h->top || h->frag > BT_PAGE - h->top)
		return "bad slot area";
	if (h->type == BT_LEAF && h->child0)
		return "leaf with a child";
	uint32_t sum = 0;
	const uint8_t *prev = NULL;
	uint32_t prevlen = 0;
	uint16_t order[BT_CAP / 2];   /* entry offsets, to find overlaps */
	for (uint32_t i = 0; i < h->nkeys; i++) {
		uint32_t off = bt_slots(pg)[i];
		order[i] = (uint16_t)off;
		if (off < h->top || off > BT_PAGE - (h->type == BT_LEAF ? BT_LFIX : BT_IFIX))
			return "entry outside the page";
		const uint8_t *e = pg + off;
		uint32_t klen = ld16(e);
		if (klen == 0 || klen > PASTE_BTREE_MAX_KEY)
			return "bad key length";
		if (h->type == BT_LEAF && (e[2] > PASTE_BTREE_MAX_EXTENTS ||
					       (e[3] & ~(BT_EF_TAG | BT_EF_WORD))))
			return "bad extent count or flags";
		if (h->type == BT_INNER && ld16(e + 2))
			return "bad inner entry";
		uint32_t size = bt_esize(h->type, e);
		if (size > BT_PAGE - off)
			return "entry outside the page";
		sum += size;
		const uint8_t *key = bt_ekey(h->type, e);
		if (prev && bt_keycmp(prev, prevlen, key, klen) >= 0)
			return "keys out of order";
		prev = key;
		prevlen = klen;
		if (h->type == BT_LEAF) {
			uint64_t total = 0;
			for (uint32_t x = 0; x < e[2]; x++) {
				struct paste_extent ext;
				memcpy(&ext, bt_lext(e) + BT_EXT * x, BT_EXT);
				if (ext.buf >= g->nbufs || ext.off > g->buf_size ||
				    ext.len > g->buf_size - ext.off)
					return "value extent outside the buffer area";
				total += ext.len;
			}
			if (total != ld32(e + 4))
				return "value extents do not add up to its length";
		}
	}
	if (sum > BT_PAGE - h->top || BT_PAGE - h->top - sum < h->frag ||
	    2u * h->nkeys + sum > BT_CAP)
		return "entries overlap or overfill the page";
	/* Disjoint entries: sorted by offset (descending; our pages are
	 * nearly so, which makes this insertion sort ~linear), each must end
	 * where the next one up begins or below. Compaction and the in-place
	 * operations rely on it. */
	for (uint32_t i = 1; i < h->nkeys; i++) {
		uint16_t v = order[i];
		uint32_t j = i;
		for (; j > 0 && order[j - 1] < v; j--)
			order[j] = order[j - 1];
		order[j] = v;
	}
	for (uint32_t i = 1; i < h->nkeys; i++)
		if (order[i] + bt_esize(h->type, pg + order[i]) > order[i - 1])
			return "entries overlap";
	return NULL;
}
