/*
 * cmd_bitops.c - pkvs's bitmap commands (pkvs_resp.h): SETBIT, GETBIT,
 * BITCOUNT, BITPOS, BITOP, BITFIELD and BITFIELD_RO on string values,
 * with Redis 7.0's replies, errors and the order it checks things in.
 *
 * Reads go through the value in pieces of at most 64 KiB (a value may be
 * 512 MiB in chunks): a count or a search holds one piece of DRAM, never
 * the string. BITOP streams its result into fresh buffers the same way
 * (kv_writer), so its cost in DRAM is two pieces whatever the sizes; the
 * sources stay readable while it writes, so the destination may be one
 * of them. BITFIELD's writes touch the bytes of each integer only (at
 * most 9), in one group with the growth of the string: after a crash all
 * of a command's changes are there or none. The arithmetic is kv_bits.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv_bits.h"
#include "kv_notify.h"
#include "pkvs_resp.h"

#define PIECE (64u << 10)

static const char bad_offset[] = "ERR bit offset is not an integer or out of range";

/* The string at key arg: 0 (*o), -ENOENT (absent), or -EINVAL after
 * replying (a key over pkvs's limit, WRONGTYPE). */
static int bitmap_at(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *arg,
		     struct kv_key *k, struct kv_obj *o, bool read)
{
	if (!kv_arg_key(x, kv, arg, k))
		return -EINVAL;
	return kv_find(x, kv, k, KV_STRING, o, read);
}

/* A bit offset inside a string of at most KV_STRING_MAX bytes; with a
 * width (BITFIELD), "#n" names the n-th integer of that width. */
static bool bit_offset(struct resp_ctx *x, const struct paste_resp_arg *a, unsigned width,
		       uint64_t *off)
{
	bool hash = width && a->len && a->p[0] == '#';
	struct paste_resp_arg num = { a->p + hash, a->len - hash };
	int64_t v;
	if (paste_resp_arg_i64(&num, &v) ||
	    (hash && (v > INT64_MAX / (int64_t)width || v < INT64_MIN / (int64_t)width))) {
		resp_error(x, bad_offset);
		return false;
	}
	if (hash)
		v *= (int64_t)width;
	if (v < 0 || (uint64_t)v >> 3 >= KV_STRING_MAX) {
		resp_error(x, bad_offset);
		return false;
	}
	*off = (uint64_t)v;
	return true;
}

/* ------------------------------------------------- SETBIT and GETBIT */

static void cmd_setbit(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	uint64_t off;
	int64_t on;
	if (!bit_offset(x, &a[2], 0, &off))
		return;
	if (paste_resp_arg_i64(&a[3], &on) || (on & ~1)) {
		resp_error(x, "ERR bit is not an integer or out of range");
		return;
	}
	struct kv_key k;
	struct kv_obj o;
	int r = bitmap_at(x, kv, &a[1], &k, &o, false);
	if (r == -EINVAL)
		return;
	uint64_t byte = off >> 3, olen = r ? 0 : o.len;
	uint8_t v = 0, mask = (uint8_t)(1u << (7 - (off & 7)));
	if (byte < olen)
		kv_value_read(kv, &o, byte, &v, 1);
	int old = (v & mask) != 0;
	/* Written when the string grows or the bit changes. */
	if (byte >= olen || old != on) {
		v = on ? (uint8_t)(v | mask) : (uint8_t)(v & ~mask);
		r = kv_value_setrange(kv, &k, r ? NULL : &o, byte, &v, 1);
		if (r) {
			kv_reply_errno(x, r);
			return;
		}
		kv_notify(KV_NOTIFY_STRING, "setbit", &k);
	}
	resp_int(x, old);
}

static void cmd_getbit(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	uint64_t off;
	if (!bit_offset(x, &a[2], 0, &off))
		return;
	struct kv_key k;
	struct kv_obj o;
	int r = bitmap_at(x, kv, &a[1], &k, &o, true);
	if (r == -EINVAL)
		return;
	uint8_t v = 0;
	if (r == 0 && off >> 3 < o.len)
		kv_value_read(kv, &o, off >> 3, &v, 1);
	resp_int(x, (v >> (7 - (off & 7))) & 1);
}

