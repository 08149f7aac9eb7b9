/*
 * kv_stream.h - streams over the typed core's collections (kv.h), as
 * Redis 7.0's: entries ordered by ID, consumer groups with their pending
 * entries lists and consumers.
 *
 * A stream's key holds its record (struct kv_coll: id, count = entries
 * now, and the stream's own words: the last ID given, the largest ID
 * deleted, how many entries were ever added). Its other parts are member
 * entries of the collection, all of fixed-size names but a group's or a
 * consumer's:
 *
 *   [0xFF][id]['e'][ms][seq]            an entry: its fields and values
 *   [0xFF][id]['g'][group]              a group: last delivered ID,
 *                                       entries read, its number, pending
 *   [0xFF][id]['p'][gnum][ms][seq]      a pending entry of group gnum:
 *                                       delivery time, count, consumer
 *   [0xFF][id]['k'][gnum][consumer]     a consumer: seen time, pending
 *
 * (ms, seq and gnum big-endian, so the tree's order is the IDs'.) A
 * group's number is unique in the store (kv_new_id), so a group made
 * again under the same name never sees its predecessor's entries.
 *
 * Why entries of their own rather than Redis's listpack nodes: every
 * change is a few tree entries in one group, never a rewrite of a node;
 * XRANGE from any ID is a descent; the sweeper drops a deleted stream's
 * entries as any collection's. An entry's fields are copied into the
 * store (packed densely with other small values).
 *
 * Consistency: every change (an entry added or deleted with the record,
 * a delivery with its pending entry, group and consumer) goes in one
 * group (kv_stream_begin/kv_stream_end), so after a crash the counts in
 * the record, groups and consumers equal the entries present. Unlike
 * other collections, a stream stays when its last entry goes (Redis
 * keeps empty streams: their last ID and groups matter).
 */
#ifndef PASTE_SERVICES_KV_STREAM_H
#define PASTE_SERVICES_KV_STREAM_H

#include "kv_set.h"

#define KV_STREAM_ENTRY 'e'
#define KV_STREAM_GROUP 'g'
#define KV_STREAM_PEL 'p'
#define KV_STREAM_CONSUMER 'k'

/* An entry ID. */
struct kv_sid {
	uint64_t ms, seq;
};
static inline int kv_sid_cmp(struct kv_sid a, struct kv_sid b)
{
	return a.ms != b.ms ? (a.ms < b.ms ? -1 : 1) : a.seq != b.seq ? (a.seq < b.seq ? -1 : 1) : 0;
}
static inline bool kv_sid_zero(struct kv_sid id)
{
	return !id.ms && !id.seq;
}
/* The ID's 16 bytes as the tree orders them. */
void kv_sid_put(uint8_t out[16], struct kv_sid id);
struct kv_sid kv_sid_get(const uint8_t in[16]);
/* "ms-seq" into out (at least 42 bytes): its length. */
int kv_sid_fmt(char *out, struct kv_sid id);

/* A stream opened for a command. */
struct kv_stream {
	struct kv_key key;              /* its key (kv_key_init'ed by the caller) */
	struct kv_obj o;                /* its record: o.coll (count, last, maxdel, added) */
	bool stored;                    /* the key holds this record (false: new, unwritten) */
	bool dirty;                     /* the record changed in the batch */
	bool changed;                   /* anything changed in the batch (the key is touched) */
	bool deleted;                   /* an entry went: has the newest node emptied? */
	uint32_t batch;                 /* kv_stream_begin nesting */
	struct kv_coll begun;           /* the record when the batch began */
	bool begun_stored;
	uint64_t node_max;              /* stream-node-max-entries for appends (0: 100) */
};

/* The record's last ID given and largest ID deleted. */
static inline struct kv_sid kv_stream_last(const struct kv_stream *s)
{
	return (struct kv_sid){ s->o.coll.last_ms, s->o.coll.last_seq };
}
static inline struct kv_sid kv_stream_maxdel(const struct kv_stream *s)
{
	return (struct kv_sid){ s->o.coll.del_ms, s->o.coll.del_seq };
}

/* Look up the stream at s->key: 0, -ENOENT (kv_stream_new makes an empty
 * one there, written by the first kv_stream_end that changes it), or
 * -EMEDIUMTYPE. read: counted as a read (kv_lookup). */
int kv_stream_open(struct kv *kv, struct kv_stream *s, bool read);
void kv_stream_new(struct kv *kv, struct kv_stream *s);

/* Changes as one unit: begin (bytes: what they will copy in), then the
 * changes, then end with the first error r: 0 writes the record if it
 * changed (an empty stream is kept), touches the key and commits;
 * otherwise every change is undone. Nestable; returns the result. */
