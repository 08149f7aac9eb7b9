/*
 * kv.h - the key-value core of pkvs: typed keys in databases over one
 * persistent B+tree (lib/btree*.c), their values, expiry, and counters.
 * It knows nothing of the network: the two front ends (services/pkvs_http.c
 * and services/pkvs_resp.c with the cmd_*.c command families) parse
 * requests, call in here, and do all the talking.
 *
 * Why one thread: the tree is single-owner, and its reads see changes
 * whose log records are not durable yet. Every reply that depends on the
 * tree is therefore sent PASTE_SEND_DURABLE: it leaves behind the same
 * barrier as the change it could reveal, and in one thread that barrier
 * covers every change applied so far. pkvs scales out by sharding
 * (several instances behind twemproxy), as Redis does.
 *
 * Values stay where they landed: a body (HTTP) or a bulk (RESP) is
 * gathered by lib/body.c into extents of held packet buffers, the tree's
 * log record names them, the tree takes its own references, and a GET
 * sends them straight from those buffers (paste_port_send_extents).
 *
 * Keys in the tree (kv_key.c): a user key of database d is [phys(d)][key];
 * a collection (hash, list, set, sorted set) is a key whose value is its
 * record (struct kv_coll: its id, its count) and whose members are entries
 * [0xFF][id][kind][member] of their own. The entry's tag is the key's type,
 * its word the expiry deadline. Dropping a collection is O(1): its key
 * goes and a grave names its id; a sweeper (kv_sweep.c) deletes the
 * members in bounded steps later. Expiring keys are also entries of an
 * index ordered by deadline (kv_expire.c). A string too long for one
 * entry lies in chunk entries [0xFF][id]['c'][end offset] and its key's
 * value is a record {id, length} (kv_big.c); it is a string to every
 * caller (kv_obj.big says where it lies).
 */
#ifndef PASTE_SERVICES_KV_H
#define PASTE_SERVICES_KV_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "paste.h"

/* Values of at most this many bytes are packed densely with other small
 * values (a 64-byte value must not pin a 2 KiB buffer), and a GET copies
 * them into its reply; longer ones stay where they landed. */
#define KV_PACK_MAX PASTE_SEND_COPY_MAX

/* Databases: at most KV_MAX_DBS logical ones (--databases, default 16),
 * mapped onto physical prefixes 0..KV_PHYS_DBS-1 (SWAPDB swaps two
 * mappings, FLUSHDB gives a database a fresh prefix and buries the old). */
#define KV_MAX_DBS 64u
#define KV_PHYS_DBS 250u
#define KV_PFX_EXPIRE 0xFBu
#define KV_PFX_SYS 0xFDu
#define KV_PFX_GRAVE 0xFEu
#define KV_PFX_MEMBER 0xFFu
#define KV_GRAVE_COLL 'c'
#define KV_ALL_DBS UINT32_MAX   /* kv_touched: every database */
#define KV_GRAVE_DB 'd'

/* Keys and members up to KV_INLINE bytes are tree keys as they are;
 * longer ones are named by a prefix and a keyed digest (kv_key.c). */
#define KV_INLINE 400u
#define KV_LONG_PREFIX 375u
/* The longest key or member (Redis's proto-max-bulk-len would allow 512
 * MiB; a key must fit the reassembly of one command). A store of small
 * buffers takes less: kv_max_key. */
#define KV_MAX_KEY (1u << 20)

/* A key's type: the low three bits of its entry's tag. */
enum kv_type { KV_STRING = 0, KV_HASH = 1, KV_LIST = 2, KV_SET = 3, KV_ZSET = 4, KV_STREAM = 6 };
#define KV_TAG_TYPE 7u
#define KV_TAG_LONG 8u   /* the value's first extent is the whole (long) key */
/* The type bits of a string in chunk entries (kv_big.c): its callers see
 * KV_STRING (TYPE says "string"); the tree's walks (expiry, the sweeper)
 * treat it as a collection, its record's first word being its id. */
#define KV_TAG_BIG 5u
#define KV_CHUNK 'c'     /* the member kind of a string's chunks (tagged KV_TAG_BIG) */
/* The longest string: Redis's proto-max-bulk-len. */
#define KV_STRING_MAX (512ull << 20)
/* pkvs's own entries [KV_PFX_SYS][name] (the layout, the database map)
 * carry this tag, which no key of the first layout had (its entries are
 * tag 0): a key of that layout named like one is a key (kv_layout.c). */
#define KV_TAG_SYS 15u
static inline bool kv_is_coll(enum kv_type t) { return t != KV_STRING; }
const char *kv_type_name(enum kv_type t);