/* ------------------------------------------------- BITCOUNT and BITPOS */

/* The bytes of string o holding bits [first, last], a piece at a time,
 * the bits outside the range set to pad: fn(arg, piece, len, its first
 * byte's index) until it returns non-zero, which is returned (-EIO for a
 * value that reads short: a damaged chunk). */
typedef int (*piece_fn)(void *arg, const uint8_t *p, size_t len, uint64_t at);

static int each_piece(struct kv *kv, const struct kv_obj *o, uint64_t first, uint64_t last,
		      int pad, piece_fn fn, void *arg)
{
	uint64_t b = first >> 3, end = (last >> 3) + 1;
	size_t cap = end - b < PIECE ? (size_t)(end - b) : PIECE;
	uint8_t *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	int r = 0;
	while (b < end && r == 0) {
		size_t len = end - b < cap ? (size_t)(end - b) : cap;
		if (kv_value_read(kv, o, b, buf, len) != len) {
			r = -EIO;
			break;
		}
		uint8_t keep_first = (uint8_t)(0xFFu >> (first & 7));
		uint8_t keep_last = (uint8_t)(0xFFu << (7 - (last & 7)));
		if (b == first >> 3)
			buf[0] = pad ? (uint8_t)(buf[0] | ~keep_first) : (uint8_t)(buf[0] & keep_first);
		if (b + len == end)
			buf[len - 1] = pad ? (uint8_t)(buf[len - 1] | ~keep_last)
					   : (uint8_t)(buf[len - 1] & keep_last);
		r = fn(arg, buf, len, b);
		b += len;
	}
	free(buf);
	return r;
}

static int count_piece(void *arg, const uint8_t *p, size_t len, uint64_t at)
{
	(void)at;
	*(uint64_t *)arg += kv_bits_count(p, len);
	return 0;
}

struct find {
	int bit;
	int64_t pos;
};

static int find_piece(void *arg, const uint8_t *p, size_t len, uint64_t at)
{
	struct find *f = arg;
	int64_t i = kv_bits_find(p, len, f->bit);
	if (i < 0)
		return 0;
	f->pos = (int64_t)(at * 8) + i;
	return 1;
}

/* BYTE or BIT: false after a syntax error. */
static bool unit_arg(struct resp_ctx *x, const struct paste_resp_arg *a, bool *bit_unit)
{
	if (paste_resp_arg_eq(a, "BIT"))
		*bit_unit = true;
	else if (paste_resp_arg_eq(a, "BYTE"))
		*bit_unit = false;
	else {
		resp_error(x, "ERR syntax error");
		return false;
	}
	return true;
}

static void cmd_bitcount(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct kv_key k;
	struct kv_obj o;
	/* A missing key counts 0 before its arguments are read (Redis). */
	int r = bitmap_at(x, kv, &a[1], &k, &o, true);
	if (r == -EINVAL)
		return;
	if (r == -ENOENT) {
		resp_int(x, 0);
		return;
	}
	uint64_t first = 0, last = 0;
	bool any;
	if (n == 4 || n == 5) {
		int64_t s, e;
		bool bit_unit = false;
		if (!kv_arg_int(x, &a[2], &s) || !kv_arg_int(x, &a[3], &e))
			return;
		if (s < 0 && e < 0 && s > e) {       /* empty, whatever the unit says */
			resp_int(x, 0);
			return;
		}
		if (n == 5 && !unit_arg(x, &a[4], &bit_unit))
			return;
		any = kv_bits_range(s, e, o.len, bit_unit, &first, &last);
	} else if (n == 2) {
		any = kv_bits_range(0, -1, o.len, false, &first, &last);
	} else {
		resp_error(x, "ERR syntax error");
		return;
	}
	uint64_t count = 0;
	if (any && (r = each_piece(kv, &o, first, last, 0, count_piece, &count)) < 0)
		kv_reply_errno(x, r);
	else
		resp_int(x, (int64_t)count);
}

