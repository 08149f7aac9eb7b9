/*
 * kv_list.h - lists over the typed core's collections (kv.h).
 *
 * A list key's value is its record (struct kv_coll): id, count, and the
 * positions head (the first element's) and tail (one past the last).
 * Element i (0 from the head) is the member entry [0xFF][id]['l'][pos]
 * with pos = head + i, an ordered 64-bit number (kv_list_pos_key: the
 * sign bit flipped, big-endian, so the tree orders positions as numbers).
 * The positions of a list are dense: every pos in [head, tail) holds an
 * element, count = tail - head. So a push at either end writes position
 * head - 1 or tail (one entry), a pop reads and deletes head or tail - 1,
 * element i is one lookup, and a range is one walk of the tree from
 * head + i. A change in the middle (LINSERT, LREM) moves the elements on
 * the nearer side by one position each (O(distance to that end), in one
 * group); LTRIM deletes at the ends.
 *
 * The record is the commit point of a change to one list. A push writes
 * its elements first (outside [head, tail): nobody reads them), then the
 * record that takes them in; a pop writes the record that leaves the
 * elements out first, then deletes them. After a crash at any instant the
 * list is either as it was or as the change left it; what a cut-short
 * change wrote outside the range is overwritten by the next push at that
 * end or swept with the list (docs/design.md, "Lists"). A new list is
 * written in one group (its elements would otherwise lie under an id no
 * record and no grave names), and so is every change that touches two
 * lists (LMOVE) or moves elements (LINSERT, LREM): kv_list_begin.
 *
 * Values: an element over KV_PACK_MAX bytes is held where it landed (a
 * body: kv_list_push_body), smaller ones are packed densely; one too long
 * for one entry is in chunks of its own (kv_elem, kv.h). The last element popped or removed
 * deletes the key (Redis's rule: no empty lists).
 */
#ifndef PASTE_SERVICES_KV_LIST_H
#define PASTE_SERVICES_KV_LIST_H

#include "kv.h"

#define KV_LIST_ELEM 'l'        /* the member kind of a list's elements */

enum kv_end { KV_HEAD = 0, KV_TAIL = 1 };

struct kv_list {
	struct kv_key key;              /* its key (kv_key_init'ed by the caller) */
	struct kv_obj o;                /* its record: o.coll.{id, count, head, tail} */
	bool stored;                    /* the key holds a record of this id */
	bool group;                     /* kv_list_begin opened a group */
	bool dirty;                     /* the record changed since it was written */
	uint32_t depth;                 /* kv_list_begin nesting */
	struct kv_coll was;             /* the record as kv_list_begin found it */
	int64_t slot;                   /* the position kv_list_open_slot opened (INT64_MIN: none) */
	bool was_stored;
};

/* Look up the list at l->key: 0, -ENOENT (no such key: kv_list_new makes
 * an empty one, written with its first element), or -EMEDIUMTYPE (another
 * type: WRONGTYPE). read: counted as a read. */
int kv_list_open(struct kv *kv, struct kv_list *l, bool read);
void kv_list_new(struct kv *kv, struct kv_list *l);

/* The tree key of position pos of list id. */
void kv_list_pos_key(struct kv_key *mk, uint64_t id, int64_t pos);
/* t is such a key. The tree's point index leaves these out (its
 * point_skip): pushes and pops find their element's leaf by a walk or
 * beside the last, never by a probe, and a queue of millions of elements
 * costs no DRAM there (85-170 bytes each); LINDEX and LSET descend. */
bool kv_list_elem_key(const uint8_t *t, uint32_t tlen);

/* The element at position pos of list id: 0 with its value's extents
 * (room for PASTE_BTREE_MAX_EXTENTS) and bytes, *big its chunks' id when
 * it is in chunks (kv_elem, kv.h; big NULL: such an element is -EFBIG),
 * or -ENOENT. One lookup. kv_list_get: element i (0 <= i < count) of l,
 * -EBADMSG when its position is empty (a damaged list). */
int kv_list_get_pos(struct kv *kv, uint64_t id, int64_t pos, struct paste_extent *ext,
		    uint32_t *n, uint32_t *len, uint64_t *big);
int kv_list_get(struct kv *kv, const struct kv_list *l, uint64_t i, struct paste_extent *ext,
		uint32_t *n, uint32_t *len, uint64_t *big);

/* ---- changes ------------------------------------------------------------ */

/* A change: begin (bytes: what it will copy in, to make room first; group:
 * one group even for a list that exists), the changes, then end with the
 * first error r: 0 writes the record (or deletes the key when the list is
 * empty) and commits; otherwise nothing of it is kept (the group aborted,
 * the record not written) and l is as it was. Returns the result. */