/* Expiry: absolute milliseconds since the epoch; KV_NO_TTL none. */
#define KV_NO_TTL 0
#define KV_KEEP_TTL (-1)

/* Make a body on the stack idle for paste_body_begin, which wants n and
 * bufs 0 and sets the rest: not `= { 0 }`, a memset of its 64 extents
 * (~20 ns) on every SET. */
static inline void kv_body_idle(struct paste_body *b)
{
	b->n = b->bufs = 0;
}

struct kv_config {
	bool copy;                      /* --copy: values copied into fresh buffers */
	uint64_t max_value;             /* --max-value: larger values are refused (at most
					 * KV_STRING_MAX) */
	uint32_t databases;             /* --databases (0: 16) */
	/* The layout conversion (kv_layout.c): keys per group (0: 256), and
	 * for tests, stop with -EINTR after this many groups (0: never). */
	uint32_t relayout_batch, relayout_stop;
	struct paste_btree_config tree; /* --checkpoint-*; its lane is the caller's */
};

/* Counters for /stats, /metrics and INFO: plain, since the one thread
 * that owns the tree also answers those. */
struct kv_counters {
	uint64_t sets, gets, dels, hits, misses, scans;
	uint64_t room_calls;            /* writes that found the store full and made room */
	uint64_t expired;               /* keys removed because their deadline passed */
	uint64_t swept;                 /* member entries of dropped collections deleted */
	uint64_t lazyfreed;             /* dropped collections whose members all went */
};

/* A key as the tree names it (kv_key_init): the client's bytes stay where
 * they are (p); t is the tree key. */
struct kv_key {
	uint32_t db;                    /* logical database */
	const uint8_t *p;
	size_t len;
	bool longkey;
	uint32_t tlen;
	uint8_t t[PASTE_BTREE_MAX_KEY];
};

/* A collection's record, the value of its key. */
struct kv_coll {
	uint64_t id;                    /* its members are [0xFF][id]...; unique in the store */
	uint64_t count;
	int64_t head, tail;             /* lists: the first element's position, one past the last */
	/* Streams (kv_stream.h): the last ID given, the largest deleted, how
	 * many entries were ever added, the newest node, how many entries
	 * were added to it and the last one's ID (their record is longer). */
	uint64_t last_ms, last_seq, del_ms, del_seq, added, node, fill, top_ms, top_seq;
};
#define KV_COLL_BYTES 32u

/* A key found (kv_lookup). */
struct kv_obj {
	enum kv_type type;
	int64_t expire_ms;              /* KV_NO_TTL: none */
	uint32_t n, len;                /* the value's extents and bytes (a string's value, a
					 * collection's record), the long key's extent left out */
	struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
	struct kv_coll coll;            /* collections (zero for a string) */
	/* A string in chunk entries (kv_big.c): their id, and len is the
	 * string's length while ext[0..n) holds its record, not its bytes:
	 * read it with kv_value_read / kv_value_each (kv_reply_value does).
	 * 0: the string is ext[0..n). */
	uint64_t big;
};

/* What happened to a key (kv_touched). A listener that needs more (the
 * command's own event name, for keyspace notifications) hears it from the
 * command; the core knows only these. */
enum kv_touch {
	KV_TOUCH_WRITTEN,               /* its value, type, members or deadline changed */
	KV_TOUCH_CREATED,               /* written, and it was not there (or had expired): a
					 * new key (Redis's "new" event); a rename's or
					 * move's destination is always one, as in Redis */
	KV_TOUCH_DELETED,               /* removed (DEL, a rename's source, FLUSHDB) */
	KV_TOUCH_EXPIRED,               /* removed because its deadline passed (active expiry,
					 * a lookup, a write over it) */
};
/* A listener: k is the key as the change named it (k->p may point at
 * bytes gone by now; a short key's bytes are k->t + 1 .. k->t + k->tlen,
 * a long key's k->p[0..len)); a key with p NULL and tlen 0 stands for
 * every key of database db (FLUSHDB: deleted, SWAPDB: written), or of all
 * of them (db KV_ALL_DBS, FLUSHALL). It runs inside the change (in a
 * group, before its commit): it may look at the tree, not write it. */
typedef void (*kv_touch_fn)(void *arg, const struct kv_key *k, enum kv_touch what);
struct kv_listener {
	kv_touch_fn fn;
	void *arg;
};
#define KV_TOUCH_MAX 8u