static void cmd_bitpos(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	int64_t bit;
	if (!kv_arg_int(x, &a[2], &bit))
		return;
	if (bit != 0 && bit != 1) {
		resp_error(x, "ERR The bit argument must be 1 or 0.");
		return;
	}
	struct kv_key k;
	struct kv_obj o;
	/* A missing key is zeros without end, whatever the range. */
	int r = bitmap_at(x, kv, &a[1], &k, &o, true);
	if (r == -EINVAL)
		return;
	if (r == -ENOENT) {
		resp_int(x, bit ? -1 : 0);
		return;
	}
	int64_t s = 0, e = -1;
	bool bit_unit = false, end_given = n >= 5;
	if (n > 6) {
		resp_error(x, "ERR syntax error");
		return;
	}
	if (n >= 4 && !kv_arg_int(x, &a[3], &s))
		return;
	if (n == 6 && !unit_arg(x, &a[5], &bit_unit))
		return;
	if (end_given && !kv_arg_int(x, &a[4], &e))
		return;
	uint64_t first, last;
	if (!kv_bits_range(s, e, o.len, bit_unit, &first, &last)) {
		resp_int(x, -1);                 /* an empty range holds neither */
		return;
	}
	struct find f = { (int)bit, -1 };
	r = each_piece(kv, &o, first, last, !bit, find_piece, &f);
	if (r < 0) {
		kv_reply_errno(x, r);
		return;
	}
	/* No clear bit in the range: without an end the string goes on in
	 * zeros, so the answer is the first bit past its last byte. */
	if (f.pos < 0 && bit == 0 && !end_given)
		f.pos = (int64_t)(((last >> 3) + 1) * 8);
	resp_int(x, f.pos);
}

/* ---------------------------------------------------------------- BITOP */

/* Bytes [off, off + len) of source o (NULL: a missing key) into p, zeros
 * past its end: false when it reads short. */
static bool source_piece(struct kv *kv, const struct kv_obj *o, uint64_t off, uint8_t *p,
			 size_t len)
{
	size_t got = 0;
	if (o && off < o->len) {
		size_t want = o->len - off < len ? (size_t)(o->len - off) : len;
		if ((got = kv_value_read(kv, o, off, p, want)) != want)
			return false;
	}
	memset(p + got, 0, len - got);
	return true;
}

static void cmd_bitop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	static const char *const names[] = { "AND", "OR", "XOR", "NOT" };
	enum kv_bits_op op = KV_BITS_AND;
	size_t w = 0;
	while (w < 4 && !paste_resp_arg_eq(&a[1], names[w]))
		w++;
	if (w == 4) {
		resp_error(x, "ERR syntax error");
		return;
	}
	op = (enum kv_bits_op)w;
	if (op == KV_BITS_NOT && n != 4) {
		resp_error(x, "ERR BITOP NOT must be called with a single source key.");
		return;
	}
	uint32_t ns = n - 3;
	struct kv_obj *src = malloc(ns * sizeof(*src));
	bool *have = malloc(ns * sizeof(*have));
	uint8_t *res = NULL, *tmp = NULL;
	struct kv_writer wr;
	kv_writer_idle(&wr);
	if (!src || !have) {
		kv_reply_errno(x, -ENOMEM);
		goto out;
	}
	uint64_t maxlen = 0;
	for (uint32_t j = 0; j < ns; j++) {
		struct kv_key k;
		int r = bitmap_at(x, kv, &a[3 + j], &k, &src[j], true);
		if (r == -EINVAL)
			goto out;
		have[j] = r == 0;
		if (have[j] && src[j].len > maxlen)
			maxlen = src[j].len;
	}
	struct kv_key dk;
	if (!kv_arg_key(x, kv, &a[2], &dk))
		goto out;
	if (maxlen == 0) {                       /* every source empty: no key */
		int r = kv_remove(kv, &dk);
		if (r < 0) {
			kv_reply_errno(x, r);
			goto out;
		}
		if (r == 1)
			kv_notify(KV_NOTIFY_GENERIC, "del", &dk);
		resp_int(x, 0);
		goto out;
	}
	size_t cap = maxlen < PIECE ? (size_t)maxlen : PIECE;
	int r = -ENOMEM;
	if ((res = malloc(cap)) && (tmp = malloc(cap)))
		r = kv_writer_begin(kv, &wr, maxlen);
	for (uint64_t off = 0; off < maxlen && r == 0; off += cap) {
		size_t len = maxlen - off < cap ? (size_t)(maxlen - off) : cap;
		for (uint32_t j = 0; j < ns && r == 0; j++) {
			if (!source_piece(kv, have[j] ? &src[j] : NULL, off, j ? tmp : res, len))
				r = -EIO;
			else if (op == KV_BITS_NOT)
				kv_bits_apply(op, res, res, len);
			else if (j)
				kv_bits_apply(op, res, tmp, len);
		}
		if (r == 0)
			r = kv_writer_copy(kv, &wr, res, len);
	}
	if (r == 0)
		r = kv_writer_put(kv, &wr, &dk, KV_NO_TTL, NULL);
	if (r) {
		kv_writer_drop(kv, &wr);
		kv_reply_errno(x, r);
		goto out;
	}
	kv_notify(KV_NOTIFY_STRING, "set", &dk);
	resp_int(x, (int64_t)maxlen);