int kv_stream_begin(struct kv *kv, struct kv_stream *s, uint64_t bytes);
int kv_stream_end(struct kv *kv, struct kv_stream *s, int r);

/* ---- entries ------------------------------------------------------------ */

/* An entry's value: its field-value pairs, each string as a 32-bit
 * length and its bytes. How many bytes pairs av[0..2n) take. */
size_t kv_stream_fields_size(const struct paste_resp_arg *av, uint32_t n);
void kv_stream_fields_encode(uint8_t *out, const struct paste_resp_arg *av, uint32_t n);
/* Decode p[0..len): 0 with *n pairs, fn(arg, i, field, flen, value,
 * vlen) for each (i: the pair's index) unless fn is NULL; -EBADMSG. */
typedef void (*kv_stream_field_fn)(void *arg, uint32_t i, const uint8_t *f, size_t flen,
				   const uint8_t *v, size_t vlen);
int kv_stream_fields_decode(const uint8_t *p, size_t len, uint32_t *n, kv_stream_field_fn fn,
			    void *arg);

/* Nodes: Redis keeps entries in listpack nodes of stream-node-max-entries
 * and an approximate trim removes whole nodes. An entry's tree word is
 * the number of the node it was added to (from 1): an append goes to the
 * record's newest node until stream-node-max-entries were added to it
 * (deleted ones count, as in Redis), or it emptied, then opens the next.
 * Write entry id of collection coll in node `node` (a stream built whole:
 * RESTORE); 0 or a failure. */
int kv_stream_put_entry(struct kv *kv, uint64_t coll, struct kv_sid id, const void *val,
			size_t vlen, uint64_t node);

/* Append entry id (greater than the stream's last: the caller checks)
 * with value val[0..vlen) (kv_stream_fields_encode's): count, last ID and
 * entries added follow. 0, -EFBIG (too large for one entry), -ENOSPC or
 * the store's failure. */
int kv_stream_append(struct kv *kv, struct kv_stream *s, struct kv_sid id, const void *val,
		     size_t vlen);
/* Delete entry id: 1, 0 (absent), or a failure; the largest deleted ID
 * follows. */
int kv_stream_delete(struct kv *kv, struct kv_stream *s, struct kv_sid id);
/* Read entry id's value into a malloc'd buffer: 0 (*val, *vlen), -ENOENT,
 * -ENOMEM. */
int kv_stream_get(struct kv *kv, const struct kv_stream *s, struct kv_sid id, uint8_t **val,
		  size_t *vlen);

/* Entries in ID order from `from` (inclusive) forward, or from `from`
 * backward (back). next: 1 with w->id and the value's extents, 0 at the
 * end, or a failure. */
struct kv_stream_walk {
	struct paste_btree_cursor c;
	uint8_t prefix[10];
	bool back;
	struct kv_sid id;
	uint64_t node;                  /* its node (kv_stream_put_entry); 0: none kept */
	uint32_t n, len;
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
};
void kv_stream_walk_init(struct kv *kv, struct kv_stream_walk *w, uint64_t coll, struct kv_sid from,
			 bool back);
int kv_stream_walk_next(struct kv *kv, struct kv_stream_walk *w);
/* The first (or, last, the last) entry's ID: 1, 0 when empty. */
int kv_stream_edge(struct kv *kv, const struct kv_stream *s, bool last, struct kv_sid *id);

/* Trimming: remove the oldest entries while more than maxlen remain
 * (minid false) or while the oldest is below threshold (minid true); at
 * most limit (0: no limit). approx: only whole nodes, while what stays is
 * still over the bound (Redis's streamTrim). How many went, or a failure. */
int64_t kv_stream_trim(struct kv *kv, struct kv_stream *s, bool minid, uint64_t maxlen,
		       struct kv_sid threshold, bool approx, uint64_t limit);
/* How many nodes hold the stream's entries (XINFO's radix-tree-keys): the
 * newest entry's node less the oldest's, plus one. */
uint64_t kv_stream_nodes(struct kv *kv, const struct kv_stream *s);

/* ---- consumer groups ---------------------------------------------------- */

struct kv_sgroup {
	struct kv_sid last;             /* last delivered ID */
	int64_t read;                   /* entries read (-1: unknown) */
	uint64_t num;                   /* its number: its pending entries' and consumers' prefix */
	uint64_t pending;               /* entries in its pending entries list */
};
#define KV_SGROUP_BYTES 40u
void kv_sgroup_encode(uint8_t out[KV_SGROUP_BYTES], const struct kv_sgroup *g);
void kv_sgroup_decode(const uint8_t in[KV_SGROUP_BYTES], struct kv_sgroup *g);

/* Group name[0..len): 0 with *g, -ENOENT. */
int kv_sgroup_get(struct kv *kv, const struct kv_stream *s, const void *name, size_t len,
		  struct kv_sgroup *g);