struct kv {
	struct paste_store *store;
	struct paste_wal *wal;
	struct paste_btree *tree;
	struct paste_body_config bc;
	uint64_t max_value;             /* min(--max-value, KV_STRING_MAX) */
	struct kv_counters n;
	uint64_t recovery_ns;           /* paste_btree_open's */
	/* Values copied into the store go here, densely (kv.c). */
	struct paste_append app;
	/* Databases: logical -> physical prefix; keys and expiring keys per
	 * logical database, counted at the first ask (UINT64_MAX: not yet). */
	uint32_t ndbs;
	uint8_t dbmap[KV_MAX_DBS];
	uint64_t dbkeys[KV_MAX_DBS], dbexpires[KV_MAX_DBS];
	/* The clock commands see: CLOCK_REALTIME in ms, read by kv_clock
	 * (each pass), or by kv_clock_at from a monotonic read a command makes
	 * anyway (its commandstats start) and the pass's offset. */
	int64_t now_ms;
	int64_t real_minus_mono_ns;
	bool clock_due;                 /* now_ms is the pass's: kv_now reads the clock */
	uint32_t group_depth;           /* kv_begin nesting */
	uint32_t run_depth;             /* kv_run nesting (a script's or EXEC's commands) */
	/* The map and counts as the outermost kv_begin found them: kv_abort
	 * puts them back with the tree. */
	uint8_t saved_map[KV_MAX_DBS];
	uint64_t saved_keys[KV_MAX_DBS], saved_expires[KV_MAX_DBS];
	bool sweep_due;                 /* graves to sweep */
	bool far_lists;                 /* a list element in chunks was written (kv_db_far_lists) */
	/* When active expiry or the sweeper next has work, on now_ms's
	 * clock (INT64_MAX: nothing due; 0, as opened: at the first pass).
	 * The event loop wakes for it (pkvs_svc_wake), so an idle server
	 * expires keys at their deadline, and works off a backlog of due
	 * keys or graves in passes back to back. */
	int64_t next_due_ms;
	uint8_t *namebuf;               /* KV_MAX_KEY bytes for a long name read back (lazily) */
	uint32_t relayout_batch, relayout_stop;   /* kv_config's */
	uint64_t last_id;               /* the last collection or chunk id handed out */
	/* Chunk ids of strings being written (kv_writer): their graves wait
	 * for the write's end, not for the sweeper. */
	uint64_t *writing;
	uint32_t nwriting, capwriting;
	/* Who hears of every change to a key (kv_touch_add). */
	struct kv_listener touch[KV_TOUCH_MAX];
	uint32_t ntouch;                /* slots in use (0: kv_touched is one branch) */
	uint32_t touch_depth;           /* kv_touched calls under way */
	bool touch_holes;               /* slots emptied during a call, compacted after it */
	/* CLIENT PAUSE (cmd_pause.c): nothing expires meanwhile (a key past
	 * its deadline reads as gone and stays). */
	bool paused;
};

/* Listeners of every change (WATCH, blocked pops, keyspace
 * notifications): at most KV_TOUCH_MAX, called in the order added. add:
 * 0, -EEXIST (fn and arg listen already), -ENOSPC (full). remove: gone
 * from now on, also from a kv_touched under way (a listener may remove
 * itself or another, or add one, while it is called). kv_touched: the
 * kv files call it after each change; one branch when nobody listens. */
int kv_touch_add(struct kv *kv, kv_touch_fn fn, void *arg);
void kv_touch_remove(struct kv *kv, kv_touch_fn fn, void *arg);
void kv_touch_call(struct kv *kv, const struct kv_key *k, enum kv_touch what);
static inline void kv_touched(struct kv *kv, const struct kv_key *k, enum kv_touch what)
{
	if (kv->ntouch)
		kv_touch_call(kv, k, what);
}

/* Buffers a write leaves free: the bodies' reserve (paste_body_config). */
static inline uint32_t kv_reserve(const struct kv *kv)
{
	return kv->bc.reserve ? kv->bc.reserve : PASTE_BODY_DEFAULT_RESERVE;
}

/* At most this many cleaner steps for one write that found no room. */
#define KV_ROOM_STEPS 64u

/* Open the log and the tree on the persist object's lane (recovery runs
 * here), before paste_store_start. 0, or a negative errno with err->msg
 * set; on success err->msg holds what recovery noticed (or is empty). */
int kv_open(struct kv **out, struct paste_store *st, struct paste_persist *p,
	    const struct kv_config *cfg, struct paste_error *err);
/* Once the store is started (it has free buffers), before serving: what
 * a start writes (a new tree's layout entry, the conversion of an earlier
 * layout). 0, or a negative errno with err->msg set. */
