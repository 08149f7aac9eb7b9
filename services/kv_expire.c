/*
 * kv_expire.c - active expiry (kv.h): keys whose deadline passed are
 * removed in bounded steps, earliest first, whether or not anyone reads
 * them (a lookup removes an expired key it meets on its own: kv_obj.c).
 *
 * Redis samples 20 random keys with a deadline per loop and repeats
 * while over a quarter of them had expired, so a key may outlive its
 * deadline by a while. The index here is ordered by deadline
 * ([KV_PFX_EXPIRE][deadline BE64][tree key], one entry per key with a
 * deadline, kept by kv_obj.c), so a step reads exactly the keys that are
 * due: each entry is a cursor step and, for a key really due, the DEL's
 * record. An entry whose key since changed its deadline or went (a crash
 * between the two writes leaves one) is dropped when the step reaches it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

/* A step that cannot go on (no room to delete, an entry that will not
 * go) tries again this much later, not in back-to-back passes. */
#define RETRY_MS 100

uint64_t kv_wake_at(const struct kv *kv, uint64_t now)
{
	if (kv->next_due_ms == INT64_MAX)
		return UINT64_MAX;
	int64_t in = kv->next_due_ms - kv->now_ms;
	return in > 0 ? now + (uint64_t)in : now;
}

void kv_expire_step(struct kv *kv, uint32_t budget)
{
	uint8_t first = KV_PFX_EXPIRE;
	struct paste_btree_cursor c;
	paste_btree_cursor_init(&c, kv->tree, &first, 1);
	uint8_t ik[PASTE_BTREE_MAX_KEY];
	uint32_t ilen = 0;
	kv->next_due_ms = kv->now_ms + RETRY_MS;    /* until the step says better */
	if (kv->paused)
		return;                              /* CLIENT PAUSE: nothing expires */
	/* The cursor does not survive a change to the tree: restart it
	 * after each (the first entry is the next one due). */
	for (uint32_t i = 0; i < budget; i++) {
		const uint8_t *t;
		uint32_t tlen;
		if (paste_btree_cursor_next(&c, &t, &tlen, NULL, NULL, NULL) != 1 ||
		    t[0] != KV_PFX_EXPIRE || tlen < 10) {
			kv->next_due_ms = INT64_MAX;
			return;
		}
		int64_t deadline = (int64_t)kv_be64(t + 1);
		if (deadline > kv->now_ms) {
			kv->next_due_ms = deadline;
			return;
		}
		if (tlen == ilen && memcmp(t, ik, tlen) == 0)
			return;                          /* it did not go: RETRY_MS */
		ilen = tlen;
		memcpy(ik, t, tlen);
		/* The key it names: still with this deadline? */
		struct kv_obj o;
		struct paste_btree_attr a;
		const uint8_t *kt = ik + 9;
		uint32_t ktlen = ilen - 9;
		bool due = paste_btree_lookup(kv->tree, kt, ktlen, o.ext, &o.n, &o.len, &a) == 0 &&
			   a.has_word && (int64_t)a.word == deadline;
		uint32_t db = 0;
		if (due && kv_key_user(kt, ktlen, kv, &db)) {
			struct kv_key k = { .db = db, .longkey = (a.tag & KV_TAG_LONG) != 0, .tlen = ktlen };
			memcpy(k.t, kt, ktlen);
			uint32_t skip = 0, next, l;
			if (k.longkey) {                 /* the whole name starts the value */
				if (kv_long_span(kv, o.ext, o.n, &next, &l) ||
				    !(kv->namebuf || (kv->namebuf = malloc(KV_MAX_KEY))))
					return;
				k.len = kv_long_read(kv, o.ext, next, l, kv->namebuf);
				k.p = kv->namebuf;
				skip = 4 + l;
			} else {
				k.p = k.t + 1;
				k.len = ktlen - 1;
			}
			enum kv_type type = (enum kv_type)(a.tag & KV_TAG_TYPE);
			uint64_t id = 0;
			if (kv_is_coll(type)) {
				uint8_t rec[8] = { 0 };
				paste_store_read(kv->store, o.ext, o.n, skip, rec, sizeof(rec));
				id = kv_be64(rec);
			}
			/* The index entry goes with the key (kv_expire_now). */
			kv_expire_now(kv, &k, type, id, deadline);
		} else {
			int r = kv_tree_del(kv, ik, ilen);
			if (r < 0 && r != -ENOENT)
				return;                  /* no room even to delete: later */
		}
		paste_btree_cursor_init(&c, kv->tree, &first, 1);
	}
	kv->next_due_ms = kv->now_ms;               /* the budget ran out: more may be due */
}
