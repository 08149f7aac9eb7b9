/*
 * cmd_keyspace.c - pkvs's commands on keys of any value: DEL, UNLINK,
 * EXISTS, TYPE, TOUCH, RANDOMKEY, RENAME, RENAMENX, COPY, OBJECT, DBSIZE,
 * FLUSHALL/FLUSHDB, SCAN and KEYS (key iteration over the tree's order,
 * with Redis's glob).
 *
 * SCAN cursors. Redis's cursor is a position in its hash table; ours is a
 * position in key order, which a 64-bit number cannot hold (keys are up
 * to 512 bytes). A cursor is therefore a ticket: the last key a SCAN call
 * reached is kept in a table of SCAN_SLOTS entries under a fresh number,
 * and the next call continues after that key, on any connection. Keys
 * present for the whole iteration are returned exactly once (the tree is
 * ordered and the next call seeks past the saved key); a ticket evicted by
 * SCAN_SLOTS later scans is answered with an error.
 *
 * RENAME moves the key's entry (a collection's record: its members are
 * keyed by its id, so they stay where they are) in one group; COPY puts a
 * string's extents under the new key and copies a collection member by
 * member (kv_copy.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd_set.h"
#include "kv_copy.h"
#include "kv_zset.h"
#include "kv_list.h"
#include "kv_hash.h"
#include "kv_evict.h"
#include "kv_notify.h"
#include "pkvs_resp.h"

#define SCAN_SLOTS 256u
static struct scan_slot {
	uint64_t id;
	uint16_t klen;
	uint8_t key[PASTE_BTREE_MAX_KEY];
} scans[SCAN_SLOTS];
static uint64_t scan_next = 1;

/* ------------------------------------------------------------ glob */

static bool glob_class(const char **pp, const char *end, uint8_t c)
{
	const char *p = *pp + 1;   /* after '[' */
	bool neg = p < end && *p == '^', hit = false;
	if (neg)
		p++;
	while (p < end && *p != ']') {
		if (*p == '\\' && p + 1 < end) {
			p++;
			hit |= (uint8_t)*p == c;
		} else if (p + 2 < end && p[1] == '-' && p[2] != ']') {
			uint8_t a = (uint8_t)p[0], b = (uint8_t)p[2];
			if (a > b) {
				uint8_t t = a;
				a = b;
				b = t;
			}
			hit |= c >= a && c <= b;
			p += 2;
		} else {
			hit |= (uint8_t)*p == c;
		}
		p++;
	}
	*pp = p < end ? p : end - 1;   /* at ']' (or the last byte: unterminated) */
	return neg ? !hit : hit;
}

bool kv_glob(const char *pat, size_t plen, const uint8_t *s, size_t slen)
{
	const char *p = pat, *end = pat + plen;
	size_t i = 0;
	/* Backtracking to the last '*' only: linear in practice, and
	 * O(plen * slen) at worst (no exponential patterns). */
	const char *star = NULL;
	size_t star_i = 0;
	while (i < slen || p < end) {
		if (p < end) {
			if (*p == '*') {
				while (p < end && *p == '*')
					p++;
				if (p == end)
					return true;
				star = p;
				star_i = i;
				continue;
			}
			if (i < slen) {
				bool ok;
				const char *q = p;
				if (*q == '?') {
					ok = true;
				} else if (*q == '[') {
					ok = glob_class(&q, end, s[i]);
				} else if (*q == '\\' && q + 1 < end) {
					q++;
					ok = (uint8_t)*q == s[i];
				} else {
					ok = (uint8_t)*q == s[i];
				}
				if (ok) {
					p = q + 1;
					i++;
					continue;
				}
			}
		}
		if (star && star_i < slen) {
			p = star;
			i = ++star_i;
			continue;
		}
		return false;
	}
	return true;
}

