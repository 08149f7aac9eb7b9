/*
 * cmd_stream.c - XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM and XSETID,
 * as Redis 7.0's t_stream.c answers them, over kv_stream.h; and
 * what cmd_xread.c and cmd_xgroup.c share (cmd_stream.h).
 *
 * Approximate trimming (MAXLEN ~, MINID ~) removes whole runs of
 * stream-node-max-entries entries, as Redis removes whole nodes, and
 * goes out to replicas as the exact trim it came to (Redis's rewrite).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_stream.h"
#include "kv_notify.h"
#include "kv_repl.h"

static const char *const bad_id = "ERR Invalid stream ID specified as stream command argument";

/* ------------------------------------------------------------ shared */

/* Redis's string2ull: an integer as string2ll takes one (no sign but
 * '-', no leading zero), else what strtoull takes whole. */
static bool parse_u64(const char *p, size_t len, uint64_t *v)
{
	char buf[128];
	if (len == 0 || len >= sizeof(buf))
		return false;
	memcpy(buf, p, len);
	buf[len] = 0;
	if (buf[0] == '-') {
		struct paste_resp_arg a = { buf, len };
		int64_t i;
		if (paste_resp_arg_i64(&a, &i) == 0)
			return false;           /* negative */
	}
	char *end;
	errno = 0;
	unsigned long long u = strtoull(buf, &end, 10);
	if (errno || *end || end == buf)
		return false;
	*v = u;
	return true;
}

bool kv_sid_parse(const struct paste_resp_arg *a, struct kv_sid *id, uint64_t missing_seq,
		  bool strict, bool *seq_given)
{
	if (a->len > 127)
		return false;
	if (seq_given)
		*seq_given = true;
	if (a->len == 1 && (a->p[0] == '-' || a->p[0] == '+')) {
		if (strict)
			return false;
		*id = a->p[0] == '-' ? (struct kv_sid){ 0, 0 } : (struct kv_sid){ UINT64_MAX, UINT64_MAX };
		return true;
	}
	const char *dash = memchr(a->p, '-', a->len);
	size_t mlen = dash ? (size_t)(dash - a->p) : a->len;
	if (!parse_u64(a->p, mlen, &id->ms))
		return false;
	if (!dash) {
		id->seq = missing_seq;
		return true;
	}
	size_t slen = a->len - mlen - 1;
	if (seq_given && slen == 1 && dash[1] == '*') {
		id->seq = 0;
		*seq_given = false;
		return true;
	}
	return parse_u64(dash + 1, slen, &id->seq);
}

bool kv_sid_arg(struct resp_ctx *x, const struct paste_resp_arg *a, struct kv_sid *id,
		uint64_t missing_seq, bool strict, bool *seq_given)
{
	if (kv_sid_parse(a, id, missing_seq, strict, seq_given))
		return true;
	resp_error(x, "%s", bad_id);
	return false;
}

bool kv_sid_incr(struct kv_sid *id)
{
	if (id->seq != UINT64_MAX) {
		id->seq++;
	} else if (id->ms != UINT64_MAX) {
		id->ms++;
		id->seq = 0;
	} else {
		return false;
	}
	return true;
}

bool kv_sid_decr(struct kv_sid *id)
{
	if (id->seq) {
		id->seq--;
	} else if (id->ms) {
		id->ms--;
		id->seq = UINT64_MAX;
	} else {
		return false;
	}
	return true;
}

int kv_stream_arg(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		  struct kv_stream *s, bool read)
{
	if (!kv_arg_key(x, kv, a, &s->key))
		return -EINVAL;
	int r = kv_stream_open(kv, s, read);
	if (r == -EMEDIUMTYPE) {
		resp_error(x, "WRONGTYPE Operation against a key holding the wrong kind of value");
		return -EINVAL;
	}
	return r;
}

void kv_sid_out(struct kv_out *o, struct kv_sid id)
{
	char b[48];
	kv_out_bulk(o, b, (size_t)kv_sid_fmt(b, id));
}

static void field_out(void *arg, uint32_t i, const uint8_t *f, size_t flen, const uint8_t *v,
		      size_t vlen)
{
	(void)i;
	kv_out_bulk(arg, f, flen);
	kv_out_bulk(arg, v, vlen);
}