out:
	free(res);
	free(tmp);
	free(have);
	free(src);
}

/* ------------------------------------------------------------- BITFIELD */

enum { BF_GET, BF_SET, BF_INCRBY };

struct bf_op {
	uint64_t off;                    /* in bits */
	int64_t arg;                     /* SET's value, INCRBY's increment */
	uint8_t code, ow, width;
	bool is_signed;
};

/* i1-i64 or u1-u63. */
static bool bf_type(struct resp_ctx *x, const struct paste_resp_arg *a, struct bf_op *op)
{
	int64_t w;
	struct paste_resp_arg num = { a->p + 1, a->len ? a->len - 1 : 0 };
	op->is_signed = a->len && a->p[0] == 'i';
	if (!a->len || (a->p[0] != 'i' && a->p[0] != 'u') || paste_resp_arg_i64(&num, &w) || w < 1 ||
	    w > (op->is_signed ? 64 : 63)) {
		resp_error(x, "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is "
			      "not supported but i64 is.");
		return false;
	}
	op->width = (uint8_t)w;
	return true;
}

/* The integer op reads from the (at most 9) bytes at p, p[0] being byte
 * op->off / 8 of the string. */
static int64_t bf_value(const struct bf_op *op, const uint8_t *p)
{
	uint64_t raw = kv_bits_get(p, op->off & 7, op->width);
	return op->is_signed ? kv_bits_signed(raw, op->width) : (int64_t)raw;
}

/* Bytes [op->off / 8, + 9) of string o (NULL: none) into p, zero padded. */
static bool bf_read(struct kv *kv, const struct kv_obj *o, const struct bf_op *op, uint8_t p[9])
{
	return source_piece(kv, o, op->off >> 3, p, 9);
}

/* Run op on the bytes at p (p[0]: byte op->off / 8 of the string): its
 * reply in *val, or *null (an overflow under FAIL: nothing written).
 * true when it changed the bytes. */
static bool bf_eval(const struct bf_op *op, uint8_t *p, int64_t *val, bool *null)
{
	int64_t old = bf_value(op, p), nv;
	*null = false;
	*val = old;
	if (op->code == BF_GET)
		return false;
	bool incr = op->code == BF_INCRBY;
	int over = kv_bits_add(op->is_signed, op->width, incr ? old : op->arg, incr ? op->arg : 0,
			       (enum kv_bits_overflow)op->ow, &nv);
	if (over && op->ow == KV_BITS_FAIL) {
		*null = true;
		return false;
	}
	if (incr)
		*val = nv;
	kv_bits_set(p, op->off & 7, op->width, (uint64_t)nv);
	return nv != old;
}

