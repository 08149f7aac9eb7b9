/* btree_internal.h - what the B+tree's files share: the on-store formats
 * (node pages, meta slots, log record headers) and the in-DRAM tree.
 * Not API. The formats and the crash-consistency argument are described
 * at the top of lib/btree.c and in docs/design.md ("The B+tree").
 *
 *   lib/btree_page.c     one page: slotted layout, entries, search, the
 *                        "wide" node used for splits and merges, validation
 *   lib/btree.c          pages, copy-on-write, splits and merges, applying
 *                        a change
 *   lib/btree_api.c      set/del/clear (log, then apply), get, cursors,
 *                        open and close
 *   lib/btree_ckpt.c     log records, deferred buffer releases, checkpoint,
 *                        maintain, info
 *   lib/btree_recover.c  recovery at open (meta, walk, replay) and check
 */
#ifndef PASTE_BTREE_INTERNAL_H
#define PASTE_BTREE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "extent_internal.h"
#include "paste.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the store format is little-endian");

#define BT_PAGE        PASTE_STORE_NODE_PAGE   /* 4096 */
#define BT_HDR         32u                     /* page header */
#define BT_CAP         (BT_PAGE - BT_HDR)      /* slots + entries of one page */
#define BT_HINT_HOPS   8                       /* copies a hint is followed through */
#define BT_MEMO_KEY    64                      /* longest key whose descent is kept */
#define BT_FREE_KEEP   4                       /* free pages kept unused, per page in use */
#define BT_UNDERFLOW   (BT_CAP / 4)            /* a non-root node below this merges or borrows */
#define BT_PAGE_MAGIC  0x5442u                 /* "BT" */
#define BT_LEAF        1u
#define BT_INNER       2u
#define BT_FIRST_PAGE  2u                      /* pages 0 and 1 are the meta slots */
#define BT_MAXH        PASTE_BTREE_MAX_HEIGHT
#define BT_LFIX        12u                     /* fixed part of a leaf entry (no word) */
#define BT_WORD        8u                      /* a leaf entry's or a record's word */
#define BT_IFIX        8u                      /* fixed part of an inner entry */
#define BT_EXT         12u                     /* one struct paste_extent on the store */
#define BT_EF_TAG      0x0fu                   /* leaf entry / record flags: the tag */
#define BT_EF_WORD     0x10u                   /* ... a word follows the fixed part */
#define BT_EF_GROUP    0x20u                   /* record: a group's member (a COMMIT ends it) */
#define BT_EF_FIRST    0x40u                   /* record: the group's first */
#define BT_MAX_LEAF_ENTRY  (BT_LFIX + BT_WORD + BT_EXT * PASTE_BTREE_MAX_EXTENTS + PASTE_BTREE_MAX_KEY)
#define BT_MAX_INNER_ENTRY (BT_IFIX + PASTE_BTREE_MAX_KEY)

#define BT_META_MAGIC  0x4d544250u             /* "PBTM" */
#define BT_META_SIZE   128u
#define BT_REC_MAGIC   0x33544250u             /* "PBT3" */
#define BT_REC_HDR     20u                     /* record header before the word and key */

/* Page header (node area page, 4096-aligned in the mapping). */
struct bt_hdr {
	uint32_t crc;       /* CRC32C of bytes [4, 4096), written at checkpoint */
	uint16_t magic;     /* BT_PAGE_MAGIC */
	uint8_t  type;      /* BT_LEAF or BT_INNER */
	uint8_t  level;     /* 0 = leaf; an inner node is one above its children */
	uint64_t gen;       /* checkpoint generation it was written in */
	uint32_t pageno;    /* its own page number */
	uint16_t nkeys;     /* entries */
	uint16_t top;       /* lowest entry byte: entries lie in [top, 4096) */
	uint32_t child0;    /* inner: the leftmost child (keys below entry 0's) */
	uint16_t frag;      /* bytes of holes in [top, 4096) */
	uint16_t zero;
};
_Static_assert(sizeof(struct bt_hdr) == BT_HDR, "page header is 32 bytes");