int kv_stream_entry_out(struct kv_out *o, struct kv *kv, struct kv_sid id,
			const struct paste_extent *ext, uint32_t n, uint32_t len)
{
	uint8_t stack[1024], *p = len <= sizeof(stack) ? stack : malloc(len);
	if (!p)
		return -ENOMEM;
	paste_store_read(kv->store, ext, n, 0, p, len);
	uint32_t pairs;
	int r = kv_stream_fields_decode(p, len, &pairs, NULL, NULL);
	if (r == 0) {
		kv_out_array(o, 2);
		kv_sid_out(o, id);
		kv_out_array(o, 2ull * pairs);
		kv_stream_fields_decode(p, len, &pairs, field_out, o);
	}
	if (p != stack)
		free(p);
	return r;
}

/* Entries from..to of s (back: to..from, from the end), count at most
 * (0: all): how many, or a failure. The count comes first: the array's
 * length is written before its entries. */
int64_t kv_stream_range_out(struct kv_out *o, struct kv *kv, const struct kv_stream *s,
			    struct kv_sid from, struct kv_sid to, uint64_t count, bool back)
{
	struct kv_stream_walk w;
	uint64_t got = 0;
	int r;
	if (kv_sid_cmp(from, to) > 0) {
		kv_out_array(o, 0);
		return 0;
	}
	kv_stream_walk_init(kv, &w, s->o.coll.id, back ? to : from, back);
	while ((!count || got < count) && (r = kv_stream_walk_next(kv, &w)) == 1 &&
	       (back ? kv_sid_cmp(w.id, from) >= 0 : kv_sid_cmp(w.id, to) <= 0))
		got++;
	kv_out_array(o, got);
	kv_stream_walk_init(kv, &w, s->o.coll.id, back ? to : from, back);
	for (uint64_t i = 0; i < got; i++) {
		if ((r = kv_stream_walk_next(kv, &w)) != 1)
			return r < 0 ? r : -EBADMSG;
		if ((r = kv_stream_entry_out(o, kv, w.id, w.ext, w.n, w.len)) < 0)
			return r;
	}
	return (int64_t)got;
}

struct kv_sid kv_stream_tombstone(struct kv *kv, const struct kv_stream *s)
{
	struct kv_sid del = kv_stream_maxdel(s), first, none = { 0, 0 };
	if (!s->o.coll.count || kv_sid_zero(del))
		return none;
	if (kv_stream_edge(kv, s, false, &first) == 1 && kv_sid_cmp(first, del) > 0)
		return none;
	return del;
}

bool kv_stream_tombstone_after(struct kv *kv, const struct kv_stream *s, struct kv_sid from)
{
	return kv_sid_tombstone_after(kv_stream_tombstone(kv, s), from);
}

int64_t kv_stream_distance(struct kv *kv, const struct kv_stream *s, struct kv_sid id)
{
	const struct kv_coll *c = &s->o.coll;
	if (!c->added)
		return 0;
	int cl = kv_sid_cmp(id, kv_stream_last(s));
	if (!c->count && cl <= 0)
		return (int64_t)c->added;
	if (cl == 0)
		return (int64_t)c->added;
	if (cl > 0)
		return -1;
	struct kv_sid first = { 0, 0 }, del = kv_stream_maxdel(s);
	kv_stream_edge(kv, s, false, &first);
	if (kv_sid_zero(del) || kv_sid_cmp(del, first) < 0) {
		int cf = kv_sid_cmp(id, first);
		if (cf < 0)
			return (int64_t)(c->added - c->count);
		if (cf == 0)
			return (int64_t)(c->added - c->count + 1);
	}
	return -1;
}

/* ------------------------------------------------------------ XADD, XTRIM */

/* stream-node-max-entries, read again only after a CONFIG SET (every XADD
 * reads it: the table's walk would cost a tenth of an XADD). */
static uint64_t node_max_entries(void)
{
	static uint64_t gen = UINT64_MAX, v;
	if (gen != kv_config_gen) {
		v = kv_config_num("stream-node-max-entries", 100);
		gen = kv_config_gen;
	}
	return v;
}

struct trim_args {
	bool given, minid, approx, nomk, id_given, seq_given;
	uint64_t maxlen, limit;
	struct kv_sid threshold, id;
	uint32_t arg;                   /* the threshold's argument */
};


/* Redis's streamParseAddOrTrimArgsOrReply: the index of the ID (XADD) or
 * n (XTRIM), or 0 after replying. */
