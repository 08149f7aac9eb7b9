/*
 * pkvs_front.c - the service life both pkvs front ends share
 * (pkvs_front.h): open the key-value store once, print its start-up
 * lines once, run its per-pass work, and report its counters.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "http.h"
#include "metrics.h"
#include "pkvs_front.h"

int pkvs_svc_open(struct server *s, const void *cfg, void **state, struct paste_error *err)
{
	struct kv_handle *h = (struct kv_handle *)cfg;   /* shared and counted: mutable by design */
	if (h->kv) {
		h->refs++;
		*state = h;
		return 0;
	}
	if (s->cfg.threads != 1)
		return paste_error_set(err, -EINVAL, "the key-value store runs in one thread "
				       "(--threads 1): its tree has one owner; shard with twemproxy "
				       "to use more cores");
	struct kv_config kc = h->cfg;
	kc.tree.lane = 0;                  /* worker 0's lane, through its persist object */
	/* 2 % of the tree's pages stay for deletes: a store filled with small
	 * members (its tree full before its buffers) can still DEL them. */
	if (!kc.tree.delete_reserve_pct)
		kc.tree.delete_reserve_pct = 2;
	int r = kv_open(&h->kv, s->store, s->workers[0].persist, &kc, err);
	if (r)
		return r;
	if (err->msg[0])
		fprintf(stderr, "%s: %s\n", s->cfg.name, err->msg);
	h->refs = 1;
	h->started_ms = paste_clock_coarse_ms();
	*state = h;
	return 0;
}

void pkvs_svc_close(struct server *s, void *state)
{
	(void)s;
	struct kv_handle *h = state;
	if (!h || !h->kv || --h->refs)
		return;
	kv_close(h->kv);
	h->kv = NULL;
}

int pkvs_svc_started(struct server *s, void *state, struct paste_error *err)
{
	(void)s;
	struct kv_handle *h = state;
	if (h->kv_started)
		return 0;
	h->kv_started = true;
	return kv_start(h->kv, err);
}

void pkvs_svc_banner(struct server *s, void *state)
{
	struct kv_handle *h = state;
	if (h->banner_done)
		return;
	h->banner_done = true;
	struct kv *kv = h->kv;
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	fprintf(stderr, "%s: tree: %" PRIu64 " keys, height %u, %u of %u pages; recovered in "
		"%.1f ms (%" PRIu64 " log records replayed after checkpoint LSN %" PRIu64 ")\n",
		s->cfg.name, bi.keys, bi.height, bi.pages_used, bi.pages_total,
		(double)bi.recovery_ns / 1e6, bi.replayed, bi.ckpt_lsn);
	fprintf(stderr, "%s: values up to %" PRIu64 " bytes (over %" PRIu64 " in chunks), keys up to "
		"%zu bytes (%u-byte buffers)\n", s->cfg.name, kv->max_value,
		paste_body_max(&kv->bc, s->store), kv_max_key(kv), paste_store_geom(s->store)->buf_size);
}

void pkvs_svc_pass(struct worker *w, void *state)
{
	(void)w;
	kv_pass(pkvs_kv(state));
}

uint64_t pkvs_svc_wake(struct worker *w, void *state)
{
	struct kv *kv = pkvs_kv(state);
	return kv ? kv_wake_at(kv, w->now_ms) : UINT64_MAX;
}