/* Meta slot (node pages 0 and 1, at offset 0 of the page). */
struct bt_meta {
	uint32_t magic, crc;     /* crc: CRC32C of bytes [8, BT_META_SIZE) */
	uint64_t seq;            /* higher wins */
	uint64_t gen;            /* generation of this checkpoint: its pages have gen <= it */
	uint64_t ckpt_lsn;       /* every tree record with LSN <= it is in this tree */
	uint64_t nkeys;
	uint32_t root;           /* 0: empty tree */
	uint32_t height;         /* 0: empty, 1: the root is a leaf */
	uint32_t hwm;            /* pages [2, hwm) may be in use */
	uint32_t npages;         /* pages in the tree */
	uint32_t node_pages;     /* size of the node area when written */
	uint32_t page_size;      /* BT_PAGE */
	uint64_t uuid[2];        /* the store's: a node area copied from elsewhere is refused */
	uint8_t zero[BT_META_SIZE - 80];
};
_Static_assert(sizeof(struct bt_meta) == BT_META_SIZE, "meta slot is 128 bytes");

/* Page states in DRAM. */
enum { PS_FREE = 0, PS_USED = 1, PS_PENDING = 2, PS_STATE = 3, PS_LISTED = 0x80 };

/* A node being rebuilt (split, merge, redistribution): entries as byte
 * strings of one page's format, without the page limit. */
#define BT_WMAX  1024u
#define BT_WDATA (4u * BT_PAGE)
struct bt_wide {
	uint8_t type, level;
	uint32_t child0;
	uint32_t n;
	uint32_t bytes;          /* sum of (2 + entry size): what a page would need */
	uint32_t used;           /* of data */
	uint32_t off[BT_WMAX];
	uint16_t len[BT_WMAX];
	uint8_t data[BT_WDATA];
};

/* Root-to-leaf path of a descent: page[d] at depth d, idx[d] the child
 * index taken (inner) or the entry index (leaf). */
struct bt_path {
	uint32_t page[BT_MAXH];
	uint16_t idx[BT_MAXH];
	uint32_t depth;
};

/* The point index (lib/btree_point.c): key -> value extents in DRAM, for
 * keys of at most BT_POINT_KEY bytes and values of at most BT_POINT_EXT
 * extents (more: the slot sends the lookup to the tree). */
#define BT_POINT_KEY 32u
#define BT_POINT_EXT 2u
struct bt_pslot;
/* Where a key's leaf entry was last put (leaf 0: not known), kept in its
 * point slot so that an overwrite can skip the descent. A hint is only
 * ever followed after bt_hint_entry has checked it against the page. */
struct bt_hint {
	uint32_t leaf;
	uint16_t idx;
};
struct bt_point {
	struct bt_pslot *slot;        /* mask + 1 slots */
	uint32_t mask, used;
	bool on;                      /* false: not built, or dropped (ENOMEM) */
	/* The slot the last lookup found its key in: a write looks its key
	 * up twice (the service's probe, then the put), and the second
	 * compares the key there instead of hashing and probing. NULL after
	 * a resize or a delete moved slots. */
	struct bt_pslot *memo;
	uint64_t seed;                /* key_hash's, random per table */
	/* The slot of the last key looked ahead (paste_btree_prefetch), as
	 * an index: read back under the mask, it is in the table whatever
	 * moved since, and at worst loads lines no one needs. */
	uint32_t ahead;
	bool has_ahead;
	bool (*skip)(const uint8_t *key, uint32_t klen);   /* paste_btree_config's point_skip */
};

/* A buffer reference to drop once persist epoch `epoch` is durable, and
 * the live value bytes it stood for. */
struct bt_release {
	uint64_t epoch;
	uint32_t buf, len;
};

struct bt_clean;   /* lib/btree_clean.c */
struct bt_group;   /* lib/btree_group.c */