static uint32_t trim_parse(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n,
			   bool xadd, struct trim_args *t)
{
	*t = (struct trim_args){ 0 };
	bool limit_given = false;
	uint32_t i = 2;
	for (; i < n; i++) {
		uint32_t more = n - 1 - i;
		const struct paste_resp_arg *o = &a[i];
		if (xadd && o->len == 1 && o->p[0] == '*') {
			break;
		} else if ((paste_resp_arg_eq(o, "maxlen") || paste_resp_arg_eq(o, "minid")) && more) {
			if (t->given) {
				resp_error(x, "ERR syntax error, MAXLEN and MINID options at the same time are not compatible");
				return 0;
			}
			t->minid = paste_resp_arg_eq(o, "minid");
			t->approx = false;
			const struct paste_resp_arg *next = &a[i + 1];
			if (more >= 2 && next->len == 1 && (next->p[0] == '~' || next->p[0] == '=')) {
				t->approx = next->p[0] == '~';
				i++;
			}
			if (t->minid) {
				if (!kv_sid_arg(x, &a[i + 1], &t->threshold, 0, true, NULL))
					return 0;
			} else {
				int64_t v;
				if (!kv_arg_int(x, &a[i + 1], &v))
					return 0;
				if (v < 0) {
					resp_error(x, "ERR The MAXLEN argument must be >= 0.");
					return 0;
				}
				t->maxlen = (uint64_t)v;
			}
			i++;
			t->given = true;
			t->arg = i;
		} else if (paste_resp_arg_eq(o, "limit") && more) {
			int64_t v;
			if (!kv_arg_int(x, &a[i + 1], &v))
				return 0;
			if (v < 0) {
				resp_error(x, "ERR The LIMIT argument must be >= 0.");
				return 0;
			}
			t->limit = (uint64_t)v;
			limit_given = true;
			i++;
		} else if (xadd && paste_resp_arg_eq(o, "nomkstream")) {
			t->nomk = true;
		} else if (xadd) {
			if (!kv_sid_arg(x, o, &t->id, 0, true, &t->seq_given))
				return 0;
			t->id_given = true;
			break;
		} else {
			resp_error(x, "ERR syntax error");
			return 0;
		}
	}
	if (t->limit && !t->given) {
		resp_error(x, "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy");
		return 0;
	}
	if (!xadd && !t->given) {
		resp_error(x, "ERR syntax error, XTRIM must be called with a trimming strategy");
		return 0;
	}
	if (kv_repl_from_primary(x)) {
		t->limit = 0;                   /* the primary rewrote it exact */
	} else if (limit_given) {
		if (!t->approx) {
			resp_error(x, "ERR syntax error, LIMIT cannot be used without the special ~ option");
			return 0;
		}
	} else if (t->approx) {
		uint64_t node = node_max_entries();
		t->limit = node > 0 ? 100 * node : 10000;
		if (t->limit > 1000000)
			t->limit = 1000000;
	}
	return i;
}

/* Trim s as t says: how many went, or a failure. */
static int64_t trim(struct kv *kv, struct kv_stream *s, const struct trim_args *t)
{
	return kv_stream_trim(kv, s, t->minid, t->maxlen, t->threshold, t->approx, t->limit);
}

void kv_stream_propagate_claim(uint32_t db, const struct paste_resp_arg *key,
			       const struct paste_resp_arg *group, const struct paste_resp_arg *owner,
			       struct kv_sid id, uint64_t ms, uint64_t count, struct kv_sid last)
{
	char ids[48], lasts[48], t[24], c[24];
	struct paste_resp_arg av[14] = {
		{ "XCLAIM", 6 }, *key, *group, *owner, { "0", 1 },
		{ ids, (size_t)kv_sid_fmt(ids, id) }, { "TIME", 4 },
		{ t, (size_t)snprintf(t, sizeof(t), "%" PRIu64, ms) }, { "RETRYCOUNT", 10 },
		{ c, (size_t)snprintf(c, sizeof(c), "%" PRIu64, count) }, { "FORCE", 5 },
		{ "JUSTID", 6 }, { "LASTID", 6 }, { lasts, (size_t)kv_sid_fmt(lasts, last) } };
	kv_repl_also(db, av, 14);
}

void kv_stream_propagate_setid(uint32_t db, const struct paste_resp_arg *key,
			       const struct paste_resp_arg *group, const struct kv_sgroup *g)
{
	char last[48], read[24];
	struct paste_resp_arg av[7] = {
		{ "XGROUP", 6 }, { "SETID", 5 }, *key, *group,
		{ last, (size_t)kv_sid_fmt(last, g->last) }, { "ENTRIESREAD", 11 },
		{ read, (size_t)snprintf(read, sizeof(read), "%" PRId64, g->read) } };
	kv_repl_also(db, av, 7);
}

