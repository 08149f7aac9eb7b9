/*
 * cmd_set.h - what the set commands (cmd_set.c, cmd_setop.c) and the
 * sorted-set commands (cmd_zset.c, cmd_zrange.c, cmd_zsetop.c) share over
 * the Redis protocol, and what the key commands ask of both (OBJECT
 * ENCODING).
 */
#ifndef PASTE_SERVICES_CMD_SET_H
#define PASTE_SERVICES_CMD_SET_H

#include "kv_out.h"
#include "kv_zset.h"
#include "pkvs_resp.h"

/* Member argument a as a name: held where it landed (b) when it is long
 * and lay in x->ev's store buffer, else its bytes. kv_name_done releases
 * what it holds. */
void kv_name_arg(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		 struct kv_name *nm, struct paste_body *b);
void kv_name_done(struct kv *kv, struct kv_name *nm);
/* Members a[from], a[from + step], ... below to: false after replying
 * when one is longer than pkvs takes. */
bool kv_members_ok(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t from,
		   uint32_t to, uint32_t step);
/* Open the collection named by a: 0, -ENOENT (absent; with create a new
 * empty one and 0), -EINVAL (replied: WRONGTYPE, a key too long). */
int kv_cset_arg(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		struct kv_cset *s, enum kv_type type, bool create, bool read);
/* kv_reply_errno, and a member too long for one entry. */
void kv_reply_cset_errno(struct resp_ctx *x, int r);
/* The connection's protocol (2 or 3); a set's head (RESP3 "~n"). */
int kv_proto(const struct resp_ctx *x);
void kv_out_set(struct kv_out *o, uint64_t n);
/* Keyspace events of a STORE command: `event` (class cls) when it stored
 * n > 0 members at dst, else "del" when dst held a key before (had:
 * kv_key_held, asked only while notifications are on). */
void kv_notify_stored(struct kv *kv, struct kv_key *dst, bool had, uint64_t n, uint32_t cls,
		      const char *event);
bool kv_key_held(struct kv *kv, struct kv_key *k);
/* A number setting of CONFIG (units allowed), or dflt. */
uint64_t kv_config_num(const char *name, uint64_t dflt);
/* Commands of both families, told apart by the name (S... or Z...):
 * SREM/ZREM key member..., SCARD/ZCARD key, SSCAN/ZSCAN key cursor
 * [MATCH pattern] [COUNT count]. */