int kv_start(struct kv *kv, struct paste_error *err);
void kv_close(struct kv *kv);

/* Once per event-loop pass: releases whose change is durable, a
 * checkpoint when one is due, a bounded step of expiry and of the
 * sweeper. A failure is the store's (it already failed). */
void kv_pass(struct kv *kv);

/* Read the clock commands see (once per command: a command and a
 * transaction see one time). kv_clock reads CLOCK_REALTIME (and keeps its
 * offset from CLOCK_MONOTONIC); kv_clock_at takes a monotonic read the
 * caller has made anyway, saving a vDSO call per command. */
void kv_clock(struct kv *kv);
void kv_clock_at(struct kv *kv, uint64_t mono_ns);
/* now_ms where only a key with a deadline needs it: a streamed SET marks
 * the clock due instead of reading it (a vDSO call per SET otherwise). */
static inline int64_t kv_now(struct kv *kv)
{
	if (kv->clock_due)
		kv_clock(kv);
	return kv->now_ms;
}

/* The largest value a body may carry (for 413 / "-ERR value too big"). */
uint64_t kv_max_value(const struct kv *kv);
/* The longest key or member name: KV_MAX_KEY, or less with buffers under
 * 32 KiB (a long name lies whole in its entry's own extents, and one
 * extent stays for the value: (PASTE_BTREE_MAX_EXTENTS - 1) buffers less
 * its 4-byte length; 126,972 bytes with 2 KiB buffers). Writes of a
 * longer one fail -ENAMETOOLONG. */
size_t kv_max_key(const struct kv *kv);

/* A value of len bytes is about to be taken into the store (a body
 * begins): if the free buffers would fall below the reserve, make room
 * first (a checkpoint, the cleaner), so that it is refused only when the
 * store is really full. */
void kv_admit(struct kv *kv, uint64_t len);

/* ---- keys (kv_key.c) ---- */

void kv_key_init(const struct kv *kv, struct kv_key *k, uint32_t db, const void *p, size_t len);
void kv_member_key(const struct kv *kv, struct kv_key *k, uint64_t id, uint8_t kind,
		   const void *m, size_t len);
uint32_t kv_member_prefix(uint8_t *out, uint64_t id, uint8_t kind);
uint32_t kv_expire_key(uint8_t *out, int64_t deadline, const struct kv_key *k);
uint32_t kv_grave_key(uint8_t *out, uint8_t kind, uint64_t id);
/* The big-endian word at p (a collection's record, a member key's id:
 * read several times per command, so inline; the host is little-endian,
 * as the tree's key compares assume). */
static inline uint64_t kv_be64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return __builtin_bswap64(v);
}
static inline void kv_be64_put(uint8_t *p, uint64_t v)
{
	v = __builtin_bswap64(v);
	memcpy(p, &v, 8);
}
/* A long key or member is kept whole at the start of its entry's value
 * ([u32 length][name], extents of its own): span finds its extents
 * (*next) and length (-EBADMSG when they do not add up), same compares it
 * with p[0..len), read copies it out. */
int kv_long_span(const struct kv *kv, const struct paste_extent *ext, uint32_t n, uint32_t *next,
		 uint32_t *nlen);
bool kv_long_same(const struct kv *kv, const struct paste_extent *ext, uint32_t n, const uint8_t *p,
		  size_t len, uint32_t *next);
size_t kv_long_read(const struct kv *kv, const struct paste_extent *ext, uint32_t next,
		    uint32_t nlen, uint8_t *out);
/* Is tree key t a user key of a database? *db its logical database. */
bool kv_key_user(const uint8_t *t, uint32_t tlen, const struct kv *kv, uint32_t *db);

/* ---- typed keys (kv_obj.c) ---- */

/* Look key up: 0 and *o, or -ENOENT (absent; a key whose deadline passed
 * is removed now, logged as a delete, and is absent). Counted as a read
 * (hits, misses) when `read`. */
int kv_lookup(struct kv *kv, struct kv_key *k, struct kv_obj *o, bool read);
/* Set key to a value of type `type` held in ext[0..n) (a string's bytes,
 * or a collection's record), with deadline expire_ms (KV_NO_TTL,
 * KV_KEEP_TTL, or ms). The tree takes its own references; the caller
 * keeps (and drops) its own. A collection or string in chunks the key
 * held is dropped (swept later). A string whose extents do not fit one
 * entry beside a long key's name is stored in chunks of them (no byte
 * copied). *created (if non-NULL): the key was absent. -ENOSPC when no
 * room could be made, -EFBIG, -ENAMETOOLONG (a key over kv_max_key), or
 * the store's failure. */