/* After an approximate trim, argv goes to replicas with "=" and the
 * trim it came to (Redis's streamRewriteTrimArgument), the ID as taken. */
static void propagate_trimmed(struct resp_ctx *x, struct kv *kv, const struct kv_stream *s,
			      const struct paste_resp_arg *a, uint32_t n, const struct trim_args *t,
			      uint32_t idpos, const char *id)
{
	struct paste_resp_arg *av = malloc(n * sizeof(*av));
	if (!av)
		return;
	memcpy(av, a, n * sizeof(*av));
	char num[48], first[48];
	if (t->given && t->approx) {
		av[t->arg - 1] = (struct paste_resp_arg){ "=", 1 };
		if (t->minid) {
			struct kv_sid f = { 0, 0 };
			kv_stream_edge(kv, s, false, &f);
			av[t->arg] = (struct paste_resp_arg){ first, (size_t)kv_sid_fmt(first, f) };
		} else {
			av[t->arg] = (struct paste_resp_arg){
				num, (size_t)snprintf(num, sizeof(num), "%" PRIu64, s->o.coll.count) };
		}
	}
	if (id)
		av[idpos] = (struct paste_resp_arg){ id, strlen(id) };
	kv_repl_also(kv_resp_db(x), av, n);
	free(av);
}

static void cmd_xadd(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct trim_args t;
	uint32_t idpos = trim_parse(x, a, n, true, &t);
	if (!idpos)
		return;
	uint32_t fpos = idpos + 1;
	if (n < fpos + 2 || (n - fpos) % 2) {
		resp_arity_error(x, &a[0]);
		return;
	}
	if (t.id_given && t.seq_given && kv_sid_zero(t.id)) {
		resp_error(x, "ERR The ID specified in XADD must be greater than 0-0");
		return;
	}
	struct kv_stream s;
	int r = kv_stream_arg(x, kv, &a[1], &s, false);
	if (r == -EINVAL)
		return;
	if (r == -ENOENT) {
		if (t.nomk) {
			resp_null(x);
			return;
		}
		kv_stream_new(kv, &s);
	}
	struct kv_sid last = kv_stream_last(&s), id;
	if (last.ms == UINT64_MAX && last.seq == UINT64_MAX) {
		resp_error(x, "ERR The stream has exhausted the last possible ID, unable to add more items");
		return;
	}
	if (t.id_given && !t.seq_given && t.id.ms == last.ms) {
		if (last.seq == UINT64_MAX) {
			resp_error(x, "ERR Elements are too large to be stored");
			return;
		}
		id = (struct kv_sid){ last.ms, last.seq + 1 };
	} else if (t.id_given) {
		id = t.id;
	} else {
		uint64_t ms = (uint64_t)kv_now(kv);
		id = ms > last.ms ? (struct kv_sid){ ms, 0 } : last;
		if (ms <= last.ms)
			kv_sid_incr(&id);
	}
	if (kv_sid_cmp(id, last) <= 0) {
		resp_error(x, "ERR The ID specified in XADD is equal or smaller than the target stream top item");
		return;
	}
	uint32_t pairs = (n - fpos) / 2;
	size_t vlen = kv_stream_fields_size(a + fpos, pairs);
	uint8_t stack[2048], *val = vlen <= sizeof(stack) ? stack : malloc(vlen);
	if (!val) {
		resp_error(x, "ERR out of memory");
		return;
	}
	kv_stream_fields_encode(val, a + fpos, pairs);
	int64_t gone = 0;
	/* 0 in Redis: nodes bounded by bytes alone; here by its default. */
	s.node_max = node_max_entries();
	r = kv_stream_begin(kv, &s, vlen);
	if (r == 0)
		r = kv_stream_append(kv, &s, id, val, vlen);
	if (r == 0 && t.given && (gone = trim(kv, &s, &t)) < 0)
		r = (int)gone;
	r = kv_stream_end(kv, &s, r);
	if (val != stack)
		free(val);
	if (r == -EFBIG) {
		resp_error(x, "ERR Elements are too large to be stored");
		return;
	}
	if (r) {
		kv_reply_errno(x, r);
		return;
	}
	char ids[48];
	resp_bulk(x, ids, (size_t)kv_sid_fmt(ids, id));
	kv_notify(KV_NOTIFY_STREAM, "xadd", &s.key);
	if (gone > 0)
		kv_notify(KV_NOTIFY_STREAM, "xtrim", &s.key);
	if (kv_repl_active)
		propagate_trimmed(x, kv, &s, a, n, &t, idpos,
				  !t.id_given || !t.seq_given ? ids : NULL);
}