void kv_cset_rem_cmd(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void kv_cset_card_cmd(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void kv_cset_scan(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
/* Entries of one kind of collection id at the sorted indexes idx[0..k),
 * in one walk: fn(arg, j, walk) for the j-th. 0, or the first non-zero
 * return, or the walk's failure. */
typedef int (*kv_pick_fn)(void *arg, uint64_t j, const struct kv_cwalk *w);
int kv_cset_pick(struct kv *kv, uint64_t id, uint8_t kind, const uint64_t *idx, uint64_t k,
		 kv_pick_fn fn, void *arg);

/* Members gathered in DRAM: their bytes one after the other, member i at
 * bytes[at[i] .. at[i + 1]); an allocation that failed sets oom (and
 * adds nothing more). Zeroed: empty. */
struct kv_names {
	uint8_t *bytes;
	size_t used, cap;
	size_t *at;
	uint64_t n, ncap;
	bool oom;
};
void kv_names_add(struct kv_names *s, const uint8_t *p, size_t len);
void kv_names_free(struct kv_names *s);
static inline const uint8_t *kv_names_get(const struct kv_names *s, uint64_t i, size_t *len)
{
	*len = s->at[i + 1] - s->at[i];
	return s->bytes + s->at[i];
}

/* Members gathered in m as a set reply (RESP3 "~"; set_type false: an
 * array): in Redis's order when it would keep them as an intset, else as
 * gathered. */
void kv_reply_names(struct resp_ctx *x, const struct kv_names *m, bool set_type);

/* cmd_setop.c: SINTER, SUNION, SDIFF and their STORE forms (told apart
 * by the name); SINTERCARD. */
void cmd_setop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_sintercard(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);

/* OBJECT ENCODING: the encoding Redis 7.0 would give (intset or
 * hashtable; listpack or skiplist), by its settings. */
const char *kv_set_encoding(struct kv *kv, const struct kv_obj *o);
const char *kv_zset_encoding(struct kv *kv, const struct kv_obj *o);

/* ---- sorted sets: cmd_zset.c, cmd_zrange.c, cmd_zsetop.c ---- */

/* cmd_zset.c: a score as Redis writes it in a reply's bulk (%.17g, inf,
 * -inf), or as its small sorted sets keep it (listpack: an integer's
 * digits, ZSCAN). The length (< cap). */
int kv_zscore_str(char *out, size_t cap, double d, bool listpack);
/* ZADD of argument vector a[0..n) (GEOADD's, with the positions'
 * scores), as ZADD itself. */
void kv_zadd_args(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
/* ZMSCORE key member ... and its kin (GEOPOS, GEOHASH): an array of one
 * reply per member, each(o, found, its score) writing it. */
typedef void (*kv_zscore_out_fn)(struct kv_out *o, bool found, double d);
void kv_zscores_reply(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n,
		      kv_zscore_out_fn each);
/* ZSCORE and its kin (GEODIST): the scores of members m[0..k) of the
 * sorted set at key into d: 1, or 0 when the key or a member is absent,
 * or -1 when replied to (a wrong type). */
int kv_zscores_of(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *key,
		  const struct paste_resp_arg *m, uint32_t k, double *d);
/* A score as Redis's string2d reads one (ZADD, WEIGHTS). */
bool kv_zscore_arg(const struct paste_resp_arg *a, double *d);
/* A range's bound as Redis's zslParseRange reads one: "(" for an open
 * one (*ex), then all that strtod takes (to the first NUL), not NaN. */
bool kv_zbound_arg(const struct paste_resp_arg *a, double *d, bool *ex);

/* Where the members of a range or an operation go: a reply gathered
 * (its length comes first), or a sorted set being written whole
 * (build). Zeroed but proto, scores, kv and build. */
struct kv_zsink {
	int proto;
	bool scores;                 /* WITHSCORES */
	struct resp_out body;
	struct kv *kv;
	struct kv_cbuild *build;
	uint64_t n;
	int r;
};
void kv_zsink_add(struct kv_zsink *k, const uint8_t *p, size_t len, double d);
/* The gathered reply: its array head and body (or the failure r). */
void kv_zsink_send(struct resp_ctx *x, struct kv_zsink *k, int r);

/* Members gathered with their scores (removals, pops, the algebra's
 * result, random picks). Zeroed: empty. */
struct kv_zgather {
	struct kv_names names;
	double *scores;
	uint64_t cap;
};
/* Add one: false when out of memory (names.oom). */
bool kv_zgather_add(struct kv_zgather *g, const uint8_t *p, size_t len, double d);
/* A walk's entry (arg: the gather), as zrange_fn wants: false to stop. */
bool kv_zgather_walked(void *arg, const struct kv_cwalk *w);
void kv_zgather_free(struct kv_zgather *g);
/* Remove the gathered members of s, which are the positions [lo, lo +
 * count) of its order: all of them (the key goes, O(1)), more than stay
 * (s written again without them), or in one group. */
int kv_zgather_remove(struct kv *kv, struct kv_cset *s, const struct kv_zgather *g, uint64_t lo);

/* cmd_zrange.c: the members at ranks [start, end] of s (negative: from
 * the end, as ZRANGE's), lowest first (rev: highest first), into g. 0 or
 * a failure. */
int kv_zgather_ranks(struct kv *kv, const struct kv_cset *s, bool rev, int64_t start, int64_t end,
		     struct kv_zgather *g);
/* ZRANGE and its older forms and ZRANGESTORE (by the name); ZCOUNT;
 * ZLEXCOUNT; ZRANK, ZREVRANK; ZREMRANGEBYRANK, ZREMRANGEBYSCORE,
 * ZREMRANGEBYLEX (by the name). */
void cmd_zrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_zcount(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_zlexcount(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_zrank(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
void cmd_zremrange(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);
/* cmd_zsetop.c: ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD,
 * by the name. */
void cmd_zop(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n);

#endif
