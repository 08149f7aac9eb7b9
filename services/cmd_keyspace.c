/*
 * cmd_keyspace.c - pkvs's commands on keys of any value: DEL, UNLINK,
 * EXISTS, TYPE, DBSIZE, FLUSHALL/FLUSHDB, SCAN and KEYS (key iteration
 * over the tree's order, with Redis's glob).
 *
 * SCAN cursors. Redis's cursor is a position in its hash table; ours is a
 * position in key order, which a 64-bit number cannot hold (keys are up
 * to 512 bytes). A cursor is therefore a ticket: the last key a SCAN call
 * reached is kept in a table of SCAN_SLOTS entries under a fresh number,
 * and the next call continues after that key, on any connection. Keys
 * present for the whole iteration are returned exactly once (the tree is
 * ordered and the next call seeks past the saved key); a ticket evicted by
 * SCAN_SLOTS later scans is answered with an error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
			if (!parse_u64(&a[i + 1], &count) || count < 1) {
				resp_error(x, count < 1 ? "ERR syntax error" : "ERR value is not an integer or out of range");
				return;
			}
		} else if (paste_resp_arg_eq(&a[i], "TYPE")) {
			type = true;
			for (int t = KV_STRING; t <= KV_ZSET; t++)
				if (paste_resp_arg_eq(&a[i + 1], kv_type_name((enum kv_type)t)))
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
		count += r;
	}
	resp_int(x, count);
}

void cmd_exists(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	int64_t count = 0;
	for (uint32_t i = 1; i < n; i++) {
		struct kv_key k;
		struct kv_obj o;
		if (a[i].len > KV_MAX_KEY)
			continue;
		kv_key_init(kv, &k, kv_resp_db(x), a[i].p, a[i].len);
		count += kv_lookup(kv, &k, &o, false) == 0;
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
	resp_simple(x, kv_lookup(kv, &k, &o, false) ? "none" : kv_type_name(o.type));
}

void cmd_dbsize(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)a, (void)n;
	resp_int(x, (int64_t)kv_dbsize(kv, kv_resp_db(x)));
}

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
	{ "type", 2, "readonly fast", "generic", "Names the type of a key's value: string, hash, ..., or none.", cmd_type, 1, 1, 1 },
	{ "dbsize", 1, "readonly fast", "server", "How many keys the current database has.", cmd_dbsize, 0, 0, 0 },
	{ "flushall", -1, "write", "server", "Empties every database.", cmd_flushall, 0, 0, 0 },
	{ "flushdb", -1, "write", "server", "Empties the current database.", cmd_flushall, 0, 0, 0 },
	{ "scan", -2, "readonly", "generic", "Walks the current database's key names with a cursor, a batch per call (MATCH, COUNT, TYPE).", cmd_scan, 0, 0, 0 },
	{ "keys", 2, "readonly", "generic", "Every key name of the current database that matches a glob pattern.", cmd_keys, 0, 0, 0 },
	{ 0 }
};