struct paste_btree {
	struct paste_store *st;
	struct paste_wal *w;
	struct paste_persist *p;      /* NULL: read-only */
	const struct paste_store_geom *g;
	struct paste_btree_config cfg;
	uint8_t *nodes;               /* the node area: the shared mapping, or (fsync mode,
				       * read-only) a private copy-on-write mapping of it */
	size_t private_len;           /* > 0: nodes is our private mapping */
	uint8_t *shared;              /* fsync mode: the store's mapping of the node area,
				       * written only at checkpoint (bt_publish) */
	uint32_t npages;

	/* the tree */
	uint32_t root, height;
	uint64_t nkeys;
	uint64_t gen;                 /* generation being written: committed + 1 */
	uint64_t last_lsn;            /* newest record applied */
	uint64_t mods;                /* changes applied: cursors re-seek when it moved */
	/* The last descent made outside a change, kept for the change that
	 * follows it: a DEL checks that its key is there, a put of a key the
	 * point index does not hold was looked up first (pkvs's probe), and
	 * each would descend again; a pop deletes the entry a cursor found
	 * (its first after a seek, bt_memo_keep). Read by any descent outside
	 * a change, used up by the first one inside a SET or DEL (before it
	 * changes a page); dropped when any change ends. */
	struct {
		bool on, found;
		uint32_t klen;
		struct bt_path path;
		uint8_t key[BT_MEMO_KEY];
	} dmemo;
	/* The leaves of the last two full descents, for a descent to a key
	 * beside one of them: the path, and where the separators that bound
	 * the leaf lie (on each side the deepest level's that has one: lo <=
	 * key < hi, either absent at the tree's edge). Good while shape is what
	 * it was: shape counts every page allocated or freed and every split
	 * or merge, the only changes of inner pages. A push to or pop from a
	 * list's end then searches one leaf instead of three pages; two, for
	 * a sorted set's pop, which visits its score and its member entries
	 * by turns. */
	uint64_t shape;
	struct bt_finger {
		uint64_t shape;
		bool on, has_lo, has_hi;
		uint16_t lo_i, hi_i;
		uint32_t lo_pg, hi_pg;
		struct bt_path path;
	} finger[2];
	uint8_t finger_old;           /* the finger a full descent replaces */
	bool applying;                /* inside bt_apply */
	uint64_t hinted_sets;         /* overwrites that followed a hint (paste_btree_info) */
	uint64_t hinted_dels;         /* deletes that did */
	uint64_t descents;            /* bt_descend's that searched (paste_btree_info) */
	uint64_t leaf_descents;       /* of which searched only the finger's leaf */
	bool replaying;               /* recovery: replaced values are released at once */
	bool deleting;                /* paste_btree_deleting: puts may use the reserve */

	/* the committed checkpoint */
	int meta_slot;                /* slot with the newest valid meta, -1: none */
	uint64_t meta_seq, ckpt_lsn;

	/* pages */
	uint8_t *ps;                  /* per page: PS_* */
	/* free pages, reused oldest first: a freed page keeps its moved[]
	 * forward until reuse, so overwrite hints survive checkpoints */
	uint32_t *free_q, free_head, nfree;
	uint32_t hwm;                 /* pages >= hwm were never used since the checkpoint */
	uint32_t *pending, npending;  /* freed in gen; the committed tree still has them */
	uint32_t *moved;              /* per replaced page: its copy-on-write copy until reused, else 0 */
	uint32_t *dirty, ndirty;      /* written in gen (PS_LISTED) */
	uint32_t used;                /* pages in the tree */

	/* references to drop once the change that replaced them is durable */
	struct bt_release *rel;
	size_t rel_head, rel_tail, rel_cap;   /* ring, cap a power of two */
	uint64_t rel_bytes;           /* value bytes of the ring's references */

	/* header buffer: record headers are copied into it densely */
	uint32_t hbuf, hoff;