int kv_put(struct kv *kv, struct kv_key *k, enum kv_type type, const struct paste_extent *ext,
	   uint32_t n, int64_t expire_ms, bool *created);
/* The same from bytes in DRAM: copied to the append point first (a
 * string over one entry's worth: to fresh buffers, in chunks). */
int kv_put_bytes(struct kv *kv, struct kv_key *k, enum kv_type type, const void *val,
		 size_t len, int64_t expire_ms, bool *created);
/* A string from a gathered body (released here: the tree took its own
 * references); small ones are packed. A body that failed (b->error) is
 * refused -ENOSPC after making room for the next write. */
int kv_put_body(struct kv *kv, struct kv_key *k, struct paste_body *b, int64_t expire_ms,
		bool *created);
/* Remove key (a collection's members, a string's chunks, are swept
 * later; until the next kv_pass a string found before can still be read
 * and sent, so a command may remove a key and then reply with its old
 * value): 1, 0 (absent), or a negative errno. */
int kv_remove(struct kv *kv, struct kv_key *k);
/* Key src (found as o by kv_lookup) becomes dst, of the same or another
 * database (RENAME, MOVE), with its value, type and deadline, in one
 * group; what dst held is replaced (a collection there dropped). A
 * collection keeps its id and members: O(1) whatever its size. src and
 * dst must differ. 0, or as kv_put. */
int kv_rename(struct kv *kv, struct kv_key *src, const struct kv_obj *o, struct kv_key *dst);
/* Give a key found as o another deadline (KV_NO_TTL: none). */
int kv_set_expire(struct kv *kv, struct kv_key *k, const struct kv_obj *o, int64_t expire_ms);
/* Copy bytes [from, from + cap) of a string's value (o as kv_lookup found
 * it) into out; returns how many. */
size_t kv_value_read(const struct kv *kv, const struct kv_obj *o, uint64_t from, void *out,
		     size_t cap);
/* Bytes [from, from + len) of string o where they lie, entry by entry:
 * fn(arg, ext, n, skip, l) for each, the piece being bytes [skip, skip + l)
 * of ext[0..n) (one call for a string in one entry; one per chunk, in
 * order, for one in chunks). Stops at fn's first non-zero return and
 * returns it; -EBADMSG when a chunk is missing or of the wrong length.
 * Changes nothing: the extents stay valid until the next kv_pass. */
typedef int (*kv_extents_fn)(void *arg, const struct paste_extent *ext, uint32_t n,
			     uint64_t skip, uint64_t len);
int kv_value_each(const struct kv *kv, const struct kv_obj *o, uint64_t from, uint64_t len,
		  kv_extents_fn fn, void *arg);

/* Collections: a new one's record (its id: the log's last LSN, larger
 * than any collection's before it), and writing a record back. */
void kv_coll_new(struct kv *kv, struct kv_obj *o, enum kv_type type);
int kv_coll_save(struct kv *kv, struct kv_key *k, struct kv_obj *o);
/* The start of a collection handle's batch of changes (kv_hash, kv_cset,
 * kv_stream): 1 when one is open already (*batch counts the nesting), 0
 * when one began (room made for bytes first), or kv_begin's failure. */
int kv_coll_batch(struct kv *kv, uint32_t *batch, uint64_t bytes);
/* A collection's members: kind is the collection's (KV_HASH: 'f'
 * fields, ...). lookup: 0 with the member's value extents (its long name's
 * extent left out), -ENOENT (-EFBIG: a value in chunks, kv_elem_lookup
 * reads those). put/remove: as kv_put/kv_remove, for one
 * member entry. */
int kv_member_lookup(struct kv *kv, struct kv_key *mk, struct paste_extent *ext, uint32_t *n,
		     uint32_t *len);
int kv_member_put(struct kv *kv, struct kv_key *mk, const struct paste_extent *ext, uint32_t n);
int kv_member_put_bytes(struct kv *kv, struct kv_key *mk, const void *val, size_t len);
/* The same with the entry's word (0: none): a stream entry's node. */
int kv_member_put_word(struct kv *kv, struct kv_key *mk, const void *val, size_t len, uint64_t word);
int kv_member_remove(struct kv *kv, struct kv_key *mk);
/* The same with the entry's tag: a value in chunks' record (kv_elem). */
int kv_member_put_tag(struct kv *kv, struct kv_key *mk, uint8_t tag, const struct paste_extent *ext,
		      uint32_t n);

