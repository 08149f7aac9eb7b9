/*
 * kv_set.h - sets, and what sets and sorted sets (kv_zset.h) share, over
 * the typed core's collections (kv.h).
 *
 * A set's key holds its record (struct kv_coll: id, count); each member
 * is an entry [0xFF][id]['m'][member] with an empty value. A sorted set
 * has the same record and two entries a member (kv_zset.h). A member of
 * up to KV_INLINE bytes is part of its tree key; a longer one is named by
 * its prefix and digest, and its bytes lie at the start of the entry's
 * value (kv_key.c): those are held where they landed, zero copy, when the
 * command's argument lay in a store buffer (struct kv_name's body).
 *
 * Consistency: every change of members goes in one group with the
 * record's new count (kv_cset_begin/kv_cset_end), so after a crash the
 * count equals the members present. The last member removed removes the
 * key (Redis keeps no empty set); its entries go with the key's grave.
 * A collection built whole (the STORE commands, kv_cbuild) is written
 * under a new id whose grave is written first and deleted in the group
 * that puts its record under the key: a crash part way leaves members
 * the sweeper deletes, never half a result under the key.
 */
#ifndef PASTE_SERVICES_KV_SET_H
#define PASTE_SERVICES_KV_SET_H

#include "kv.h"

#define KV_SET_MEMBER 'm'       /* a set's members; a sorted set's member -> score */

/* A set or sorted set opened for a command. */
struct kv_cset {
	struct kv_key key;              /* its key (kv_key_init'ed by the caller) */
	struct kv_obj o;                /* its record (o.coll.count: members now) */
	bool stored;                    /* the key holds this record (false: new, unwritten) */
	bool changed;                   /* a member changed in the batch */
	uint32_t batch;                 /* kv_cset_begin nesting */
	uint64_t saved;                 /* the count the stored record holds */
	struct kv_coll begun;           /* the record when the batch began */
	bool begun_stored;
};

/* Look up the collection at s->key expecting type (KV_SET or KV_ZSET): 0,
 * -ENOENT (absent: kv_cset_new makes an empty one there, written with its
 * first member), -EMEDIUMTYPE (another type: WRONGTYPE). read: counted as
 * a read. */
int kv_cset_open(struct kv *kv, struct kv_cset *s, enum kv_type type, bool read);
void kv_cset_new(struct kv *kv, struct kv_cset *s, enum kv_type type);

/* Changes as one unit: begin (bytes: what they will copy in, so that room
 * is made before the group), the changes, then end with the first error
 * r: 0 writes the record once if the count changed (or removes the key
 * when no member is left) and commits; otherwise everything is undone.
 * Nestable; returns the result. */
int kv_cset_begin(struct kv *kv, struct kv_cset *s, uint64_t bytes);
int kv_cset_end(struct kv *kv, struct kv_cset *s, int r);
/* A change of about `entries` tree entries comes (before its batch): a
 * group holds every record written since the last checkpoint (none runs
 * inside one), so a large one starts after a checkpoint, with the whole
 * log lane for itself. */
void kv_cset_prepare(struct kv *kv, uint64_t entries, uint64_t bytes);
/* Write s again, under a new id, without its entries at positions [lo,
 * hi) of its order (a set's members, a sorted set's score index) and at
 * the sorted positions skip[0..nskip): members written outside a group
 * (kv_cbuild), the record put under the key in one group, its deadline
 * kept. What a large removal does when fewer members stay than go: O(the
 * members kept), and no group of the size of the removal. s is the new
 * record after; 0 or a failure (s as it was). */
int kv_cset_rebuild(struct kv *kv, struct kv_cset *s, uint64_t lo, uint64_t hi, const uint64_t *skip,
		    uint64_t nskip);
/* Removals of at least this many members, with fewer members left, are
 * a rebuild (kv_cset_rebuild). */
#define KV_REBUILD_MIN 1024u

/* A member name as a command gives it: its bytes, and when held is set,
 * the store buffers they lie in (kv_arg_hold's body): a long name is then
 * referenced there rather than copied. */
struct kv_name {
	const uint8_t *p;
	size_t len;
	const struct paste_body *held;
};

/* The tree key of entry kind of collection id named pre[0..plen) +
 * name[0..len) (pre: a sorted set's score, or nothing). When the whole
 * is long, its bytes are gathered in *buf (malloc'd when over cap bytes;
 * the caller frees *buf if it is not stack): mk->p points there. 0 or
 * -ENOMEM. */
int kv_cset_key(const struct kv *kv, struct kv_key *mk, uint64_t id, uint8_t kind, const void *pre,
		uint32_t plen, const void *name, size_t len, uint8_t *stack, size_t cap,
		uint8_t **buf);
/* Write entry mk (made by kv_cset_key from pre + nm) with value
 * val[0..vlen) copied: 0, or as kv_member_put. */
int kv_cset_put(struct kv *kv, struct kv_key *mk, const struct kv_name *nm, uint32_t plen,
		const void *val, size_t vlen);
/* Entry mk: 0 with its value's extents (a long name's left out), or
 * -ENOENT. */
int kv_cset_get(struct kv *kv, struct kv_key *mk, struct paste_extent *ext, uint32_t *n,
		uint32_t *len);

/* ---- sets --------------------------------------------------------------- */