int kv_list_begin(struct kv *kv, struct kv_list *l, uint64_t bytes, bool group);
int kv_list_end(struct kv *kv, struct kv_list *l, int r);

/* Push one element at an end: from extents held by the caller (the tree
 * takes its own references; big: they are the record of an element in
 * chunks, moved from another position), bytes copied in, or a gathered
 * body (released here; small ones are packed). 0, -ENOSPC, -EFBIG, or
 * the store's failure. */
int kv_list_push(struct kv *kv, struct kv_list *l, enum kv_end e, const struct paste_extent *ext,
		 uint32_t n, bool big);
int kv_list_push_bytes(struct kv *kv, struct kv_list *l, enum kv_end e, const void *p, size_t len);
int kv_list_push_body(struct kv *kv, struct kv_list *l, enum kv_end e, struct paste_body *b);

/* Element i becomes the value given (LSET): one entry, no group needed.
 * 0, -ENOENT (out of range), or as kv_list_push. */
int kv_list_set(struct kv *kv, struct kv_list *l, uint64_t i, const struct paste_extent *ext,
		uint32_t n);
int kv_list_set_bytes(struct kv *kv, struct kv_list *l, uint64_t i, const void *p, size_t len);
int kv_list_set_body(struct kv *kv, struct kv_list *l, uint64_t i, struct paste_body *b);

/* Take k elements (0 < k <= count) off an end, as one change: the record
 * leaving them out is written first (or the key deleted when none is
 * left), and their entries are deleted by kv_list_drop after the caller
 * read them (kv_list_get and walks still find them until then; their
 * extents stay valid until the next kv_pass). *pos: the position of the
 * first taken element in list order (head side first). 0, or a negative
 * errno (nothing taken). Inside a group (kv_list_begin) the record is
 * written at kv_list_end instead. */
int kv_list_take(struct kv *kv, struct kv_list *l, enum kv_end e, uint64_t k, int64_t *pos);
/* Delete the entries of positions [from, to) of l's id (taken ones): in
 * range deletes of at most 256 keys each. Nothing when the key was
 * deleted (its grave takes them). A failure leaves them outside the
 * list, where nothing reads them; returns it. */
int kv_list_drop(struct kv *kv, const struct kv_list *l, int64_t from, int64_t to);

/* Make room for one element at index i (0 <= i <= count): the elements on
 * the nearer side move one position away; the caller then writes index i
 * with kv_list_set*. Inside kv_list_begin(group). */
int kv_list_open_slot(struct kv *kv, struct kv_list *l, uint64_t i);
/* Remove the elements at the sorted indexes idx[0..k) (LREM): the
 * elements between them and the nearer end move up. Inside
 * kv_list_begin(group). */
int kv_list_remove_at(struct kv *kv, struct kv_list *l, const uint64_t *idx, uint64_t k);
/* The elements in chunks among positions [from, to) of list id are
 * removed: their chunks' graves (kv_elem_bury). 0 or the error. */
int kv_list_bury(struct kv *kv, uint64_t id, int64_t from, int64_t to);
/* Keep elements [start, stop] only (0 <= start <= stop < count) or none
 * (start > stop): the record first, then the ends' entries deleted. */
int kv_list_trim(struct kv *kv, struct kv_list *l, uint64_t start, uint64_t stop);

/* ---- walks -------------------------------------------------------------- */

/* The elements at positions [from, to) of list id in order, or from the
 * last back to the first (back: the tree's walk either way;
 * kv_list_walk_init: elements [i, count) of l). next: 1 with the element
 * at position w->at in ext[0..n), len bytes (valid until the next
 * kv_pass), 0 past the last, -EBADMSG (a position missing: a damaged
 * list). Writes between steps are fine (the cursor seeks again). */
struct kv_list_walk {
	struct paste_btree_cursor c;
	uint8_t prefix[10];
	bool back;
	int64_t from, to;               /* the positions still to come */
	int64_t at;                     /* the element next returned */
	uint32_t n, len;
	uint64_t big;                   /* in chunks (kv_elem): their id, ext the record */
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
};
void kv_list_walk_pos(struct kv *kv, struct kv_list_walk *w, uint64_t id, int64_t from, int64_t to,
		      bool back);
void kv_list_walk_init(struct kv *kv, const struct kv_list *l, struct kv_list_walk *w, uint64_t i);
int kv_list_walk_next(struct kv *kv, struct kv_list_walk *w);


#endif
