/*
 * kv_hash.h - hashes over the typed core's collections (kv.h): a hash
 * key's value is its record (struct kv_coll: id, count), and each field
 * is a member entry [0xFF][id]['f'][field] whose value is the field's
 * value, held where it landed (over KV_PACK_MAX bytes) or packed densely,
 * or, too long for one entry, in chunks of its own (kv_elem, kv.h).
 *
 * Consistency: a change that touches a field and the record's count goes
 * in one group (kv_begin/kv_commit), so after a crash the count always
 * equals the fields present. A change to an existing field's value alone
 * is one entry and needs no group. The last field deleted deletes the key
 * (Redis's rule: no empty hashes); its entries go with the key's grave.
 *
 * Use: kv_hash_open (and kv_hash_new where the key holds nothing), then
 * reads (get, walk) and changes (set, del).
 * One change stands alone; several that must be one unit (HSET of many
 * fields, HDEL of many) go between kv_hash_begin and kv_hash_end, which
 * writes the record once.
 */
#ifndef PASTE_SERVICES_KV_HASH_H
#define PASTE_SERVICES_KV_HASH_H

#include "kv.h"

#define KV_HASH_FIELD 'f'               /* the member kind of a hash's fields */

struct kv_hash {
	struct kv_key key;              /* its key */
	struct kv_obj o;                /* its record (o.coll.count: the fields now) */
	bool stored;                    /* the key holds this record (false: new, unwritten) */
	bool changed;                   /* a field changed in the batch */
	uint32_t batch;                 /* kv_hash_begin nesting */
	uint64_t saved;                 /* the count the stored record holds */
	struct kv_coll begun;           /* the record when the batch began (put back on abort) */
	bool begun_stored;
};

/* Look up the hash at h->key (kv_key_init'ed by the caller; its bytes
 * must outlive h): 0, -ENOENT (no such key: kv_hash_new makes a new empty
 * one there, written with its first field), or -EMEDIUMTYPE (the key
 * holds another type: WRONGTYPE). read: counted as a read (kv_lookup). */
int kv_hash_open(struct kv *kv, struct kv_hash *h, bool read);
void kv_hash_new(struct kv *kv, struct kv_hash *h);

/* A look ahead: a command on field f of the hash at key k comes (k
 * kv_key_init'ed). When k is the hash opened last, start loading the
 * field's index slot now, before the record is read: pipelined commands
 * on one hash find it in the cache. Changes nothing. */
void kv_hash_prefetch(struct kv *kv, const struct kv_key *k, const void *f, size_t flen);

/* Would Redis keep this hash (o as kv_lookup found it) as a listpack,
 * with its defaults (hash-max-listpack-entries 512, -value 64): at most
 * 512 fields, no name or value over 64 bytes? OBJECT ENCODING says so, and
 * HSCAN answers such a hash whole, as Redis does. A walk of at most 512
 * fields. */
#define KV_HASH_SMALL_FIELDS 512u
#define KV_HASH_SMALL_BYTES 64u
bool kv_hash_small(struct kv *kv, const struct kv_obj *o);

/* A field's value: 0 with its extents (room for PASTE_BTREE_MAX_EXTENTS)
 * and bytes, *big its chunks' id when it is in chunks (kv_elem; big NULL:
 * such a value is -EFBIG), or -ENOENT. */
int kv_hash_get(struct kv *kv, const struct kv_hash *h, const void *f, size_t flen,
		struct paste_extent *ext, uint32_t *n, uint32_t *len, uint64_t *big);

/* Set field f to the value in ext[0..n) (the tree takes its own
 * references), to bytes copied in, or to a gathered body (released here;
 * small ones are packed). *created: the field is new. 0, or -ENOSPC,
 * -EFBIG, -ENAMETOOLONG (a long field name and its value do not fit one
 * entry), or the store's failure; nothing changed then. */
int kv_hash_set(struct kv *kv, struct kv_hash *h, const void *f, size_t flen,
		const struct paste_extent *ext, uint32_t n, bool *created);
int kv_hash_set_bytes(struct kv *kv, struct kv_hash *h, const void *f, size_t flen,
		      const void *val, size_t len, bool *created);
int kv_hash_set_body(struct kv *kv, struct kv_hash *h, const void *f, size_t flen,
		     struct paste_body *b, bool *created);
/* Delete field f: 1, 0 (absent), or a negative errno. The last field
 * deletes the key. */
int kv_hash_del(struct kv *kv, struct kv_hash *h, const void *f, size_t flen);

/* Several changes as one unit: begin (bytes: what they will copy in, to
 * make room before the group, where no room can be made), then set/del,
 * then end with the first error r (0: the record is written once if the
 * count changed, or the key removed when no field is left, and the group
 * commits; else everything is undone and the count put back). Returns the
 * result. */
int kv_hash_begin(struct kv *kv, struct kv_hash *h, uint64_t bytes);
int kv_hash_end(struct kv *kv, struct kv_hash *h, int r);

/* The fields in order (the tree's: bytes, a long name by its first 375
 * bytes and then its digest), from field `from` (NULL: the first). next:
 * 1 with the field in w (name: a long one read back into a buffer of the
 * core's, valid until the next call; the value's extents), 0 at the end,
 * or a negative errno (a damaged long name). */
struct kv_hash_walk {
	struct kv_members m;
	uint8_t *longbuf;
	const uint8_t *name;            /* the field next returned */
	size_t nlen;
	uint32_t n, len;                /* its value: ext[0..n), len bytes */
	uint64_t big;                   /* ... or in chunks (kv_elem): their id, ext the record */
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
};
int kv_hash_walk_init(struct kv *kv, const struct kv_hash *h, struct kv_hash_walk *w,
		      const void *from, size_t flen);
/* Pass the next n fields without returning them (a leaf of the tree at a
 * time: O(log N + n / fields per leaf)); how many were passed (fewer at
 * the end). The next kv_hash_walk_next returns the field after them. */
uint64_t kv_hash_walk_skip(struct kv_hash_walk *w, uint64_t n);
/* A walk from the member whose tree key is t (its id must be h's: false
 * otherwise), or after it. */
bool kv_hash_walk_at(struct kv *kv, const struct kv_hash *h, struct kv_hash_walk *w,
		     const uint8_t *t, uint32_t tlen);
int kv_hash_walk_next(struct kv *kv, struct kv_hash_walk *w);
/* The tree key of the field next returned: where a later walk may
 * resume (kv_hash_walk_at). */
const uint8_t *kv_hash_walk_pos(const struct kv_hash_walk *w, uint32_t *tlen);

#endif