	/* space: the live value bytes in each buffer, the time (s) it got its
	 * first, their sums; the cleaner's state (lib/btree_clean.c) */
	uint32_t *live, *born;
	uint64_t live_total;
	uint32_t live_bufs;
	uint32_t sparse;              /* buffers with live bytes under the cleaner's limit */
	uint32_t now_s;               /* clock of born[], read once per maintain */
	struct bt_clean *cl;
	struct bt_group *grp;         /* the open group (lib/btree_group.c), NULL: none */
	struct bt_group *grp_spare;   /* the last one's memory, for the next */
	bool ckpt_wanted;             /* the cleaner ended a walk: checkpoint at the next maintain */
	uint64_t space_ckpt_ns, space_checkpoints;

	/* checkpoint triggers and statistics */
	uint64_t recs_since, log_since, first_rec_ns;
	uint64_t checkpoints, replayed, skipped, recovery_ns, walk_ns;
	uint64_t group_dropped;       /* replay: records of groups that had no COMMIT */
	char note[160];               /* what recovery said */

	struct bt_point point;

	/* scratch: the node being fixed, its sibling, a combination, the parent */
	struct bt_wide *wide[4];
	uint8_t entry[BT_MAX_LEAF_ENTRY];
};

/* ---- little helpers ---- */

static inline uint16_t ld16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static inline uint32_t ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline void st16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static inline void st32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

static inline uint8_t *bt_pg(const struct paste_btree *t, uint32_t no)
{
	return t->nodes + (size_t)no * BT_PAGE;
}

static inline struct bt_hdr *bt_h(uint8_t *pg)
{
	return (struct bt_hdr *)(void *)pg;
}

static inline uint16_t *bt_slots(uint8_t *pg)
{
	return (uint16_t *)(void *)(pg + BT_HDR);
}

/* Entry layouts (any byte offset; read with ld*):
 *   leaf:  klen u16, nexts u8, flags u8 (tag, BT_EF_WORD), vlen u32, crc u32
 *          (CRC32C of the value), [word u64], nexts x extent, key
 *   inner: klen u16, zero u16, child u32, key */
static inline uint32_t bt_lhead(const uint8_t *e)
{
	return BT_LFIX + (e[3] & BT_EF_WORD ? BT_WORD : 0u);
}

/* The value's extents of leaf entry e (any alignment: extents_copy). */
static inline const uint8_t *bt_lext(const uint8_t *e)
{
	return e + bt_lhead(e);
}

static inline uint32_t bt_esize(uint8_t type, const uint8_t *e)
{
	return type == BT_LEAF ? bt_lhead(e) + BT_EXT * e[2] + ld16(e) : BT_IFIX + ld16(e);
}

static inline const uint8_t *bt_ekey(uint8_t type, const uint8_t *e)
{
	return type == BT_LEAF ? bt_lext(e) + BT_EXT * e[2] : e + BT_IFIX;
}

static inline uint64_t ld64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline void st64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* A leaf entry's tag, word and CRC. */
static inline void bt_lattr(const uint8_t *e, struct paste_btree_attr *a)
{
	a->tag = e[3] & BT_EF_TAG;
	a->has_word = (e[3] & BT_EF_WORD) != 0;
	a->word = a->has_word ? ld64(e + BT_LFIX) : 0;
	a->has_crc = true;
	a->crc = ld32(e + 8);
}

static inline uint8_t *bt_entry(uint8_t *pg, uint32_t i)
{
	return pg + bt_slots(pg)[i];
}

/* Bytes of a page's capacity in use (slots + entries). */
static inline uint32_t bt_used(uint8_t *pg)
{
	const struct bt_hdr *h = bt_h(pg);
	return 2u * h->nkeys + (BT_PAGE - h->top) - h->frag;
}

/* Child i of an inner page (0..nkeys). */
static inline uint32_t bt_child(uint8_t *pg, uint32_t i)
{
	return i == 0 ? bt_h(pg)->child0 : ld32(bt_entry(pg, i - 1) + 4);
}

static inline void bt_set_child(uint8_t *pg, uint32_t i, uint32_t child)
{
	if (i == 0)
		bt_h(pg)->child0 = child;
	else
		st32(bt_entry(pg, i - 1) + 4, child);
}