/* BITFIELD's writes: the string grown to hold bit `top` (the last one a
 * SET or INCRBY names), then the ops in order. When the ops' bytes lie
 * within a piece (nearly always) they run on a copy of those bytes,
 * written back as one change when the string grew or a byte changed;
 * else one op at a time, in one group. val/null: the replies; *notify:
 * a write op did not fail and the string grew or changed (Redis's
 * "setbit" event). 0, or a negative errno (nothing changed). */
static int bf_write(struct kv *kv, struct kv_key *k, const struct bf_op *ops, uint32_t nops,
		    uint64_t top, int64_t *val, bool *null, bool *notify)
{
	struct kv_obj o;
	bool found = kv_lookup(kv, k, &o, false) == 0;
	uint64_t need = (top >> 3) + 1, lo = UINT64_MAX, hi = 0;
	bool grew = !found || o.len < need, changed = false;
	*notify = false;
	for (uint32_t i = 0; i < nops; i++) {
		uint64_t b0 = ops[i].off >> 3, b1 = (ops[i].off + ops[i].width - 1) >> 3;
		lo = b0 < lo ? b0 : lo;
		hi = b1 > hi ? b1 : hi;
	}
	if (hi - lo < PIECE) {
		size_t len = (size_t)(hi - lo + 1);
		uint8_t *buf = malloc(len);
		if (!buf)
			return -ENOMEM;
		if (!source_piece(kv, found ? &o : NULL, lo, buf, len)) {
			free(buf);
			return -EIO;
		}
		for (uint32_t i = 0; i < nops; i++) {
			changed |= bf_eval(&ops[i], buf + (ops[i].off >> 3) - lo, &val[i], &null[i]);
			*notify |= ops[i].code != BF_GET && !null[i] && (grew || changed);
		}
		/* Bytes lo to top's: every change, and the growth. */
		int r = grew || changed ? kv_value_setrange(kv, k, found ? &o : NULL, lo, buf, need - lo) : 0;
		free(buf);
		return r;
	}
	int r = kv_begin(kv);
	if (r == 0 && grew) {
		uint64_t from = found ? o.len : 0;
		r = kv_value_setrange(kv, k, found ? &o : NULL, from, NULL, need - from);
	}
	for (uint32_t i = 0; i < nops && r == 0; i++) {
		const struct bf_op *op = &ops[i];
		uint8_t p[9];
		if ((r = kv_lookup(kv, k, &o, false)) != 0 || !bf_read(kv, &o, op, p)) {
			r = r ? r : -EIO;
			break;
		}
		bool ch = bf_eval(op, p, &val[i], &null[i]);
		changed |= ch;
		*notify |= op->code != BF_GET && !null[i] && (grew || changed);
		if (ch)
			r = kv_value_setrange(kv, k, &o, op->off >> 3, p, ((op->off & 7) + op->width + 7) / 8);
	}
	if (r) {
		kv_abort(kv);
		return r;
	}
	return kv_commit(kv);
}

