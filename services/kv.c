/*
 * kv.c - the key-value core under pkvs's front ends (kv.h).
 *
 * Where a value's bytes live:
 *  - values that landed in a packet buffer and are longer than KV_PACK_MAX
 *    stay there, zero copy: the buffer is held (paste_body_feed) and the
 *    tree names (buffer, offset, length);
 *  - values of at most KV_PACK_MAX bytes, and values that arrived in DRAM
 *    (a RESP command reassembled across reads, an INCR result), are
 *    copied densely to the store's append point (paste_append_copy): a
 *    64-byte value would otherwise pin a whole 2 KiB buffer. A copy of
 *    <= 512 bytes costs ~20-50 ns, less than holding a buffer and
 *    refilling the ring slot;
 *  - the tree's cleaner moves the values that outlive their neighbours
 *    (lib/btree_clean.c).
 * Every buffer a value names holds one reference for the tree (and one per
 * log record naming it); the append point holds one more on the buffer it
 * fills.
 *
 * A full store: a write that finds no room asks the tree for it
 * (paste_btree_make_room: a checkpoint, then the cleaner) and tries once
 * more; only then is it refused (-ENOSPC: Redis's OOM error, HTTP 507).
 * The body reserve stays free for the ports' rings and for deletes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv.h"
#include "kv_list.h"

int kv_open(struct kv **out, struct paste_store *st, struct paste_persist *p,
	    const struct kv_config *cfg, struct paste_error *err)
{
	struct kv *kv = calloc(1, sizeof(*kv));
	if (!kv)
		return paste_error_set(err, -ENOMEM, "out of memory");
	kv->store = st;
	kv->app = (struct paste_append)PASTE_APPEND_INIT;
	char notes[sizeof(err->msg)] = "";
	err->msg[0] = 0;
	/* The tree begins the log once it has passed its checks: a start
	 * refused for damage writes nothing. */
	int r = paste_wal_recover(&kv->wal, st, p, err);
	if (r) {
		free(kv);
		return r;
	}
	if (err->msg[0])
		snprintf(notes, sizeof(notes), "log recovery: %.200s", err->msg);
	err->msg[0] = 0;
	struct paste_btree_config tcfg = cfg->tree;
	tcfg.point_skip = kv_list_elem_key;
	r = paste_btree_open(&kv->tree, st, kv->wal, p, &tcfg, err);
	if (r) {
		paste_wal_close(kv->wal);
		free(kv);
		return r;
	}
	if (err->msg[0]) {
		size_t k = strlen(notes);
		snprintf(notes + k, sizeof(notes) - k, "%stree recovery: %.200s", k ? "; " : "", err->msg);
	}
	memcpy(err->msg, notes, sizeof(notes));
	uint32_t bs = paste_store_geom(st)->buf_size;
	/* At most PASTE_BTREE_MAX_EXTENTS buffers per body (a value in one
	 * entry, or a chunk of a longer one): a body never takes more than
	 * max_held's worth (paste_body(3)). */
	kv->bc = (struct paste_body_config){ .copy = cfg->copy,
					     .max_held = (uint64_t)PASTE_BTREE_MAX_EXTENTS * bs };
	/* A value over one entry's buffers is written in chunks (kv_big.c):
	 * up to Redis's limit, within the store's room. */
	uint64_t cap = KV_STRING_MAX;
	kv->max_value = cfg->max_value && cfg->max_value < cap ? cfg->max_value : cap;
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	kv->recovery_ns = bi.recovery_ns;
	kv->ndbs = cfg->databases ? cfg->databases : 16;
	kv->relayout_batch = cfg->relayout_batch;
	kv->relayout_stop = cfg->relayout_stop;
	kv_clock(kv);
	r = kv_db_open(kv);
	if (r) {
		kv_close(kv);
		return paste_error_set(err, r, "the database map is damaged: %s", strerror(-r));
	}
	*out = kv;
	return 0;
}

int kv_start(struct kv *kv, struct paste_error *err)
{
	int r = kv_layout_open(kv);
	if (r == -EPROTO)
		return paste_error_set(err, r, "the store's keys are of a later pkvs's layout");
	if (r == -EINTR)
		return paste_error_set(err, r, "converting the store's keys to databases: stopped "
				       "as configured (relayout_stop)");
	if (r == -EUCLEAN)
		return paste_error_set(err, r, "converting the store's keys to databases: its keys "
				       "begin with every byte 0..%u, none is left for database 0",
				       KV_PHYS_DBS - 1);
	if (r)
		return paste_error_set(err, r, "converting the store's keys to databases: %s",
				       strerror(-r));
	kv_db_started(kv);
	return 0;
}

