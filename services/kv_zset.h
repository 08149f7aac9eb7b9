/*
 * kv_zset.h - sorted sets over the typed core's collections (kv.h), with
 * the handle, entries and walks sets share (kv_set.h).
 *
 * A sorted set's key holds its record (struct kv_coll: id, count of
 * members); each member is two entries of its collection:
 *
 *   [0xFF][id]['m'][member]            -> its score (8 bytes)
 *   [0xFF][id]['s'][score key][member] -> empty
 *
 * The score key is the score's 8 bytes made to sort as the doubles do
 * (the sign bit flipped, or every bit for a negative score), so the 's'
 * entries are the members in Redis's order, by score and then by member
 * bytes: a range by score, by rank or by member is a walk of the tree
 * from a seek. -0 is kept as 0 (as Redis's small sorted sets keep it).
 * A member and its score entry change in one group with the record's
 * count.
 *
 * Ranks: a member's rank is the count of the 's' entries before it,
 * which the tree passes a leaf at a time (paste_btree_cursor_skip): O(log
 * N + rank / entries per leaf), ~60-90 entries of a short member per 4 KiB
 * leaf, where Redis's skiplist is O(log N) (docs/compat.md, "Sorted
 * sets").
 */
#ifndef PASTE_SERVICES_KV_ZSET_H
#define PASTE_SERVICES_KV_ZSET_H

#include "kv_set.h"

#define KV_ZSET_MEMBER KV_SET_MEMBER    /* member -> score */
#define KV_ZSET_SCORE 's'               /* score key + member -> empty */
#define KV_ZSCORE 8u                    /* bytes of a score key */

/* A score as the 8 bytes that sort as it does, and back. */
void kv_zscore_put(uint8_t out[KV_ZSCORE], double d);
double kv_zscore_get(const uint8_t in[KV_ZSCORE]);
/* The smallest score key above every key of score d (d's key + 1). */
void kv_zscore_after(uint8_t out[KV_ZSCORE], double d);

/* Member p[0..len)'s score: 0, or -ENOENT. */
int kv_zset_score(struct kv *kv, const struct kv_cset *s, const void *p, size_t len, double *score);
/* Give member nm the score d (was: its score before, when had): both its
 * entries and the count, in s's batch (one of its own if none is open).
 * 0 or a negative errno. */
int kv_zset_set(struct kv *kv, struct kv_cset *s, const struct kv_name *nm, double d, bool had,
		double was);
/* Remove member p[0..len) whose score is d (known: a walk found it), or
 * whatever its score (rem: 1, 0 when absent). */
int kv_zset_del(struct kv *kv, struct kv_cset *s, const void *p, size_t len, double d);
int kv_zset_rem(struct kv *kv, struct kv_cset *s, const void *p, size_t len);
/* Remove member p[0..len) of a set or a sorted set (s's type): 1, 0, or a
 * negative errno. */
int kv_cset_rem(struct kv *kv, struct kv_cset *s, const void *p, size_t len);
/* Members before member p[0..len) of score d in the order (its rank). */
uint64_t kv_zset_rank(struct kv *kv, const struct kv_cset *s, const void *p, size_t len, double d);

/* A walk of the score index (kv_cwalk over 's'): from the first member
 * of score >= d (after: > d), or back from the last of score <= d
 * (after: < d); NULL score: from the first (or the last). */
void kv_zwalk_score(struct kv *kv, struct kv_cwalk *w, const struct kv_cset *s, bool back,
		    const double *d, bool after);
/* ... from the i-th member (forward), or back from it. */
void kv_zwalk_rank(struct kv *kv, struct kv_cwalk *w, const struct kv_cset *s, bool back,
		   uint64_t i);
/* ... from the first member of score d whose bytes are >= m[0..len)
 * (after: >), or back from the last <= (after: <); m NULL: -inf/+inf. */
void kv_zwalk_lex(struct kv *kv, struct kv_cwalk *w, const struct kv_cset *s, bool back, double d,
		  const void *m, size_t len, bool after);
/* The score of the entry a walk returned. */
static inline double kv_zwalk_scoreof(const struct kv_cwalk *w)
{
	return kv_zscore_get(w->pre);
}

/* A member of a sorted set being written whole (kv_cbuild): its two
 * entries, and the count. */
int kv_zbuild_add(struct kv *kv, struct kv_cbuild *b, const void *p, size_t len, double d);

/* Would Redis 7.0 keep this sorted set as a listpack (max_entries members
 * at most, none over max_value bytes)? A walk of at most max_entries. */
bool kv_zset_listpack(struct kv *kv, const struct kv_obj *o, uint64_t max_entries,
		      uint64_t max_value);

#endif