static void cmd_xtrim(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct trim_args t;
	if (!trim_parse(x, a, n, false, &t))
		return;
	struct kv_stream s;
	int r = kv_stream_arg(x, kv, &a[1], &s, false);
	if (r == -EINVAL)
		return;
	if (r == -ENOENT) {
		resp_int(x, 0);
		return;
	}
	int64_t gone = trim(kv, &s, &t);
	if (gone < 0) {
		kv_reply_errno(x, (int)gone);
		return;
	}
	resp_int(x, gone);
	if (gone) {
		kv_notify(KV_NOTIFY_STREAM, "xtrim", &s.key);
		if (kv_repl_active)
			propagate_trimmed(x, kv, &s, a, n, &t, 0, NULL);
	}
}

/* ------------------------------------------------------------ reads */

static void cmd_xlen(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	struct kv_stream s;
	int r = kv_stream_arg(x, kv, &a[1], &s, true);
	if (r != -EINVAL)
		resp_int(x, r ? 0 : (int64_t)s.o.coll.count);
}

/* Redis's streamParseIntervalIDOrReply: "(" makes the bound exclusive. */
static bool interval(struct resp_ctx *x, const struct paste_resp_arg *a, struct kv_sid *id,
		     bool *ex, uint64_t missing_seq)
{
	*ex = a->len > 1 && a->p[0] == '(';
	if (!*ex)
		return kv_sid_arg(x, a, id, missing_seq, false, NULL);
	struct paste_resp_arg t = { a->p + 1, a->len - 1 };
	return kv_sid_arg(x, &t, id, missing_seq, true, NULL);
}

static void xrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n,
		   bool rev)
{
	struct kv_sid from, to;
	bool fex, tex;
	if (!interval(x, rev ? &a[3] : &a[2], &from, &fex, 0))
		return;
	if (fex && !kv_sid_incr(&from)) {
		resp_error(x, "ERR invalid start ID for the interval");
		return;
	}
	if (!interval(x, rev ? &a[2] : &a[3], &to, &tex, UINT64_MAX))
		return;
	if (tex && !kv_sid_decr(&to)) {
		resp_error(x, "ERR invalid end ID for the interval");
		return;
	}
	int64_t count = -1;
	for (uint32_t i = 4; i < n; i++) {
		if (paste_resp_arg_eq(&a[i], "count") && i + 1 < n) {
			if (!kv_arg_int(x, &a[i + 1], &count))
				return;
			if (count < 0)
				count = 0;
			i++;
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	struct kv_stream s;
	int r = kv_stream_arg(x, kv, &a[1], &s, true);
	if (r == -EINVAL)
		return;
	if (r == -ENOENT) {
		resp_array(x, 0);
		return;
	}
	if (count == 0) {
		resp_send(x, kv_proto(x) == 3 ? "_\r\n" : "*-1\r\n", kv_proto(x) == 3 ? 3 : 5);
		return;
	}
	struct kv_out o;
	kv_out_init(&o, x);
	int64_t got = kv_stream_range_out(&o, kv, &s, from, to, count < 0 ? 0 : (uint64_t)count, rev);
	if (kv_out_end(&o) == 0 && got < 0)
		resp_close(x);
}

static void cmd_xrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	xrange(x, kv, a, n, false);
}

static void cmd_xrevrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			  uint32_t n)
{
	xrange(x, kv, a, n, true);
}

/* ------------------------------------------------------------ XDEL, XSETID */