static void bitfield_generic(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			     uint32_t n, bool ro)
{
	struct bf_op *ops = malloc(((n - 2) / 3 + 1) * sizeof(*ops));
	int64_t *val = malloc(((n - 2) / 3 + 1) * sizeof(*val));
	bool *null = malloc(((n - 2) / 3 + 1) * sizeof(*null));
	if (!ops || !val || !null) {
		kv_reply_errno(x, -ENOMEM);
		goto out;
	}
	uint32_t nops = 0;
	uint8_t ow = KV_BITS_WRAP;
	bool writes = false;
	uint64_t top = 0;
	for (uint32_t j = 2; j < n; j++) {
		uint32_t left = n - j - 1;
		struct bf_op *op = &ops[nops];
		if (paste_resp_arg_eq(&a[j], "GET") && left >= 2) {
			op->code = BF_GET;
		} else if (paste_resp_arg_eq(&a[j], "SET") && left >= 3) {
			op->code = BF_SET;
		} else if (paste_resp_arg_eq(&a[j], "INCRBY") && left >= 3) {
			op->code = BF_INCRBY;
		} else if (paste_resp_arg_eq(&a[j], "OVERFLOW") && left >= 1) {
			j++;
			if (paste_resp_arg_eq(&a[j], "WRAP"))
				ow = KV_BITS_WRAP;
			else if (paste_resp_arg_eq(&a[j], "SAT"))
				ow = KV_BITS_SAT;
			else if (paste_resp_arg_eq(&a[j], "FAIL"))
				ow = KV_BITS_FAIL;
			else {
				resp_error(x, "ERR Invalid OVERFLOW type specified");
				goto out;
			}
			continue;
		} else {
			resp_error(x, "ERR syntax error");
			goto out;
		}
		if (!bf_type(x, &a[j + 1], op) || !bit_offset(x, &a[j + 2], op->width, &op->off))
			goto out;
		op->ow = ow;
		op->arg = 0;
		if (op->code != BF_GET) {
			writes = true;
			if (op->off + op->width - 1 > top)
				top = op->off + op->width - 1;
			if (!kv_arg_int(x, &a[j + 3], &op->arg))
				goto out;
		}
		nops++;
		j += op->code == BF_GET ? 2 : 3;
	}
	struct kv_key k;
	struct kv_obj o;
	if (writes && ro) {
		resp_error(x, "ERR BITFIELD_RO only supports the GET subcommand");
		goto out;
	}
	int r = bitmap_at(x, kv, &a[1], &k, &o, !writes);
	if (r == -EINVAL)
		goto out;
	if (writes) {
		bool notify;
		if ((r = bf_write(kv, &k, ops, nops, top, val, null, &notify)) != 0) {
			kv_reply_errno(x, r);
			goto out;
		}
		if (notify)
			kv_notify(KV_NOTIFY_STRING, "setbit", &k);
	} else {
		for (uint32_t i = 0; i < nops; i++) {
			uint8_t p[9];
			if (!bf_read(kv, r ? NULL : &o, &ops[i], p)) {
				kv_reply_errno(x, -EIO);
				goto out;
			}
			val[i] = bf_value(&ops[i], p);
			null[i] = false;
		}
	}
	resp_array(x, nops);
	for (uint32_t i = 0; i < nops; i++) {
		if (null[i])
			resp_null(x);
		else
			resp_int(x, val[i]);
	}
out:
	free(null);
	free(val);
	free(ops);
}

static void cmd_bitfield(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	bitfield_generic(x, kv, a, n, false);
}

static void cmd_bitfield_ro(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			    uint32_t n)
{
	bitfield_generic(x, kv, a, n, true);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_bitmap[] = {
	{ "setbit", 4, "write denyoom", "bitmap", "Sets or clears one bit of a string value, growing it with zero bytes; answers the old bit.", cmd_setbit, 1, 1, 1 },
	{ "getbit", 3, "readonly fast", "bitmap", "Reads one bit of a string value (0 past its end).", cmd_getbit, 1, 1, 1 },
	{ "bitcount", -2, "readonly", "bitmap", "Counts the set bits of a string value, or of a range of its bytes or bits.", cmd_bitcount, 1, 1, 1 },
	{ "bitpos", -3, "readonly", "bitmap", "The first set or clear bit of a string value, or of a range of its bytes or bits.", cmd_bitpos, 1, 1, 1 },
	{ "bitop", -4, "write denyoom", "bitmap", "Writes the AND, OR, XOR of string values, or the NOT of one, to a key; answers its length.", cmd_bitop, 2, -1, 1 },
	{ "bitfield", -2, "write denyoom", "bitmap", "Reads, sets and adds to integers of any width at any bit offset of a string value, with a choice of overflow.", cmd_bitfield, 1, 1, 1 },
	{ "bitfield_ro", -2, "readonly fast", "bitmap", "BITFIELD with GET only, for read-only replicas and scripts.", cmd_bitfield_ro, 1, 1, 1 },
	{ 0 }
};