/* ---- elements: members with values of any size (kv_big.c) ----
 * A hash field's value or a list element too long for one entry (63
 * buffers, less a long name's) is kept as a string in chunks is: its
 * bytes in chunk entries under an id of its own, its member entry the
 * record {id, length} tagged KV_TAG_BIG. kv_member_put_bytes writes one
 * when the value does not fit (a hash field or list element only). The
 * member entry owns the chunks: whoever removes an element buries its id
 * (kv_elem_bury: HDEL, an overwrite, a pop, LTRIM, LREM, LSET), and the
 * sweeper buries those of a dropped collection's members; a move (LMOVE,
 * LINSERT's shift) moves the record. Reads: kv_elem_lookup and the walks
 * give (ext, n, len, big): big 0, the value is ext[0..n) of len bytes;
 * else ext[0..n) is the record, len the value's length and big the id,
 * and kv_elem_each / kv_elem_read / kv_elem_equal read it either way. */
bool kv_elem_kind(const uint8_t *t, uint32_t tlen);    /* may t's entry be a record? */
/* big NULL: a value in chunks is -EFBIG (for callers that read ext). */
int kv_elem_lookup(struct kv *kv, struct kv_key *mk, struct paste_extent *ext, uint32_t *n,
		   uint32_t *len, uint64_t *big);
/* The entry's tag and extents -> big and len (0 for a value in place);
 * -EBADMSG: a record of the wrong size. */
int kv_elem_decode(const struct kv *kv, uint8_t tag, const struct paste_extent *ext, uint32_t n,
		   uint32_t *len, uint64_t *big);
/* The same for an entry as a cursor gives it, a long name's extents
 * first: *at the value's first extent, *len its length. */
int kv_elem_entry(const struct kv *kv, uint8_t tag, const struct paste_extent *ext, uint32_t n,
		  uint32_t *at, uint32_t *len, uint64_t *big);
int kv_elem_put_far(struct kv *kv, struct kv_key *mk, const void *val, uint64_t len);
/* The store says, once, that it holds list elements in chunks: pops and
 * LTRIM are then one group each (kv_db.c). */
int kv_db_far_lists(struct kv *kv);
int kv_elem_bury(struct kv *kv, uint64_t big);
int kv_elem_each(const struct kv *kv, const struct paste_extent *ext, uint32_t n, uint64_t vlen,
		 uint64_t big, uint64_t from, uint64_t len, kv_extents_fn fn, void *arg);
size_t kv_elem_read(const struct kv *kv, const struct paste_extent *ext, uint32_t n, uint64_t vlen,
		    uint64_t big, uint64_t from, void *out, size_t cap);
bool kv_elem_equal(const struct kv *kv, const struct paste_extent *ext, uint32_t n, uint64_t vlen,
		   uint64_t big, const void *p, size_t plen);
/* Members of collection id and kind in order: a cursor started at the
 * first member >= from (NULL: the first); next gives the member's name
 * (the long name read back from the store into name[0..*nlen), a buffer
 * of KV_MAX_KEY bytes the caller owns) and its value's extents; 1, 0 at
 * the end. */
struct kv_members {
	struct paste_btree_cursor c;
	uint8_t prefix[10];
};
void kv_members_init(struct kv *kv, struct kv_members *m, uint64_t id, uint8_t kind,
		     const void *from, size_t flen);
int kv_members_next(struct kv *kv, struct kv_members *m, const uint8_t **name, size_t *nlen,
		    uint8_t *longbuf, struct paste_extent *ext, uint32_t *n, uint32_t *len);

/* Tree writes of the layer's own entries (index, graves): a write that
 * found no room makes room (kv_make_room) and is tried once more. */
int kv_tree_set(struct kv *kv, const uint8_t *t, uint32_t tlen);
int kv_tree_del(struct kv *kv, const uint8_t *t, uint32_t tlen);
int kv_tree_put_bytes(struct kv *kv, const uint8_t *t, uint32_t tlen, const void *val, size_t len);
/* Copy len bytes to the append point (dense, with other small values),
 * making room once when the store is full: extents ext[0..*n) (at most
 * max), each holding a reference of the caller's. 0, -EFBIG (more than max
 * extents), -ENOSPC. */
int kv_copy_in(struct kv *kv, const void *p, size_t len, struct paste_extent *ext, uint32_t max,
	       uint32_t *n);
/* pkvs's own entries [KV_PFX_SYS][name], tagged KV_TAG_SYS. get reads
 * one into out[0..cap): 0 and *len, -ENOENT (absent, or a key of the
 * first layout: not tagged so), -EBADMSG (longer than cap). */