static void cmd_xdel(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct kv_stream s;
	int r = kv_stream_arg(x, kv, &a[1], &s, false);
	if (r) {
		if (r == -ENOENT)
			resp_int(x, 0);
		return;
	}
	/* Every ID is checked before anything is deleted (Redis's rule). */
	struct kv_sid *ids = malloc((n - 2) * sizeof(*ids));
	if (!ids) {
		resp_error(x, "ERR out of memory");
		return;
	}
	for (uint32_t i = 2; i < n; i++) {
		if (!kv_sid_arg(x, &a[i], &ids[i - 2], 0, true, NULL)) {
			free(ids);
			return;
		}
	}
	int64_t deleted = 0;
	r = kv_stream_begin(kv, &s, 0);
	for (uint32_t i = 0; r == 0 && i < n - 2; i++) {
		int got = kv_stream_delete(kv, &s, ids[i]);
		if (got < 0)
			r = got;
		else
			deleted += got;
	}
	r = kv_stream_end(kv, &s, r);
	free(ids);
	if (r) {
		kv_reply_errno(x, r);
		return;
	}
	resp_int(x, deleted);
	if (deleted)
		kv_notify(KV_NOTIFY_STREAM, "xdel", &s.key);
}

/* XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id] */
static void cmd_xsetid(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct kv_sid id, maxdel = { 0, 0 };
	int64_t added = -1;
	if (!kv_sid_arg(x, &a[2], &id, 0, true, NULL))
		return;
	for (uint32_t i = 3; i < n; i++) {
		bool more = i + 1 < n;
		if (paste_resp_arg_eq(&a[i], "entriesadded") && more) {
			if (!kv_arg_int(x, &a[++i], &added))
				return;
			if (added < 0) {
				resp_error(x, "ERR entries_added must be positive");
				return;
			}
		} else if (paste_resp_arg_eq(&a[i], "maxdeletedid") && more) {
			if (!kv_sid_arg(x, &a[++i], &maxdel, 0, true, NULL))
				return;
			if (kv_sid_cmp(id, maxdel) < 0) {
				resp_error(x, "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id");
				return;
			}
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	struct kv_stream s;
	int r = kv_stream_arg(x, kv, &a[1], &s, false);
	if (r == -EINVAL)
		return;
	if (r == -ENOENT) {
		resp_error(x, "ERR no such key");
		return;
	}
	if (s.o.coll.count) {
		/* The ID may not go below the last entry's. */
		struct kv_sid top;
		if (kv_stream_edge(kv, &s, true, &top) == 1 && kv_sid_cmp(id, top) < 0) {
			resp_error(x, "ERR The ID specified in XSETID is smaller than the target stream top item");
			return;
		}
		if (added != -1 && s.o.coll.count > (uint64_t)added) {
			resp_error(x, "ERR The entries_added specified in XSETID is smaller than the target stream length");
			return;
		}
	}
	if ((r = kv_stream_begin(kv, &s, 0)) == 0) {
		s.o.coll.last_ms = id.ms;
		s.o.coll.last_seq = id.seq;
		if (added != -1)
			s.o.coll.added = (uint64_t)added;
		if (!kv_sid_zero(maxdel)) {
			s.o.coll.del_ms = maxdel.ms;
			s.o.coll.del_seq = maxdel.seq;
		}
		s.dirty = s.changed = true;
		r = kv_stream_end(kv, &s, 0);
	}
	if (r) {
		kv_reply_errno(x, r);
		return;
	}
	resp_ok(x);
	kv_notify(KV_NOTIFY_STREAM, "xsetid", &s.key);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_stream[] = {
	{ "xadd", -5, "write denyoom fast", "stream", "Appends an entry to a stream (creating it unless NOMKSTREAM), trimming it on MAXLEN or MINID; answers the entry's ID.", cmd_xadd, 1, 1, 1 },
	{ "xlen", 2, "readonly fast", "stream", "How many entries a stream holds (0 when the key is missing).", cmd_xlen, 1, 1, 1 },
	{ "xrange", -4, "readonly", "stream", "The entries between two IDs, oldest first (COUNT; '(' excludes a bound).", cmd_xrange, 1, 1, 1 },
	{ "xrevrange", -4, "readonly", "stream", "The entries between two IDs, newest first (COUNT; '(' excludes a bound).", cmd_xrevrange, 1, 1, 1 },
	{ "xdel", -3, "write fast", "stream", "Deletes entries by ID; answers how many were there.", cmd_xdel, 1, 1, 1 },
	{ "xtrim", -4, "write", "stream", "Removes a stream's oldest entries beyond MAXLEN or below MINID (~: whole nodes, LIMIT); answers how many went.", cmd_xtrim, 1, 1, 1 },
	{ "xsetid", -3, "write denyoom fast", "stream", "Sets a stream's last ID (and its entries-added count and largest deleted ID).", cmd_xsetid, 1, 1, 1 },
	{ 0 }
};