size_t pkvs_stats_json(struct kv *kv, char *out, size_t at, size_t cap)
{
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	char tmp[1536];
	int k = snprintf(tmp, sizeof(tmp),
		 "\"keys\":%" PRIu64 ",\"tree_keys\":%" PRIu64 ",\"tree_height\":%u,\"tree_pages\":%u,\"tree_pages_total\":%u,"
		 "\"checkpoints\":%" PRIu64 ",\"ckpt_lsn\":%" PRIu64 ",\"replayed\":%" PRIu64 ","
		 "\"recovery_ms\":%.3f,\"kv_sets\":%" PRIu64 ",\"kv_gets\":%" PRIu64 ","
		 "\"kv_hits\":%" PRIu64 ",\"kv_misses\":%" PRIu64 ",\"kv_dels\":%" PRIu64 ","
		 "\"max_value\":%" PRIu64 ",\"point_index_keys\":%" PRIu64 ","
		 "\"point_index_bytes\":%" PRIu64 ",\"hinted_sets\":%" PRIu64 ",\"hinted_dels\":%" PRIu64 ",",
		 kv_keys(kv), bi.keys, bi.height, bi.pages_used, bi.pages_total, bi.checkpoints, bi.ckpt_lsn,
		 bi.replayed, (double)bi.recovery_ns / 1e6, kv->n.sets, kv->n.gets, kv->n.hits,
		 kv->n.misses, kv->n.dels, kv->max_value, bi.point_keys, bi.point_bytes,
		 bi.hinted_sets, bi.hinted_dels);
	snprintf(tmp + k, sizeof(tmp) - (size_t)k,
		 "\"live_bytes\":%" PRIu64 ",\"live_buffers\":%u,\"clean_cycles\":%" PRIu64 ","
		 "\"clean_moved\":%" PRIu64 ",\"clean_moved_bytes\":%" PRIu64 ",\"clean_damaged\":%" PRIu64
		 ",\"space_checkpoints\":%" PRIu64 ",\"room_calls\":%" PRIu64 ",",
		 bi.live_bytes, bi.live_bufs, bi.clean_cycles, bi.clean_moved, bi.clean_moved_bytes,
		 bi.clean_damaged, bi.space_checkpoints, kv->n.room_calls);
	return http_put_str(out, at, cap, tmp);
}

size_t pkvs_metrics(struct server *s, void *state, char *out, size_t at, size_t cap)
{
	(void)s;
	struct kv *kv = pkvs_kv(state);
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	at = metrics_one(out, at, cap, "paste_tree_keys", "gauge", "Keys in the B+tree.", bi.keys);
	at = metrics_one(out, at, cap, "paste_tree_pages", "gauge", "Node pages the tree uses.",
			 bi.pages_used);
	at = metrics_one(out, at, cap, "paste_tree_pages_total", "gauge",
			 "Node pages in the store's node area.", bi.pages_total);
	at = metrics_one(out, at, cap, "paste_tree_point_index_bytes", "gauge",
			 "DRAM of the point index (0: none).", bi.point_bytes);
	at = metrics_one(out, at, cap, "paste_tree_hinted_sets_total", "counter",
			 "Overwrites that reached their leaf entry by the point index's hint.",
			 bi.hinted_sets);
	at = metrics_one(out, at, cap, "paste_tree_hinted_dels_total", "counter",
			 "Deletes that reached their leaf entry by the point index's hint.",
			 bi.hinted_dels);
	at = metrics_one(out, at, cap, "paste_tree_checkpoints_total", "counter",
			 "Tree checkpoints since start.", bi.checkpoints);
	at = metrics_one(out, at, cap, "paste_tree_records_since_checkpoint", "gauge",
			 "Log records the next recovery would replay.", bi.records_since);
	at = metrics_one(out, at, cap, "paste_tree_live_bytes", "gauge",
			 "Bytes of the values the tree holds.", bi.live_bytes);
	at = metrics_one(out, at, cap, "paste_tree_live_buffers", "gauge",
			 "Store buffers holding at least one live value byte.", bi.live_bufs);
	at = metrics_one(out, at, cap, "paste_clean_moved_total", "counter",
			 "Values the cleaner moved out of sparse buffers.", bi.clean_moved);
	at = metrics_one(out, at, cap, "paste_clean_moved_bytes_total", "counter",
			 "Bytes the cleaner moved.", bi.clean_moved_bytes);
	at = metrics_one(out, at, cap, "paste_clean_damaged_total", "counter",
			 "Values the cleaner found damaged (left in place).", bi.clean_damaged);
	at = metrics_one(out, at, cap, "paste_kv_sets_total", "counter", "SETs and PUTs applied.",
			 kv->n.sets);
	at = metrics_one(out, at, cap, "paste_kv_dels_total", "counter", "Keys deleted.", kv->n.dels);
	at = metrics_one(out, at, cap, "paste_kv_hits_total", "counter", "Lookups that found the key.",
			 kv->n.hits);
	return metrics_one(out, at, cap, "paste_kv_misses_total", "counter",
			   "Lookups that did not find the key.", kv->n.misses);
}
