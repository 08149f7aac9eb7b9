/*
 * cmd_stream.h - what the stream command files share: cmd_stream.c
 * (XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XSETID), cmd_xinfo.c,
 * cmd_xread.c (XREAD, XREADGROUP, blocking on streams) and cmd_xgroup.c
 * (XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM), over kv_stream.h.
 */
#ifndef PASTE_SERVICES_CMD_STREAM_H
#define PASTE_SERVICES_CMD_STREAM_H

#include "cmd_set.h"
#include "kv_out.h"
#include "kv_stream.h"
#include "pkvs_resp.h"

/* An ID argument as Redis's streamGenericParseIDOrReply reads one: "-"
 * and "+" (not when strict), "ms" (seq missing_seq) or "ms-seq", and with
 * seq_given non-NULL "ms-*" (*seq_given false). false after replying
 * "Invalid stream ID specified as stream command argument". */
bool kv_sid_arg(struct resp_ctx *x, const struct paste_resp_arg *a, struct kv_sid *id,
		uint64_t missing_seq, bool strict, bool *seq_given);
/* The same without a reply. */
bool kv_sid_parse(const struct paste_resp_arg *a, struct kv_sid *id, uint64_t missing_seq,
		  bool strict, bool *seq_given);
/* The ID after id / before it: false at the largest / smallest. */
bool kv_sid_incr(struct kv_sid *id);
bool kv_sid_decr(struct kv_sid *id);
/* Open the stream named by a (kv_arg_key): 0, -ENOENT, or -EINVAL after
 * replying (a long key, WRONGTYPE). */
int kv_stream_arg(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
		  struct kv_stream *s, bool read);

/* Replies. An ID as a bulk string. */
void kv_sid_out(struct kv_out *o, struct kv_sid id);
/* An entry [id, [field, value, ...]] from its value's extents: 0, or
 * -EBADMSG (a damaged value: the reply is cut, the caller closes). */
int kv_stream_entry_out(struct kv_out *o, struct kv *kv, struct kv_sid id,
			const struct paste_extent *ext, uint32_t n, uint32_t len);
/* Entries of s from `from` to `to` (inclusive; back: from the end), at
 * most count (0: all), as an array: how many, or -EBADMSG. */
int64_t kv_stream_range_out(struct kv_out *o, struct kv *kv, const struct kv_stream *s,
			    struct kv_sid from, struct kv_sid to, uint64_t count, bool back);

/* Redis's lag estimate and read counter (XINFO, XREADGROUP): the
 * counter of id, or -1 when it cannot be known. */
int64_t kv_stream_distance(struct kv *kv, const struct kv_stream *s, struct kv_sid id);
/* The largest deleted ID when it lies inside the (non-empty) stream, a
 * tombstone between its entries; else 0-0. Does [from, +] hold it? */
struct kv_sid kv_stream_tombstone(struct kv *kv, const struct kv_stream *s);
static inline bool kv_sid_tombstone_after(struct kv_sid tomb, struct kv_sid from)
{
	return !kv_sid_zero(tomb) && kv_sid_cmp(from, tomb) <= 0;
}
bool kv_stream_tombstone_after(struct kv *kv, const struct kv_stream *s, struct kv_sid from);

/* Replicas: entry id delivered to or claimed by owner in group, as
 * Redis's streamPropagateXCLAIM (last: the group's last delivered ID as
 * it stood then); the group's last ID and read counter as its
 * streamPropagateGroupID. */
void kv_stream_propagate_claim(uint32_t db, const struct paste_resp_arg *key,
			       const struct paste_resp_arg *group, const struct paste_resp_arg *owner,
			       struct kv_sid id, uint64_t ms, uint64_t count, struct kv_sid last);
void kv_stream_propagate_setid(uint32_t db, const struct paste_resp_arg *key,
			       const struct paste_resp_arg *group, const struct kv_sgroup *g);

/* A deleted stream's blocked XREADGROUP clients are answered this. */
#define KV_XREAD_UNBLOCKED "UNBLOCKED the stream key no longer exists"

/* The key a kv_key names, as an argument (a serve's key). */
static inline struct paste_resp_arg kv_key_arg(const struct kv_key *k)
{
	return (struct paste_resp_arg){ k->longkey ? (const char *)k->p : (const char *)k->t + 1,
					k->longkey ? k->len : k->tlen - 1u };
}

extern const struct kv_cmd kv_cmds_stream[], kv_cmds_xread[], kv_cmds_xgroup[], kv_cmds_xinfo[];

#endif