/* Big-endian word of the first min(n, 8) bytes at p, zero-padded: words
 * compare as the bytes do. No load reaches past p + n (a key may end a
 * mapping); the branches on n go the same way for keys of one size. */
static inline uint64_t bt_be_word(const uint8_t *p, uint32_t n)
{
	uint64_t v;
	if (n >= 8) {
		memcpy(&v, p, 8);
		return __builtin_bswap64(v);
	}
	if (n >= 4) {
		uint32_t a = __builtin_bswap32(ld32(p)), b = __builtin_bswap32(ld32(p + n - 4));
		return (uint64_t)a << 32 | (uint64_t)b << (8 * (8 - n));
	}
	if (n == 0)
		return 0;
	return (uint64_t)p[0] << 56 | (uint64_t)p[n >> 1] << (56 - 8 * (n >> 1)) |
	       (uint64_t)p[n - 1] << (56 - 8 * (n - 1));
}

/* The key order: memcmp over the shorter length, then the shorter first.
 * <0, 0, >0. bt_keycmp_from starts at byte `at` (a multiple of 8) of keys
 * known to agree before it and to be longer than it (0: nothing known),
 * and says in *same how far (again a multiple of 8, 0 or under both
 * lengths) they agree. Inline and a word at a time: a memcmp call per probe would
 * cost a sixth of a lookup (docs/results.md, "The tree search"). Two
 * equal words of which one ran out of bytes mean one key is a prefix of
 * the other (the zero padding matched zeros or nothing): then the lengths
 * decide. */
static inline __attribute__((always_inline)) int bt_keycmp_from(const uint8_t *a, uint32_t alen,
								 const uint8_t *b, uint32_t blen,
								 uint32_t at, uint32_t *same)
{
	for (;; at += 8) {
		uint32_t ra = alen - at, rb = blen - at;
		uint64_t wa = bt_be_word(a + at, ra), wb = bt_be_word(b + at, rb);
		if (wa != wb) {
			*same = at;
			return wa < wb ? -1 : 1;
		}
		if (ra <= 8 || rb <= 8) {
			*same = at;
			return (alen > blen) - (alen < blen);
		}
	}
}

static inline __attribute__((always_inline)) int bt_keycmp(const uint8_t *a, uint32_t alen, const uint8_t *b, uint32_t blen)
{
	uint32_t same;
	return bt_keycmp_from(a, alen, b, blen, 0, &same);
}

/* ---- lib/btree_page.c ---- */
/* Leaf: first index with key >= k (*found when equal). Inner: the child
 * index to descend into (number of separators <= k). */
uint32_t bt_search(uint8_t *pg, const uint8_t *k, uint32_t klen, bool *found);
/* The same for a leaf, trying first the place `near` (the last search's
 * there): a key at it, just before it or just after it (a list's head or
 * tail, pushed to again) costs one or two compares; others two more than
 * bt_search. */
uint32_t bt_search_near(uint8_t *pg, uint32_t near, const uint8_t *k, uint32_t klen, bool *found);
uint32_t bt_leaf_entry(uint8_t *out, const uint8_t *key, uint32_t klen,
		       const struct paste_extent *ext, uint32_t n, uint32_t vlen,
		       const struct paste_btree_attr *a);
uint32_t bt_inner_entry(uint8_t *out, const uint8_t *key, uint32_t klen, uint32_t child);
void bt_page_init(uint8_t *pg, uint32_t no, uint8_t type, uint8_t level, uint64_t gen);
bool bt_page_insert(uint8_t *pg, uint32_t i, const uint8_t *e, uint32_t size);
void bt_page_remove(uint8_t *pg, uint32_t i);
bool bt_page_replace(uint8_t *pg, uint32_t i, const uint8_t *e, uint32_t size);
void bt_wide_load(struct bt_wide *w, uint8_t *pg);
void bt_wide_insert(struct bt_wide *w, uint32_t i, const uint8_t *e, uint32_t size);
void bt_wide_remove(struct bt_wide *w, uint32_t i);
void bt_wide_append(struct bt_wide *w, const struct bt_wide *from, uint32_t lo, uint32_t hi);
static inline uint8_t *bt_wentry(struct bt_wide *w, uint32_t i) { return w->data + w->off[i]; }
void bt_wide_store(const struct bt_wide *w, uint32_t lo, uint32_t hi, uint32_t child0,
		   uint8_t *pg, uint32_t no, uint64_t gen);