int kv_sys_put(struct kv *kv, const uint8_t *t, uint32_t tlen, const void *val, size_t len);
int kv_sys_get(struct kv *kv, const uint8_t *t, uint32_t tlen, void *out, uint32_t cap,
	       uint32_t *len);
/* A write found the store full: a checkpoint and the cleaner give back
 * what they can until the reserve and need bytes more are free (true
 * when they are). Never inside a group (a checkpoint would keep half). */
bool kv_make_room(struct kv *kv, uint64_t need);
/* Remove key k (found as type, deadline, and id: a collection's or a
 * chunked string's, 0 for a string in one entry) whose deadline passed,
 * as DEL would, and count it expired. */
void kv_expire_now(struct kv *kv, struct kv_key *k, enum kv_type type, uint64_t id,
		   int64_t expire_ms);

/* A group of changes that is one unit after a crash (MULTI/EXEC, a
 * command that writes more than one entry): nestable; the outermost
 * commit ends it. abort puts back what the group changed. */
int kv_begin(struct kv *kv);
int kv_commit(struct kv *kv);
void kv_abort(struct kv *kv);

/* ---- databases (kv_db.c) ---- */

/* At open: read the database map (kv_db.c); convert a tree of an earlier
 * key layout (kv_layout.c: -EPROTO a later layout, -EUCLEAN no prefix
 * left for the conversion); then see whether graves wait for the sweeper. */
int kv_db_open(struct kv *kv);
int kv_layout_open(struct kv *kv);
/* The layout entry of an empty tree (a new one, or after a clear). */
int kv_layout_mark(struct kv *kv);
void kv_db_started(struct kv *kv);
/* Does any tree key begin with byte p? One descent. */
bool kv_prefix_used(struct kv *kv, uint8_t p);
/* Write the database map (one entry). */
int kv_db_save(struct kv *kv);
/* Keys (and keys with a deadline) of a logical database. */
uint64_t kv_dbsize(struct kv *kv, uint32_t db);
uint64_t kv_dbexpires(struct kv *kv, uint32_t db);
/* Keys of every database. */
uint64_t kv_keys(struct kv *kv);
int kv_flushdb(struct kv *kv, uint32_t db);
int kv_flushall(struct kv *kv);
int kv_swapdb(struct kv *kv, uint32_t a, uint32_t b);
/* Keys of a logical database in order, from tree key `from` (NULL: the
 * first), or after it (`after`: a SCAN resumes after the last key it
 * returned, s->last):
 * next gives the user key (a long one read back into longbuf, KV_MAX_KEY
 * bytes) and its entry's type and deadline; 1, 0 at the end. Expired keys
 * are skipped (not removed: a walk changes nothing). */
struct kv_scan {
	struct paste_btree_cursor c;
	uint8_t pfx;
	bool skip;
	uint32_t vlen;                  /* the last key's value bytes (a collection's: its record) */
	uint32_t afterlen, lastlen;
	uint8_t after[PASTE_BTREE_MAX_KEY], last[PASTE_BTREE_MAX_KEY];
};
void kv_scan_init(struct kv *kv, struct kv_scan *s, uint32_t db, const void *from, size_t flen,
		  bool after);
int kv_scan_next(struct kv *kv, struct kv_scan *s, const uint8_t **key, size_t *klen,
		 uint8_t *longbuf, enum kv_type *type, int64_t *expire_ms);

/* ---- background work (kv_expire.c, kv_sweep.c) ---- */

/* Remove keys whose deadline passed, at most `budget` index entries. */
void kv_expire_step(struct kv *kv, uint32_t budget);
/* Delete the members of dropped collections and the keys of buried
 * databases, at most `budget` range deletes: true when it used them all
 * (graves may remain: the loop runs the next pass at once). */
bool kv_sweep_step(struct kv *kv, uint32_t budget);
/* Graves not yet swept (INFO lazyfree_pending_objects): a walk of them,
 * so INFO costs more while many dropped collections wait (each goes in a
 * few passes). */
uint64_t kv_sweep_pending(struct kv *kv);
/* When the event loop should run the next pass for expiry: UINT64_MAX
 * (no deadline), else on the loop's clock (now: its time now). */
uint64_t kv_wake_at(const struct kv *kv, uint64_t now);

/* ---- strings in chunks (kv_big.c) ---- */