static bool parse_u64(const struct paste_resp_arg *a, uint64_t *v)
{
	if (!a->len || a->len > 20)
		return false;
	uint64_t r = 0;
	for (size_t i = 0; i < a->len; i++) {
		if (a->p[i] < '0' || a->p[i] > '9' || r > (UINT64_MAX - 9) / 10)
			return false;
		r = r * 10 + (uint64_t)(a->p[i] - '0');
	}
	*v = r;
	return true;
}

void cmd_scan(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	uint64_t cursor, count = 10;
	const struct paste_resp_arg *match = NULL;
	bool type = false;
	int want = -1;
	if (!parse_u64(&a[1], &cursor)) {
		resp_error(x, "ERR invalid cursor");
		return;
	}
	for (uint32_t i = 2; i < n; i += 2) {
		if (i + 1 >= n) {
			resp_error(x, "ERR syntax error");
			return;
		}
		if (paste_resp_arg_eq(&a[i], "MATCH")) {
			match = &a[i + 1];
		} else if (paste_resp_arg_eq(&a[i], "COUNT")) {
			int64_t c;
			if (!kv_arg_int(x, &a[i + 1], &c))
				return;
			if (c < 1) {
				resp_error(x, "ERR syntax error");
				return;
			}
			count = (uint64_t)c;
		} else if (paste_resp_arg_eq(&a[i], "TYPE")) {
			type = true;
			for (int t = KV_STRING; t <= KV_STREAM; t++)
				if (t != KV_TAG_BIG &&
				    paste_resp_arg_eq(&a[i + 1], kv_type_name((enum kv_type)t)))
					want = t;
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	struct scan_slot *from = NULL;
	if (cursor) {
		from = &scans[cursor % SCAN_SLOTS];
		if (from->id != cursor) {
			resp_error(x, "ERR invalid cursor (pkvs keeps the last %u SCAN cursors)", SCAN_SLOTS);
			return;
		}
	}
	struct kv_scan *sc = malloc(sizeof(*sc) + KV_MAX_KEY);
	if (!sc) {
		resp_error(x, "ERR out of memory");
		return;
	}
	uint8_t *longbuf = (uint8_t *)(sc + 1);
	kv_scan_init(kv, sc, kv_resp_db(x), from ? from->key : NULL, from ? from->klen : 0, true);
	struct resp_out o = { 0 };
	const uint8_t *key;
	size_t klen;
	enum kv_type kt;
	uint32_t found = 0;
	uint64_t seen = 0, next = 0;
	uint8_t pos[PASTE_BTREE_MAX_KEY];
	uint32_t poslen = 0;
	while (kv_scan_next(kv, sc, &key, &klen, longbuf, &kt, NULL) == 1) {
		if (seen == count) {
			next = 1;                      /* more remain */
			break;
		}
		seen++;
		memcpy(pos, sc->last, sc->lastlen);
		poslen = sc->lastlen;
		if (type && (int)kt != want)
			continue;
		if (match && !kv_glob(match->p, match->len, key, klen))
			continue;
		resp_out_bulk(&o, key, klen);
		found++;
	}
	if (next) {
		next = scan_next++;
		struct scan_slot *s = &scans[next % SCAN_SLOTS];
		s->id = next;
		s->klen = (uint16_t)poslen;       /* the next call goes on after it */
		memcpy(s->key, pos, poslen);
	}
	free(sc);
	kv->n.scans++;
	char head[80], num[24];
	int nl = snprintf(num, sizeof(num), "%" PRIu64, next);
	int hl = paste_resp_put_array(head, sizeof(head), 2);
	hl += paste_resp_put_bulk(head + hl, sizeof(head) - (size_t)hl, num, (size_t)nl);
	hl += paste_resp_put_array(head + hl, sizeof(head) - (size_t)hl, found);
	resp_out_send(x, head, hl, &o);
}

void cmd_keys(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_scan *sc = malloc(sizeof(*sc) + KV_MAX_KEY);
	if (!sc) {
		resp_error(x, "ERR out of memory");
		return;
	}
	kv_scan_init(kv, sc, kv_resp_db(x), NULL, 0, false);
	struct resp_out o = { 0 };
	const uint8_t *key;
	size_t klen;
	uint32_t found = 0;
	while (kv_scan_next(kv, sc, &key, &klen, (uint8_t *)(sc + 1), NULL, NULL) == 1) {
		if (!kv_glob(a[1].p, a[1].len, key, klen))
			continue;
		resp_out_bulk(&o, key, klen);
		found++;
	}
	free(sc);
	char head[32];
	resp_out_send(x, head, paste_resp_put_array(head, sizeof(head), found), &o);
}

/* ------------------------------------------------------ single keys */

void cmd_del(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	int64_t count = 0;
	for (uint32_t i = 1; i < n; i++) {
		if (a[i].len > KV_MAX_KEY)
			continue;                   /* no such key can exist */
		struct kv_key k;
		kv_key_init(kv, &k, kv_resp_db(x), a[i].p, a[i].len);
		int r = kv_remove(kv, &k);
		if (r < 0) {
			kv_reply_errno(x, r);
			return;
		}
		if (r > 0)
			kv_notify(KV_NOTIFY_GENERIC, "del", &k);
		count += r;
	}
	resp_int(x, count);
}

/* EXISTS and TOUCH: how many of the keys exist (a key named twice counts
 * twice). Reads, counted in INFO's hits and misses, as Redis's. */
void cmd_exists(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	int64_t count = 0;
	for (uint32_t i = 1; i < n; i++) {
		struct kv_key k;
		struct kv_obj o;
		if (a[i].len > KV_MAX_KEY)
			continue;
		kv_key_init(kv, &k, kv_resp_db(x), a[i].p, a[i].len);
		count += kv_lookup(kv, &k, &o, true) == 0;
	}
	resp_int(x, count);
}

void cmd_type(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_key k;
	struct kv_obj o;
	if (!kv_arg_key(x, kv, &a[1], &k))
		return;
	resp_simple(x, kv_lookup(kv, &k, &o, true) ? "none" : kv_type_name(o.type));
}

/* RENAME / RENAMENX src dst: the same name is a no-op once src is known
 * to exist; dst's deadline is not inherited (src's moves with it). */
static void rename_generic(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, bool nx)
{
	struct kv_key src, dst;
	struct kv_obj o, d;
	if (!kv_arg_key(x, kv, &a[1], &src) || !kv_arg_key(x, kv, &a[2], &dst))
		return;
	if (kv_lookup(kv, &src, &o, false)) {
		resp_error(x, "ERR no such key");
		return;
	}
	bool same = a[1].len == a[2].len && memcmp(a[1].p, a[2].p, a[1].len) == 0;
	if (!same && nx && kv_lookup(kv, &dst, &d, false) == 0) {
		resp_int(x, 0);
		return;
	}
	int r = same ? 0 : kv_rename(kv, &src, &o, &dst);
	if (r == 0 && !same) {
		kv_notify(KV_NOTIFY_GENERIC, "rename_from", &src);
		kv_notify(KV_NOTIFY_GENERIC, "rename_to", &dst);
	}
	if (r)
		kv_reply_errno(x, r);
	else if (nx)
		resp_int(x, !same);
	else
		resp_ok(x);
}

static void cmd_rename(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	rename_generic(x, kv, a, false);
}

static void cmd_renamenx(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	rename_generic(x, kv, a, true);
}

/* A logical database named by an argument (COPY's DB): false after
 * Redis's errors. */
static bool arg_db(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t *db)
{
	int64_t v;
	if (!kv_arg_int(x, a, &v))
		return false;
	if (v < INT32_MIN || v > INT32_MAX) {
		resp_error(x, "ERR value is out of range, value must between %d and %d", INT32_MIN, INT32_MAX);
		return false;
	}
	if (v < 0 || v >= kv->ndbs) {
		resp_error(x, "ERR DB index is out of range");
		return false;
	}
	*db = (uint32_t)v;
	return true;
}

/* COPY src dst [DB n] [REPLACE]: 1 when copied, 0 when src is absent or
 * dst exists (without REPLACE). The copy keeps src's deadline. */
static void cmd_copy(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	uint32_t db = kv_resp_db(x), to = db;
	bool replace = false;
	for (uint32_t i = 3; i < n; i++) {
		if (paste_resp_arg_eq(&a[i], "REPLACE")) {
			replace = true;
		} else if (paste_resp_arg_eq(&a[i], "DB") && i + 1 < n) {
			if (!arg_db(x, kv, &a[++i], &to))
				return;
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	if (db == to && a[1].len == a[2].len && memcmp(a[1].p, a[2].p, a[1].len) == 0) {
		resp_error(x, "ERR source and destination objects are the same");
		return;
	}
	struct kv_key src, dst;
	struct kv_obj o, d;
	if (!kv_arg_key(x, kv, &a[1], &src) || !kv_arg_key(x, kv, &a[2], &dst))
		return;
	kv_key_init(kv, &dst, to, a[2].p, a[2].len);
	if (kv_lookup(kv, &src, &o, true) || (!replace && kv_lookup(kv, &dst, &d, false) == 0)) {
		resp_int(x, 0);
		return;
	}
	/* REPLACE over a key: Redis deletes it and adds the copy, a new key. */
	bool renew = replace && (kv_notify_on & KV_NOTIFY_NEW) && kv_lookup(kv, &dst, &d, false) == 0;
	int r = kv_copy(kv, &o, &dst);
	if (r == 0 && renew)
		kv_notify(KV_NOTIFY_NEW, "new", &dst);
	if (r == 0)
		kv_notify(KV_NOTIFY_GENERIC, "copy_to", &dst);
	if (r)
		kv_reply_errno(x, r);
	else
		resp_int(x, 1);
}

/* ------------------------------------------------------ RANDOMKEY */

static uint64_t rnd(void)
{
	static uint64_t s;
	if (!s) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		s = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ 0x9E3779B97F4A7C15u;
	}
	s ^= s << 13;   /* xorshift64 */
	s ^= s >> 7;
	s ^= s << 17;
	return s;
}

/* RANDOMKEY: a uniform pick over the database's entries, the i-th found
 * by skipping i keys a leaf at a time (paste_btree_cursor_skip: O(keys),
 * ~30 us at 200,000 keys); a key whose deadline passed is not the
 * answer: the next live key is (or the first, past the end). */
static void cmd_randomkey(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)a, (void)n;
	uint32_t db = kv_resp_db(x);
	uint64_t size = kv_dbsize(kv, db);
	if (!size) {
		resp_null(x);
		return;
	}
	struct kv_scan *sc = malloc(sizeof(*sc) + KV_MAX_KEY);
	if (!sc) {
		resp_error(x, "ERR out of memory");
		return;
	}
	uint8_t pfx = kv->dbmap[db], end = (uint8_t)(pfx + 1);
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, &pfx, 1);
	paste_btree_cursor_skip(&c, rnd() % size, &end, 1);
	const uint8_t *t, *key;
	uint32_t tlen;
	size_t klen;
	bool at = paste_btree_cursor_next(&c, &t, &tlen, NULL, NULL, NULL) == 1 && t[0] == pfx;
	uint8_t *longbuf = (uint8_t *)(sc + 1);
	kv_scan_init(kv, sc, db, at ? t : NULL, at ? tlen : 0, false);
	int got = kv_scan_next(kv, sc, &key, &klen, longbuf, NULL, NULL);
	if (got != 1 && at) {
		kv_scan_init(kv, sc, db, NULL, 0, false);
		got = kv_scan_next(kv, sc, &key, &klen, longbuf, NULL, NULL);
	}
	if (got == 1)
		resp_bulk(x, key, klen);
	else
		resp_null(x);
	free(sc);
}

/* ------------------------------------------------------ OBJECT */

/* Redis's encoding names for what pkvs stores one way: a string as Redis
 * would encode it after SET (an integer of up to 20 bytes, up to 44
 * bytes, longer), a collection by its size against Redis 7.0's default
 * thresholds (its value lengths are not looked at). */
static const char *encoding(struct kv *kv, const struct kv_obj *o)
{
	if (o->type == KV_STRING) {
		char num[24];
		struct paste_resp_arg v = { num, o->len };
		int64_t i;
		if (o->len <= 20 && (kv_value_read(kv, o, 0, num, o->len), paste_resp_arg_i64(&v, &i) == 0))
			return "int";
		return o->len <= 44 ? "embstr" : "raw";
	}
	switch (o->type) {          /* hash-max-listpack-entries 512, zset-... 128 */
	case KV_HASH: return o->coll.count <= 512 ? "listpack" : "hashtable";
	case KV_LIST: return "quicklist";
	case KV_SET: return kv_set_encoding(kv, o);       /* intset or hashtable: cmd_set.c */
	case KV_STREAM: return "stream";
	default: return kv_zset_encoding(kv, o);          /* listpack or skiplist */
	}
}

/* OBJECT's subcommands (rows "object|..."): the key is a[2], looked up
 * as a read; absent: nil. */
static int object_key(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		      struct kv_obj *o)
{
	struct kv_key k;
	if (!kv_arg_key(x, kv, &a[2], &k))
		return -EINVAL;
	if (kv_lookup(kv, &k, o, true)) {
		resp_null(x);
		return -ENOENT;
	}
	return 0;
}

static void cmd_object_encoding(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
				uint32_t n)
{
	(void)n;
	struct kv_obj o;
	if (object_key(x, kv, a, &o) == 0) {
		const char *e = encoding(kv, &o);
		resp_bulk(x, e, strlen(e));
	}
}

static void cmd_object_freq(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_obj o;
	if (object_key(x, kv, a, &o) != 0)
		return;
	if (!kv_access_lfu)
		resp_error(x, "ERR An LFU maxmemory policy is not selected, access frequency not tracked. "
			   "Please note that when switching between policies at runtime LRU and LFU data "
			   "will take some time to adjust.");
	else
		resp_int(x, kv_access_freq(kv, kv_resp_db(x), a[2].p, a[2].len));
}

/* IDLETIME and FREQ answer from the access table (kv_evict.h), which
 * OBJECT does not touch; REFCOUNT 1 (values are not shared). */
static void cmd_object_idletime(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
				uint32_t n)
{
	(void)n;
	struct kv_obj o;
	if (object_key(x, kv, a, &o) != 0)
		return;
	if (kv_access_lfu)
		resp_error(x, "ERR An LFU maxmemory policy is selected, idle time not tracked. Please "
			   "note that when switching between policies at runtime LRU and LFU data will "
			   "take some time to adjust.");
	else
		resp_int(x, (int64_t)kv_access_idle(kv, kv_resp_db(x), a[2].p, a[2].len));
}

static void cmd_object_refcount(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
				uint32_t n)
{
	(void)n;
	struct kv_obj o;
	if (object_key(x, kv, a, &o) == 0)
		resp_int(x, 1);
}

static void cmd_object_help(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)a, (void)n;
	static const char *const help[] = {
		"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"ENCODING <key>",
		"    The encoding Redis would give the key's value (pkvs keeps each type one",
		"    way).",
		"FREQ <key>",
		"    The key's logarithmic access counter (under an lfu maxmemory-policy).",
		"IDLETIME <key>",
		"    Seconds since the key was last read or written (not under an lfu",
		"    maxmemory-policy).",
		"REFCOUNT <key>",
		"    References to the key's value: always 1.",
		"HELP",
		"    Prints this help.",
	};
	kv_reply_help(x, help, sizeof(help) / sizeof(help[0]));
}