uint32_t bt_wide_split(const struct bt_wide *w);
uint32_t bt_separator(uint8_t *out, const uint8_t *a, uint32_t alen, const uint8_t *b, uint32_t blen);
const char *bt_page_check(uint8_t *pg, uint32_t no, const struct paste_store_geom *g);

/* ---- lib/btree.c ---- */
bool bt_descend(struct paste_btree *t, const uint8_t *key, uint32_t klen, struct bt_path *path);
/* Keep the path (depth pages and indexes, from the root) to the entry of
 * key as the next descent's answer (t->dmemo); ignored inside a change
 * or for a key longer than BT_MEMO_KEY. */
void bt_memo_keep(struct paste_btree *t, const uint32_t *page, const uint16_t *idx, uint32_t depth,
		  const uint8_t *key, uint32_t klen, bool found);
uint32_t bt_page_alloc(struct paste_btree *t);
void bt_page_free(struct paste_btree *t, uint32_t no);
/* Page no joins the free queue's tail. */
static inline void bt_free_push(struct paste_btree *t, uint32_t no)
{
	uint32_t at = t->free_head + t->nfree++;
	t->free_q[at >= t->npages ? at - t->npages : at] = no;
}
uint32_t bt_pages_spare(const struct paste_btree *t);
uint32_t bt_pages_needed(const struct paste_btree *t);
/* The entry *hint names, if it is key's live entry in a page this
 * generation may write in place; else NULL. A hint to a leaf since copied
 * on write is moved along the copies (a few checkpoints at most). */
uint8_t *bt_hint_entry(struct paste_btree *t, struct bt_hint *hint, const uint8_t *key,
		       uint32_t klen);
int bt_apply(struct paste_btree *t, const struct paste_btree_record *r, uint64_t lsn);
/* fn(arg, entry) for every leaf entry of the tree, in page-number order
 * (not key order: no descent); a non-zero return stops the walk and is
 * returned. O(pages + keys). */
int bt_leaf_foreach(struct paste_btree *t, int (*fn)(void *arg, const uint8_t *e), void *arg);

/* ---- lib/btree_clean.c ---- */
/* The tree's own references on a value's buffers, with its live bytes
 * counted per buffer: taken when an entry names the value, dropped when
 * its release is due. */
void bt_value_ref(struct paste_btree *t, const struct paste_extent *ext, uint32_t n);
void bt_value_unref(struct paste_btree *t, uint32_t buf, uint32_t len);
int bt_clean_open(struct paste_btree *t);
void bt_clean_close(struct paste_btree *t);
/* One bounded step of the cleaner, if free buffers are short: 1 when it
 * did work, 0 when there was none, or the store's failure. */
int bt_clean_step(struct paste_btree *t, bool urgent);
void bt_clean_info(const struct paste_btree *t, struct paste_btree_info *out);
/* A checkpoint is wanted for space: free buffers are short and a
 * checkpoint would give some back (records since the last one). */
bool bt_space_short(const struct paste_btree *t);

/* ---- lib/btree_group.c ---- */
/* The flags a record appended now carries (0, or a group's). */
uint8_t bt_group_flags(struct paste_btree *t);
/* Before a change of r's kind is applied inside a group: remember what
 * it replaces, or (SET, DEL) make room to note it as it is applied (0,
 * or -ENOMEM: then the change must not be made). */
int bt_group_note(struct paste_btree *t, const struct paste_btree_record *r);
/* The SET or DEL being applied replaces leaf entry old (NULL: the key
 * was absent); key_entry is a leaf entry holding its key. */