/* Is p[0..len) a member? */
bool kv_set_has(struct kv *kv, const struct kv_cset *s, const void *p, size_t len);
/* Add a member: 1 (added), 0 (there already), or a negative errno. */
int kv_set_add(struct kv *kv, struct kv_cset *s, const struct kv_name *nm);
/* Remove a member: 1, 0 (absent), or a negative errno. */
int kv_set_rem(struct kv *kv, struct kv_cset *s, const void *p, size_t len);
/* Would Redis 7.0 keep this set as an intset (set-max-intset-entries
 * members at most, each an integer as string2ll reads one)? A walk of at
 * most that many members. */
bool kv_set_intset(struct kv *kv, const struct kv_obj *o, uint64_t max_entries);

/* ---- walks -------------------------------------------------------------- */

/* Entries of one kind of a collection in the tree's order (bytes; a long
 * name by its first 375 bytes and then its digest), forward from a tree
 * key or backward from below one. next: 1 with the entry (name: the
 * member, after skip bytes of the tree name: a sorted set's score; a long
 * one read back into the core's buffer, valid until the next call; the
 * value's extents, a long name's left out), 0 at the end, or a negative
 * errno (a damaged long name). */
struct kv_cwalk {
	struct paste_btree_cursor c;
	uint8_t prefix[10];             /* [0xFF][id][kind] */
	bool back;
	uint32_t skip;                  /* bytes of the tree name before the member */
	const uint8_t *t;               /* the tree key returned */
	uint32_t tlen;
	const uint8_t *pre;             /* the tree name's first skip bytes */
	const uint8_t *name;
	size_t nlen;
	uint32_t n, len;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	/* A long name is read back into kv->namebuf, which the next walk's
	 * long name overwrites; walks that hold their members side by side
	 * (a merge) set owns and get a buffer of their own (own, freed by
	 * kv_cmerge_free). */
	bool owns;
	uint8_t *own;
};
/* From the first entry whose tree key is >= prefix + from[0..flen)
 * (from NULL: the first); back: from the last entry below prefix +
 * from[0..flen) (from NULL: the last). */
void kv_cwalk_init(struct kv *kv, struct kv_cwalk *w, uint64_t id, uint8_t kind, uint32_t skip,
		   bool back, const void *from, uint32_t flen);
/* From tree key t itself (a SCAN's saved place): false when it is not
 * one of this collection's. */
bool kv_cwalk_at(struct kv *kv, struct kv_cwalk *w, uint64_t id, uint8_t kind, uint32_t skip,
		 const uint8_t *t, uint32_t tlen);
int kv_cwalk_next(struct kv *kv, struct kv_cwalk *w);
/* w at a member of collection id and kind picked by a random descent of
 * the tree (paste_btree_cursor_sample: O(log N), each member's chance
 * near 1/count): 1 (w holds it), 0 (no pick after a few tries: the
 * caller picks by index), or a failure. */
int kv_cwalk_sample(struct kv *kv, struct kv_cwalk *w, uint64_t id, uint8_t kind, uint64_t seed);
/* Forward walks: pass n entries without reading them (a leaf at a time),
 * or count those before tree name end[0..elen) (end NULL: to the last);
 * returns how many it passed. */
uint64_t kv_cwalk_skip(struct kv_cwalk *w, uint64_t n, const void *end, uint32_t elen);

/* The members of k collections merged in the tree's order, each once
 * (SUNION, ZUNION): kv_cmerge_init, kv_cmerge_add for each collection
 * that has members, then kv_cmerge_next until it returns 0; w[at] is at
 * the member, and so is every walk i that kv_cmerge_holds (in the order
 * of i: Redis's order of aggregation); they are stepped at the next
 * call. kv_cmerge_free at the end. */
struct kv_cmerge {
	uint32_t k;
	struct kv_cwalk *w;             /* w[i]: collection i's walk */
	bool *live;                     /* w[i] is at a member not merged yet */
	int at;                         /* the lowest walk at the member; -1: none yet */
	uint8_t t[PASTE_BTREE_MAX_KEY]; /* the member's tree key */
	uint32_t tlen;
};
/* 0 or -ENOMEM. */
int kv_cmerge_init(struct kv_cmerge *m, uint32_t k);
/* Walk i: collection id's entries of kind. 0 or a failure. */
int kv_cmerge_add(struct kv *kv, struct kv_cmerge *m, uint32_t i, uint64_t id, uint8_t kind);
/* The next member: 1 (w[at] is at it), 0 (no member left) or a failure. */
int kv_cmerge_next(struct kv *kv, struct kv_cmerge *m);
bool kv_cmerge_holds(const struct kv_cmerge *m, uint32_t i);
void kv_cmerge_free(struct kv_cmerge *m);

/* ---- a collection written whole ----------------------------------------- */

/* Members written under a fresh id, outside a group (a grave names it
 * until the end), then put under key k in one group: what k held is
 * dropped (a collection of it swept later), its deadline is not kept. */
struct kv_cbuild {
	struct kv_obj o;                /* the record being built (o.coll.count: members so far) */
	uint8_t grave[16];
	uint32_t glen;
};
int kv_cbuild_begin(struct kv *kv, struct kv_cbuild *b, enum kv_type type);
/* Write one entry of the new collection (as kv_cset_put, with
 * o.coll.id): the caller counts members in b->o.coll.count. */
int kv_cbuild_put(struct kv *kv, struct kv_cbuild *b, uint8_t kind, const void *pre, uint32_t plen,
		  const void *name, size_t len, const void *val, size_t vlen);
/* r == 0: the record goes under k (or, with no member, k is removed) in
 * one group with the grave's delete; returns 0 or the failure. r != 0:
 * the members are left to the sweeper; returns r. */
int kv_cbuild_end(struct kv *kv, struct kv_cbuild *b, struct kv_key *k, int r);

#endif