/* A string of any length up to kv_max_value, written as it arrives (a
 * streamed SET, an HTTP PUT) or from bytes in DRAM. One that fits an entry
 * (paste_body_max: 63 buffers) is gathered whole into body, as a body for
 * kv_put_body; a longer one is written as it arrives: its id's grave
 * first, then a chunk entry [0xFF][id]['c'][end] each time 32 buffers'
 * worth is gathered (held where it landed, zero copy), and at the end the
 * key's record, in one group with the grave's delete. A write that never
 * ends (the connection went, a crash) leaves its chunks to the sweeper.
 * Idle when zeroed (or kv_writer_idle); movable (kv keeps its id, not
 * its address). */
struct kv_writer {
	struct paste_body body;     /* being gathered: the whole value (id 0), or the next chunk */
	uint64_t len, left;         /* the value's bytes; still to come */
	uint64_t id;                /* its chunks' id; 0: one entry */
	uint64_t at;                /* bytes in chunk entries so far */
	int err;                    /* the first failure: the rest is counted and dropped */
};
static inline void kv_writer_idle(struct kv_writer *w)
{
	kv_body_idle(&w->body);
	w->id = w->len = w->left = w->at = 0;
	w->err = 0;
}
/* Start a value of len bytes: 0, -EFBIG (over kv_max_value), -ENOSPC
 * (more than the whole store could hold, or no room for its grave). */
int kv_writer_begin(struct kv *kv, struct kv_writer *w, uint64_t len);
/* Bytes [off, off + len) of DATA event ev (held where they are, as
 * paste_body_feed), or len bytes at p (copied): 0, or the first failure
 * (kept in w->err; the rest of the value is then counted and dropped). */
int kv_writer_feed(struct kv *kv, struct kv_writer *w, struct paste_port *pt,
		   const struct paste_event *ev, uint32_t off, uint32_t len);
int kv_writer_copy(struct kv *kv, struct kv_writer *w, const void *p, uint64_t len);
/* All of it came: key k gets it as a string (as kv_put_body), the writer
 * is idle again. 0, or a negative errno (the value is not set). */
int kv_writer_put(struct kv *kv, struct kv_writer *w, struct kv_key *k, int64_t expire_ms,
		  bool *created);
/* Give the value up (a connection closed in the middle of it). */
void kv_writer_drop(struct kv *kv, struct kv_writer *w);

/* Changes of a string in place (APPEND, SETRANGE), for one in chunks as
 * for one in an entry; its deadline stays. o is k's string as kv_lookup
 * found it, or NULL for an absent key. append: the string gets
 * ext[0..n) after its bytes (extents of store buffers holding a
 * reference of the caller's, which it keeps: zero copy), or len bytes at
 * p (copied). setrange: bytes [off, off + len) become p[0..len) (p NULL:
 * zeros), the gap from the end to off zero-filled; only the chunks it
 * touches are written again (at most 63 buffers of DRAM at a time, never
 * the whole string). 0, -EFBIG (the result over kv_max_value), -ENOSPC,
 * or the store's failure; the string is then as it was. */
int kv_value_append(struct kv *kv, struct kv_key *k, const struct kv_obj *o,
		    const struct paste_extent *ext, uint32_t n);
int kv_value_append_bytes(struct kv *kv, struct kv_key *k, const struct kv_obj *o, const void *p,
			  uint64_t len);
int kv_value_setrange(struct kv *kv, struct kv_key *k, const struct kv_obj *o, uint64_t off,
		      const void *p, uint64_t len);

/* For kv_big.c: a fresh id for a collection or a chunked string (never
 * one handed out before, in this run or an earlier one); key k becomes
 * the string in chunks id of len bytes, in one group with the delete of
 * the id's grave (a collection or chunked string k held is dropped); a
 * string in ext[0..n) too long for one entry with k's name becomes one
 * in chunks; a tree write of tree key t with tag that makes room once
 * when it finds none (chunk entries are tagged KV_TAG_BIG); is a write of
 * chunks id in progress? */
uint64_t kv_new_id(struct kv *kv);
int kv_put_big(struct kv *kv, struct kv_key *k, uint64_t id, uint64_t len, int64_t expire_ms,
	       bool *created);
/* The record {id, length} of a string or element in chunks, copied to
 * the append point: ext[0..*n) with a reference of the caller's. */
int kv_big_record(struct kv *kv, uint64_t id, uint64_t len, struct paste_extent *ext, uint32_t *n);
int kv_put_chunks(struct kv *kv, struct kv_key *k, const struct paste_extent *ext, uint32_t n,
		  int64_t expire_ms, bool *created);
int kv_tree_put(struct kv *kv, const uint8_t *t, uint32_t tlen, const struct paste_extent *ext,
		uint32_t n, uint8_t tag);
bool kv_writing(const struct kv *kv, uint64_t id);

#endif