void bt_group_old_entry(struct paste_btree *t, const uint8_t *key_entry, const uint8_t *old);
static inline void bt_group_old(struct paste_btree *t, const uint8_t *key_entry, const uint8_t *old)
{
	if (t->grp)
		bt_group_old_entry(t, key_entry, old);
}
/* Close the open group (its memory kept for the next); at the tree's
 * close, drop that too. */
void bt_group_free(struct paste_btree *t);
void bt_group_drop(struct paste_btree *t);

/* ---- lib/btree_ckpt.c ---- */
/* Room in the release ring for `releases` more (it grows): 0 or -ENOMEM. */
int bt_release_reserve(struct paste_btree *t, size_t releases);
void bt_release_later(struct paste_btree *t, const struct paste_extent *ext, uint32_t n);
void bt_release_due(struct paste_btree *t, bool all_durable);
int bt_append(struct paste_btree *t, uint8_t op, const uint8_t *key, uint32_t klen,
	      const struct paste_extent *val, uint32_t n, uint32_t vlen,
	      const struct paste_btree_attr *a, uint64_t *lsn);
/* bt_append with a range's end after the key (DELRANGE; its length is
 * the header's vlen). */
int bt_append_range(struct paste_btree *t, uint8_t op, const uint8_t *key, uint32_t klen,
		    const uint8_t *hi, uint32_t hilen, const struct paste_extent *val, uint32_t n,
		    uint32_t vlen, const struct paste_btree_attr *a, uint64_t *lsn);
int bt_meta_read(const struct paste_btree *t, int slot, struct bt_meta *m);

/* ---- lib/btree_point.c ---- */
/* Kept in step with the tree by bt_apply; no-ops while not built. A set
 * finds the key's place once (one hash, one probe), reads the hint there,
 * and puts the new value in the same place. */
struct bt_point_pos {
	struct bt_pslot *slot;        /* the key's, or the empty one it would take; NULL:
				       * the index holds no keys like it (or none at all) */
};
/* Valid until the index next changes. */
struct bt_point_pos bt_point_find(struct bt_point *pi, const uint8_t *key, uint32_t klen);
struct bt_hint bt_point_hint(struct bt_point_pos at);
void bt_point_put(struct bt_point *pi, struct bt_point_pos at, const uint8_t *key, uint32_t klen,
		  const struct paste_extent *ext, uint32_t n, const struct paste_btree_attr *a,
		  struct bt_hint hint);
void bt_point_del(struct bt_point *pi, struct bt_point_pos at);
void bt_point_clear(struct bt_point *pi);
/* 0: found (ext[0..*n) filled, n <= BT_POINT_EXT), -ENOENT: not in the
 * tree, 1: ask the tree (a long key, a value of more extents, no index). */
/* Start loading the line a lookup of key reads first (its home slot);
 * returns it, or NULL when the index would not be asked (no index, a
 * long key). */
const void *bt_point_prefetch(struct bt_point *pi, const uint8_t *key, uint32_t klen);
/* A put's leaf, loaded in two steps before its hint is checked: when the
 * put before it ends, the header and slot lines of the leaf the looked
 * ahead key's slot names; when the put starts (its probe left the slot
 * in the memo), the entry those slots point to, to arrive while the
 * value's CRC and the log append run. */
void bt_point_ahead_leaf(const struct paste_btree *t);
void bt_point_warm_entry(const struct paste_btree *t, const uint8_t *key, uint32_t klen);
int bt_point_get(struct bt_point *pi, const uint8_t *key, uint32_t klen,
		 struct paste_extent *ext, uint32_t *n, uint32_t *len, struct paste_btree_attr *a);
/* (Re)build from the leaves; -ENOMEM leaves no index. */
int bt_point_build(struct paste_btree *t);
void bt_point_drop(struct bt_point *pi);
/* NULL, or what disagrees with the tree. */
const char *bt_point_check(struct paste_btree *t);

/* ---- lib/btree_recover.c ---- */
int bt_recover(struct paste_btree *t, struct paste_error *err);

#endif