/* ------------------------------------------------------ databases */

void cmd_dbsize(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)a, (void)n;
	resp_int(x, (int64_t)kv_dbsize(kv, kv_resp_db(x)));
}

/* FLUSHDB / FLUSHALL [ASYNC|SYNC]: both O(1) here (the keys are buried and
 * swept later), so ASYNC and SYNC do the same. */
void cmd_flushall(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	if (n > 2 || (n == 2 && !paste_resp_arg_eq(&a[1], "SYNC") && !paste_resp_arg_eq(&a[1], "ASYNC"))) {
		resp_error(x, "ERR syntax error");
		return;
	}
	int r = paste_resp_arg_eq(&a[0], "FLUSHDB") ? kv_flushdb(kv, kv_resp_db(x)) : kv_flushall(kv);
	if (r)
		kv_reply_errno(x, r);
	else
		resp_ok(x);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_keyspace[] = {
	{ "del", -2, "write", "generic", "Removes keys of any type; answers how many there were.", cmd_del, 1, -1, 1 },
	{ "unlink", -2, "write fast", "generic", "Removes keys as DEL does; answers how many there were.", cmd_del, 1, -1, 1 },
	{ "exists", -2, "readonly fast", "generic", "Counts the named keys that exist (a key named twice counts twice).", cmd_exists, 1, -1, 1 },
	{ "touch", -2, "readonly fast", "generic", "Counts the named keys that exist, and marks them accessed now.", cmd_exists, 1, -1, 1 },
	{ "type", 2, "readonly fast", "generic", "Names the type of a key's value: string, hash, ..., or none.", cmd_type, 1, 1, 1 },
	{ "rename", 3, "write", "generic", "Gives a key a new name, replacing a key that has it.", cmd_rename, 1, 2, 1 },
	{ "renamenx", 3, "write fast", "generic", "Gives a key a new name only when no key has it yet.", cmd_renamenx, 1, 2, 1 },
	{ "copy", -3, "write denyoom", "generic", "Writes a copy of a key's value under another name, in this or another database (DB, REPLACE).", cmd_copy, 1, 2, 1 },
	{ "randomkey", 1, "readonly touches_arbitrary_keys", "generic", "A key of the current database picked at random; null when it has none.", cmd_randomkey, 0, 0, 0 },
	{ "object", -2, "", "generic", "OBJECT subcommands: how a key's value is kept.", NULL, 0, 0, 0 },
	{ "object|encoding", 3, "readonly", "generic", "The encoding Redis would give the key's value.", cmd_object_encoding, 2, 2, 1 },
	{ "object|freq", 3, "readonly", "generic", "The key's logarithmic access counter (under an lfu maxmemory-policy).", cmd_object_freq, 2, 2, 1 },
	{ "object|help", 2, "loading stale", "generic", "Lists OBJECT's subcommands.", cmd_object_help, 0, 0, 0 },
	{ "object|idletime", 3, "readonly", "generic", "Seconds since the key was last read or written (not under an lfu maxmemory-policy).", cmd_object_idletime, 2, 2, 1 },
	{ "object|refcount", 3, "readonly", "generic", "Answers 1: pkvs shares no values between keys.", cmd_object_refcount, 2, 2, 1 },
	{ "dbsize", 1, "readonly fast", "server", "How many keys the current database has.", cmd_dbsize, 0, 0, 0 },
	{ "flushall", -1, "write", "server", "Empties every database.", cmd_flushall, 0, 0, 0 },
	{ "flushdb", -1, "write", "server", "Empties the current database.", cmd_flushall, 0, 0, 0 },
	{ "scan", -2, "readonly touches_arbitrary_keys", "generic", "Walks the current database's key names with a cursor, a batch per call (MATCH, COUNT, TYPE).", cmd_scan, 0, 0, 0 },
	{ "keys", 2, "readonly", "generic", "Every key name of the current database that matches a glob pattern.", cmd_keys, 0, 0, 0 },
	{ 0 }
};
