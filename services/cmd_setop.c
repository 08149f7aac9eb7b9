/*
 * cmd_setop.c - the set algebra (cmd_set.h): SINTER, SINTERSTORE,
 * SINTERCARD, SUNION, SUNIONSTORE, SDIFF, SDIFFSTORE, with Redis 7.0's
 * replies and errors. An intersection or a difference walks one set and
 * looks its members up in the others; a union merges the sets' walks in
 * the tree's order (kv_cmerge). A STORE form writes the result as a new
 * set under a fresh id, then puts it under the key in one group
 * (kv_cbuild): a crash part way leaves the key as it was.
 */
#include <errno.h>
#include <stdlib.h>

#include "cmd_set.h"
#include "kv_notify.h"

/* The sets named by a[0..k): each opened (absent: count 0); false after
 * replying WRONGTYPE (every key is looked up first, in order, as Redis
 * does). */
static bool open_sets(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t k,
		      struct kv_cset *sets)
{
	for (uint32_t i = 0; i < k; i++) {
		int r = kv_cset_arg(x, kv, &a[i], &sets[i], KV_SET, false, true);
		if (r == -EINVAL)
			return false;
		if (r)
			sets[i].o.coll = (struct kv_coll){ 0 };
	}
	return true;
}

enum set_op { OP_INTER, OP_UNION, OP_DIFF };

/* Where the members of a set operation go: a reply being built (count
 * first, so the body is gathered), a new set being written, or a count. */
struct sink {
	struct kv *kv;
	struct kv_names got;
	struct kv_cbuild *build;
	uint64_t n, limit;           /* limit: a count stops there (0: none) */
	int r;
};

static bool sink_add(struct sink *k, const uint8_t *p, size_t len)
{
	k->n++;
	if (k->build) {
		if (!k->r) {
			k->r = kv_cbuild_put(k->kv, k->build, KV_SET_MEMBER, NULL, 0, p, len, NULL, 0);
			k->build->o.coll.count++;
		}
	} else if (!k->limit) {
		kv_names_add(&k->got, p, len);
	}
	return !(k->limit && k->n >= k->limit) && !k->r;
}

static int run_op(struct kv *kv, enum set_op op, struct kv_cset *sets, uint32_t k, struct sink *out)
{
	int r = 0;
	if (op == OP_INTER || op == OP_DIFF) {
		/* INTER: the smallest set's members found in every other;
		 * DIFF: the first set's found in none of the others. */
		uint32_t first = 0;
		for (uint32_t i = 1; op == OP_INTER && i < k; i++)
			if (sets[i].o.coll.count < sets[first].o.coll.count)
				first = i;
		if (sets[first].o.coll.count == 0)
			return 0;
		for (uint32_t i = 0; op == OP_DIFF && i < k; i++)
			if (i && sets[i].o.coll.id && sets[i].o.coll.id == sets[0].o.coll.id)
				return 0;                /* A - A - ...: nothing */
		struct kv_cwalk w;
		kv_cwalk_init(kv, &w, sets[first].o.coll.id, KV_SET_MEMBER, 0, false, NULL, 0);
		while ((r = kv_cwalk_next(kv, &w)) == 1) {
			bool keep = true;
			for (uint32_t i = 0; keep && i < k; i++) {
				if (i == first || (op == OP_INTER && sets[i].o.coll.id == sets[first].o.coll.id))
					continue;
				keep = kv_set_has(kv, &sets[i], w.name, w.nlen) == (op == OP_INTER);
			}
			if (keep && !sink_add(out, w.name, w.nlen))
				break;
		}
		return r < 0 ? r : 0;
	}
	/* UNION: a merge of the sets' walks in the tree's order, each member
	 * once. The member's bytes outlive the other walks' steps only in the
	 * sink: it is added before kv_cmerge_next steps any of them. */
	struct kv_cmerge m;
	if (kv_cmerge_init(&m, k))
		return -ENOMEM;
	for (uint32_t i = 0; i < k && r >= 0; i++)
		if (sets[i].o.coll.count)
			r = kv_cmerge_add(kv, &m, i, sets[i].o.coll.id, KV_SET_MEMBER);
	while (r >= 0 && (r = kv_cmerge_next(kv, &m)) == 1)
		if (!sink_add(out, m.w[m.at].name, m.w[m.at].nlen))
			break;
	kv_cmerge_free(&m);
	return r < 0 ? r : 0;
}