void kv_close(struct kv *kv)
{
	if (!kv)
		return;
	paste_append_close(kv->store, &kv->app);
	free(kv->namebuf);
	free(kv->writing);
	paste_btree_close(kv->tree);
	paste_wal_close(kv->wal);
	free(kv);
}

/* Per pass: at most this many expiry index entries and sweeper range
 * deletes (~1-2 us each), so a burst of deadlines or a dropped hash of
 * millions of fields costs each pass a bounded slice, as Redis's active
 * expire cycle bounds its own. */
#define KV_EXPIRE_BUDGET 64u
#define KV_SWEEP_BUDGET 2u

void kv_pass(struct kv *kv)
{
	/* An error here is the store's failure: the store is failed already,
	 * every later reply says so and the server drains and exits. */
	paste_btree_maintain(kv->tree);
	if (kv->group_depth)
		return;
	kv_clock(kv);
	kv_expire_step(kv, KV_EXPIRE_BUDGET);
	/* A dropped list of millions gives its space back in passes back to
	 * back, not two range deletes per idle wait. */
	if (kv->sweep_due && kv_sweep_step(kv, KV_SWEEP_BUDGET))
		kv->next_due_ms = kv->now_ms;
}

uint64_t kv_max_value(const struct kv *kv)
{
	return kv->max_value;
}

size_t kv_max_key(const struct kv *kv)
{
	uint64_t m = (uint64_t)(PASTE_BTREE_MAX_EXTENTS - 1) * paste_store_geom(kv->store)->buf_size - 4;
	return m < KV_MAX_KEY ? (size_t)m : KV_MAX_KEY;
}

void kv_clock(struct kv *kv)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t real_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	kv->real_minus_mono_ns = real_ns - (int64_t)paste_clock_ns();
	kv->now_ms = real_ns / 1000000;
	kv->clock_due = false;
}

void kv_clock_at(struct kv *kv, uint64_t mono_ns)
{
	kv->now_ms = ((int64_t)mono_ns + kv->real_minus_mono_ns) / 1000000;
	kv->clock_due = false;
}

/* Not inside a group: a checkpoint there would keep half of it. */
bool kv_make_room(struct kv *kv, uint64_t need)
{
	if (kv->group_depth)
		return false;
	uint32_t bs = paste_store_geom(kv->store)->buf_size;
	uint64_t want = kv_reserve(kv) + need / bs + 2;
	kv->n.room_calls++;
	int64_t r = paste_btree_make_room(kv->tree, want > UINT32_MAX ? UINT32_MAX : (uint32_t)want,
					  KV_ROOM_STEPS);
	return r >= 0 && (uint64_t)r >= want;
}

/* ---- listeners of changes ------------------------------------------------ */

int kv_touch_add(struct kv *kv, kv_touch_fn fn, void *arg)
{
	for (uint32_t i = 0; i < kv->ntouch; i++)
		if (kv->touch[i].fn == fn && kv->touch[i].arg == arg)
			return -EEXIST;
	if (kv->ntouch == KV_TOUCH_MAX)
		return -ENOSPC;
	kv->touch[kv->ntouch++] = (struct kv_listener){ fn, arg };
	return 0;
}

static void touch_compact(struct kv *kv)
{
	uint32_t j = 0;
	for (uint32_t i = 0; i < kv->ntouch; i++)
		if (kv->touch[i].fn)
			kv->touch[j++] = kv->touch[i];
	kv->ntouch = j;
	kv->touch_holes = false;
}

void kv_touch_remove(struct kv *kv, kv_touch_fn fn, void *arg)
{
	for (uint32_t i = 0; i < kv->ntouch; i++)
		if (kv->touch[i].fn == fn && kv->touch[i].arg == arg) {
			/* During a call the slots stay where the loop sees them. */
			kv->touch[i].fn = NULL;
			kv->touch_holes = true;
			if (!kv->touch_depth)
				touch_compact(kv);
			return;
		}
}

void kv_touch_call(struct kv *kv, const struct kv_key *k, enum kv_touch what)
{
	kv->touch_depth++;
	for (uint32_t i = 0; i < kv->ntouch; i++)
		if (kv->touch[i].fn)
			kv->touch[i].fn(kv->touch[i].arg, k, what);
	if (--kv->touch_depth == 0 && kv->touch_holes)
		touch_compact(kv);
}

void kv_admit(struct kv *kv, uint64_t len)
{
	uint32_t bs = paste_store_geom(kv->store)->buf_size;
	if ((uint64_t)paste_store_nfree(kv->store) < kv_reserve(kv) + len / bs + 2)
		kv_make_room(kv, len);
}