/* Write group g (new or changed). 0 or a failure. */
int kv_sgroup_put(struct kv *kv, struct kv_stream *s, const void *name, size_t len,
		  const struct kv_sgroup *g);
/* Delete group name with its pending entries and consumers. 0 or a failure. */
int kv_sgroup_delete(struct kv *kv, struct kv_stream *s, const void *name, size_t len,
		     const struct kv_sgroup *g);
/* The groups in name order: next gives 1 with the name (valid until the
 * next call) and the group, 0 at the end, or a failure. */
struct kv_sgroup_walk {
	struct kv_members m;
	uint8_t *longbuf;
	const uint8_t *name;
	size_t nlen;
	struct kv_sgroup g;
};
void kv_sgroup_walk_init(struct kv *kv, struct kv_sgroup_walk *w, uint64_t coll);
int kv_sgroup_walk_next(struct kv *kv, struct kv_sgroup_walk *w);
/* How many groups the stream has (a walk). */
uint64_t kv_stream_groups(struct kv *kv, const struct kv_stream *s);

/* A pending entry's value: delivery time and count (8 bytes each,
 * big-endian), then the consumer's name: out holds 16 + clen bytes.
 * A consumer's value: seen time and pending count, 8 bytes each. */
size_t kv_spending_encode(uint8_t *out, uint64_t delivered_ms, uint64_t count, const void *consumer,
			  size_t clen);
#define KV_SCONSUMER_BYTES 16u

/* A pending entry: its consumer's name is the value's tail. */
struct kv_spending {
	struct kv_sid id;
	uint64_t delivered_ms;          /* last delivery time (Unix ms) */
	uint64_t count;                 /* deliveries */
	const uint8_t *consumer;        /* name, valid until the next tree change or walk */
	size_t clen;
	uint8_t cbuf[KV_INLINE + 1];    /* where a get keeps the name */
};
/* Pending entry id of group gnum: 0 with *p, -ENOENT. */
int kv_spending_get(struct kv *kv, const struct kv_stream *s, uint64_t gnum, struct kv_sid id,
		    struct kv_spending *p);
/* Write (new or changed) / delete (1, 0 when absent) pending entry p. */
int kv_spending_put(struct kv *kv, struct kv_stream *s, uint64_t gnum, const struct kv_sid id,
		    uint64_t delivered_ms, uint64_t count, const void *consumer, size_t clen);
int kv_spending_delete(struct kv *kv, struct kv_stream *s, uint64_t gnum, struct kv_sid id);
/* Pending entries of group gnum in ID order from `from`: next 1 with
 * w->p (its consumer name read into w->p.cbuf), 0 at the end. */
struct kv_spending_walk {
	struct paste_btree_cursor c;
	uint8_t prefix[18];
	bool back;                      /* newest first (kv_spending_last) */
	struct kv_spending p;
};
void kv_spending_walk_init(struct kv *kv, struct kv_spending_walk *w, uint64_t coll, uint64_t gnum,
			   struct kv_sid from);
int kv_spending_walk_next(struct kv *kv, struct kv_spending_walk *w);
/* The ID of group gnum's newest pending entry: 1, 0 when none (one
 * descent: XPENDING's summary walks no list). */
int kv_spending_last(struct kv *kv, uint64_t coll, uint64_t gnum, struct kv_sid *id);

struct kv_sconsumer {
	uint64_t seen_ms;               /* last interaction (Unix ms) */
	uint64_t pending;               /* its entries in the group's pending list */
};
void kv_sconsumer_encode(uint8_t out[KV_SCONSUMER_BYTES], const struct kv_sconsumer *c);
/* Consumer name of group gnum: 0 with *c, -ENOENT. */
int kv_sconsumer_get(struct kv *kv, const struct kv_stream *s, uint64_t gnum, const void *name,
		     size_t len, struct kv_sconsumer *c);
int kv_sconsumer_put(struct kv *kv, struct kv_stream *s, uint64_t gnum, const void *name,
		     size_t len, const struct kv_sconsumer *c);
int kv_sconsumer_delete(struct kv *kv, struct kv_stream *s, uint64_t gnum, const void *name,
			size_t len);
/* The consumers of group gnum in name order. */
struct kv_sconsumer_walk {
	struct kv_cwalk w;
	uint64_t gnum;
	const uint8_t *name;
	size_t nlen;
	struct kv_sconsumer c;
};
void kv_sconsumer_walk_init(struct kv *kv, struct kv_sconsumer_walk *w, uint64_t coll,
			    uint64_t gnum);
int kv_sconsumer_walk_next(struct kv *kv, struct kv_sconsumer_walk *w);

#endif