/* SINTER/SUNION/SDIFF key..., and their STORE forms (dst first). */
static void set_op(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n,
		   enum set_op op, bool store)
{
	uint32_t first = store ? 2 : 1, k = n - first;
	struct kv_key dst;
	if (store && !kv_arg_key(x, kv, &a[1], &dst))
		return;
	struct kv_cset *sets = malloc(sizeof(*sets) * k);
	if (!sets) {
		resp_error(x, "ERR out of memory");
		return;
	}
	if (!open_sets(x, kv, a + first, k, sets)) {
		free(sets);
		return;
	}
	struct sink out = { .kv = kv };
	struct kv_cbuild build;
	int r = 0;
	bool had = store && kv_key_held(kv, &dst);
	if (store) {
		out.build = &build;
		r = kv_cbuild_begin(kv, &build, KV_SET);
	}
	if (r == 0)
		r = run_op(kv, op, sets, k, &out);
	if (r == 0)
		r = out.r;
	if (r == 0 && out.got.oom)
		r = -ENOMEM;
	free(sets);
	if (store) {
		r = kv_cbuild_end(kv, &build, &dst, r);
		if (r) {
			kv_reply_errno(x, r);
			return;
		}
		static const char *const ev[] = { [OP_INTER] = "sinterstore", [OP_UNION] = "sunionstore",
						  [OP_DIFF] = "sdiffstore" };
		kv_notify_stored(kv, &dst, had, out.n, KV_NOTIFY_SET, ev[op]);
		resp_int(x, (int64_t)out.n);
		return;
	}
	if (r)
		kv_reply_errno(x, r);
	else
		kv_reply_names(x, &out.got, true);
	kv_names_free(&out.got);
}

/* SINTER, SUNION, SDIFF and their STORE forms, told apart by name. */
void cmd_setop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	char c = (char)(a[0].p[1] | 0x20);
	set_op(x, kv, a, n, c == 'i' ? OP_INTER : c == 'u' ? OP_UNION : OP_DIFF, a[0].len > 6);
}

/* SINTERCARD numkeys key [key ...] [LIMIT limit] */
void cmd_sintercard(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		    uint32_t n)
{
	int64_t k, limit = 0;
	if (!kv_arg_range(x, &a[1], 1, INT64_MAX, "numkeys should be greater than 0", &k))
		return;
	if (k > (int64_t)n - 2) {
		resp_error(x, "ERR Number of keys can't be greater than number of args");
		return;
	}
	for (uint32_t i = 2 + (uint32_t)k; i < n; i++) {
		if (paste_resp_arg_eq(&a[i], "LIMIT") && i + 1 < n) {
			if (!kv_arg_range(x, &a[++i], 0, INT64_MAX, "LIMIT can't be negative", &limit))
				return;
		} else {
			resp_error(x, "ERR syntax error");
			return;
		}
	}
	struct kv_cset *sets = malloc(sizeof(*sets) * (size_t)k);
	if (!sets) {
		resp_error(x, "ERR out of memory");
		return;
	}
	if (!open_sets(x, kv, a + 2, (uint32_t)k, sets)) {
		free(sets);
		return;
	}
	struct sink out = { .kv = kv, .limit = (uint64_t)limit ? (uint64_t)limit : 0 };
	/* A count only: limit 0 gathers nothing either (UINT64_MAX never
	 * stops). */
	if (!out.limit)
		out.limit = UINT64_MAX;
	int r = run_op(kv, OP_INTER, sets, (uint32_t)k, &out);
	free(sets);
	if (r)
		kv_reply_errno(x, r);
	else
		resp_int(x, (int64_t)out.n);
}
