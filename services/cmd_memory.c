/*
 * cmd_memory.c - MEMORY: USAGE, STATS, DOCTOR, MALLOC-STATS, PURGE, HELP.
 *
 * pkvs's memory is two things: the store (a file mapping holding every
 * value, the log and the tree: what maxmemory bounds, INFO's used_memory)
 * and the process's heap (connections' queues, the point index, the Lua
 * states: glibc's malloc). STATS answers in Redis's fields, the store's
 * dataset as Redis's "allocated" and the heap as its allocator's, with
 * pkvs's own store figures after them; DOCTOR reads the same figures.
 */
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv_evict.h"
#include "kv_hash.h"
#include "kv_stream.h"
#include "kv_list.h"
#include "kv_repl.h"
#include "kv_zset.h"
#include "pkvs_resp.h"

/* ---- USAGE ---------------------------------------------------------------- */

/* MEMORY USAGE key [SAMPLES count]: the bytes the key costs the store,
 * estimated as Redis estimates: the key's tree entry and its value, and
 * for a collection its record plus `count` members sampled (default 5,
 * 0: all) scaled to the member count. An entry costs its key and value
 * bytes and ENTRY_COST more (its slot in a tree page, its extents). */
#define ENTRY_COST 32u

static void cmd_memory_usage(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			     uint32_t n)
{
	int64_t samples = 5;
	if (n == 5 && paste_resp_arg_eq(&a[3], "SAMPLES")) {
		if (!kv_arg_int(x, &a[4], &samples))
			return;
		if (samples < 0) {
			resp_error(x, "ERR syntax error");
			return;
		}
	} else if (n != 3) {
		resp_error(x, "ERR syntax error");
		return;
	}
	struct kv_key k;
	struct kv_obj o;
	if (!kv_arg_key(x, kv, &a[2], &k))
		return;
	if (kv_lookup(kv, &k, &o, true)) {
		resp_null(x);
		return;
	}
	uint64_t bytes = a[2].len + o.len + ENTRY_COST + (o.expire_ms != KV_NO_TTL ? 8 + ENTRY_COST : 0);
	if (kv_is_coll(o.type) && o.coll.count) {
		static const uint8_t kinds[] = { [KV_HASH] = KV_HASH_FIELD, [KV_LIST] = KV_LIST_ELEM,
						 [KV_SET] = KV_SET_MEMBER, [KV_ZSET] = KV_ZSET_MEMBER,
						 [KV_STREAM] = KV_STREAM_ENTRY };
		uint8_t *longbuf = malloc(KV_MAX_KEY);
		if (!longbuf) {
			resp_error(x, "ERR out of memory");
			return;
		}
		struct kv_members m;
		kv_members_init(kv, &m, o.coll.id, kinds[o.type], NULL, 0);
		uint64_t seen = 0, sum = 0, want = samples ? (uint64_t)samples : UINT64_MAX;
		const uint8_t *name;
		size_t nlen;
		struct paste_extent ext[PASTE_BTREE_MAX_EXTENTS];
		uint32_t ne, len;
		uint64_t big;
		while (seen < want && kv_members_next(kv, &m, &name, &nlen, longbuf, ext, &ne, &len) == 1) {
			/* A value in chunks (kv_elem): its length, not its record's. */
			kv_elem_decode(kv, paste_btree_cursor_attr(&m.c)->tag, ext, ne, &len, &big);
			sum += nlen + len + ENTRY_COST;
			seen++;
		}
		free(longbuf);
		/* A sorted set's member has a second entry: its score index's. */
		uint64_t per = seen ? sum / seen : 0;
		if (o.type == KV_ZSET)
			per *= 2;
		bytes += per * o.coll.count;
	}
	resp_int(x, (int64_t)bytes);
}

/* ---- the figures STATS and DOCTOR read ----------------------------------- */

/* The process's resident bytes, and of them those of shared file
 * mappings (the store's pages, on /dev/shm or a file): /proc/self/statm. */
static void resident(uint64_t *rss, uint64_t *shared)
{
	unsigned long size = 0, res = 0, shr = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f && fscanf(f, "%lu %lu %lu", &size, &res, &shr) != 3)
		res = shr = 0;
	if (f)
		fclose(f);
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	*rss = (uint64_t)res * page;
	*shared = (uint64_t)shr * page;
}

uint64_t kv_rss_bytes(void)
{
	uint64_t rss, shared;
	resident(&rss, &shared);
	return rss;
}

struct clients_mem {
	uint64_t normal, replicas;      /* bytes queued to send, and requests not yet run */
	uint64_t nnormal, nreplicas;
};

static bool client_mem(struct resp_ctx *o, void *arg)
{
	struct clients_mem *m = arg;
	uint64_t b = kv_client_memory(o);
	if (kv_repl_is_replica(o)) {
		m->replicas += b;
		m->nreplicas++;
	} else {
		m->normal += b;
		m->nnormal++;
	}
	return true;
}

struct mem_figures {
	uint64_t used;                  /* the dataset as maxmemory counts it */
	uint64_t store, held, live;     /* the store's bytes, what its buffers hold, live values */
	uint64_t room;                  /* free buffers' bytes beyond the reserve writes keep */
	uint64_t keys, overhead, dbs_overhead;
	struct clients_mem clients;
	struct kv_script_info si;
	struct mallinfo2 heap;
	uint64_t rss, shared;
};

static void figures(struct resp_ctx *x, struct kv *kv, struct mem_figures *f)
{
	memset(f, 0, sizeof(*f));
	struct server_totals tt;
	server_totals(x->w, &tt);
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	const struct paste_store_geom *g = paste_store_geom(x->w->srv->store);
	f->used = kv_evict_used(kv) + kv_clients_memory(x);     /* as INFO's used_memory */
	f->store = (uint64_t)g->nbufs * g->buf_size;
	f->held = (uint64_t)tt.bufs_held * g->buf_size;
	f->live = bi.live_bytes;
	uint32_t nfree = paste_store_nfree(x->w->srv->store), reserve = kv_reserve(kv);
	f->room = nfree > reserve ? (uint64_t)(nfree - reserve) * g->buf_size : 0;
	for (uint32_t db = 0; db < kv->ndbs; db++) {
		f->keys += kv_dbsize(kv, db);
		f->dbs_overhead += (kv_dbsize(kv, db) + kv_dbexpires(kv, db)) * KV_EVICT_ENTRY_COST;
	}
	resp_each(x, client_mem, &f->clients);
	kv_script_info(kv, &f->si);
	f->overhead = f->clients.normal + f->clients.replicas + f->si.script_bytes + f->si.fn_bytes +
		      f->dbs_overhead;
	f->heap = mallinfo2();
	resident(&f->rss, &f->shared);
}

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

/* ---- STATS --------------------------------------------------------------- */

/* The reply's fields, counted as they are added: the map's length is
 * known only at the end (one entry per database with keys). */
struct stats_out {
	struct resp_out o;
	int proto;
	uint64_t fields;
};

static void name(struct stats_out *s, const char *n)
{
	resp_out_bulk(&s->o, n, strlen(n));
	s->fields++;
}

static void put_int(struct stats_out *s, const char *n, uint64_t v)
{
	char b[32];
	name(s, n);
	resp_out_put(&s->o, b, (size_t)paste_resp_put_int(b, sizeof(b), (int64_t)v));
}

static void put_double(struct stats_out *s, const char *n, double d)
{
	char b[64];
	name(s, n);
	resp_out_put(&s->o, b, (size_t)paste_resp_put_double(b, sizeof(b), s->proto, d));
}

static void cmd_memory_stats(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			     uint32_t n)
{
	(void)a, (void)n;
	struct mem_figures f;
	figures(x, kv, &f);
	struct stats_out s = { .proto = x->r->proto == 3 ? 3 : 2 };
	uint64_t dataset = f.used > f.overhead ? f.used - f.overhead : 0;
	uint64_t allocated = f.heap.uordblks + f.heap.hblkhd, active = f.heap.arena + f.heap.hblkhd;
	uint64_t peak = kv_used_peak(kv);
	put_int(&s, "peak.allocated", peak);
	put_int(&s, "total.allocated", f.used);
	put_int(&s, "startup.allocated", 0);
	put_int(&s, "replication.backlog", 0);
	put_int(&s, "clients.slaves", f.clients.replicas);
	put_int(&s, "clients.normal", f.clients.normal);
	put_int(&s, "cluster.links", 0);
	put_int(&s, "aof.buffer", 0);
	put_int(&s, "lua.caches", f.si.script_bytes);
	put_int(&s, "functions.caches", f.si.fn_bytes);
	for (uint32_t db = 0; db < kv->ndbs; db++) {
		if (!kv_dbsize(kv, db))
			continue;
		char b[24];
		snprintf(b, sizeof(b), "db.%u", db);
		name(&s, b);
		char m[32];
		resp_out_put(&s.o, m, (size_t)paste_resp_put_map(m, sizeof(m), s.proto, 3));
		uint64_t top = s.fields;
		put_int(&s, "overhead.hashtable.main", kv_dbsize(kv, db) * KV_EVICT_ENTRY_COST);
		put_int(&s, "overhead.hashtable.expires", kv_dbexpires(kv, db) * KV_EVICT_ENTRY_COST);
		put_int(&s, "overhead.hashtable.slot-to-keys", 0);
		s.fields = top;
	}
	put_int(&s, "overhead.total", f.overhead);
	put_int(&s, "keys.count", f.keys);
	put_int(&s, "keys.bytes-per-key", f.keys ? f.used / f.keys : 0);
	put_int(&s, "dataset.bytes", dataset);
	put_double(&s, "dataset.percentage", 100 * ratio(dataset, f.used));
	put_double(&s, "peak.percentage", 100 * ratio(f.used, peak));
	/* The heap is the allocator's; the store's pages are a shared
	 * mapping, resident whole once prefaulted, so the process's
	 * overhead is what it holds beyond the store and the heap in use. */
	uint64_t anon = f.rss > f.shared ? f.rss - f.shared : 0, accounted = f.store + allocated;
	put_int(&s, "allocator.allocated", allocated);
	put_int(&s, "allocator.active", active);
	put_int(&s, "allocator.resident", anon);
	put_double(&s, "allocator-fragmentation.ratio", ratio(active, allocated));
	put_int(&s, "allocator-fragmentation.bytes", active - allocated);
	put_double(&s, "allocator-rss.ratio", ratio(anon, active));
	put_int(&s, "allocator-rss.bytes", anon > active ? anon - active : 0);
	put_double(&s, "rss-overhead.ratio", ratio(f.rss, anon + f.shared));
	put_int(&s, "rss-overhead.bytes", 0);
	put_double(&s, "fragmentation", ratio(f.rss, accounted));
	put_int(&s, "fragmentation.bytes", f.rss > accounted ? f.rss - accounted : 0);
	put_int(&s, "pkvs.store.bytes", f.store);
	put_int(&s, "pkvs.store.held", f.held);
	put_int(&s, "pkvs.store.live", f.live);
	put_double(&s, "pkvs.store.utilization", 100 * ratio(f.live, f.store));
	char head[32];
	resp_out_send(x, head, paste_resp_put_map(head, sizeof(head), s.proto, s.fields), &s.o);
}

/* ---- DOCTOR -------------------------------------------------------------- */

#define DOCTOR_LITTLE (5u << 20)        /* under this, nothing to examine */
#define DOCTOR_ROOM 0.1                 /* the store's share still free */
#define DOCTOR_MAXMEMORY 0.9            /* the dataset's share of maxmemory */
#define DOCTOR_CLIENT_BUF (200u << 10)  /* average unsent bytes per client */
#define DOCTOR_REPLICA_BUF (10u << 20)  /* average per replica */
#define DOCTOR_SCRIPTS 1000u
#define DOCTOR_SCRIPT_BYTES (500u << 10)

static void cmd_memory_doctor(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			      uint32_t n)
{
	(void)a, (void)n;
	struct mem_figures f;
	figures(x, kv, &f);
	struct resp_out o = { 0 };
	char line[512];
#define ADD(...) resp_out_put(&o, line, (size_t)snprintf(line, sizeof(line), __VA_ARGS__))
	if (f.held < DOCTOR_LITTLE && f.keys == 0) {
		ADD("This pkvs instance holds no keys and under 5 MB of its store: there is nothing "
		    "for the memory doctor to examine yet.\n");
		resp_out_send_text(x, &o);
		return;
	}
	uint32_t found = 0;
	double full = ratio(f.held, f.store);
	if (ratio(f.room, f.store) < DOCTOR_ROOM) {
		found++;
		ADD("* The store has %" PRIu64 " bytes free of %" PRIu64 " (%" PRIu64 " held, %" PRIu64
		    " in live values). A write that needs more room than a checkpoint and the "
		    "cleaner can make is refused with -OOM, or evicts keys under an eviction "
		    "policy: start pkvs with a larger --store-size, or set maxmemory and a "
		    "maxmemory-policy.\n", f.room, f.store, f.held, f.live);
	}
	uint64_t maxmemory = kv_config_maxmemory();
	if (maxmemory && ratio(f.used, maxmemory) > DOCTOR_MAXMEMORY) {
		found++;
		ADD("* The dataset is %.0f%% of maxmemory (%" PRIu64 " of %" PRIu64 " bytes): under "
		    "maxmemory-policy %s, writes that add data %s.\n", 100 * ratio(f.used, maxmemory),
		    f.used, maxmemory, kv_evict_policy_name(kv_evict_cfg.policy),
		    kv_evict_cfg.policy == KV_EVICT_NOEVICTION ? "will soon be refused with -OOM"
							       : "evict keys");
	}
	if (f.clients.nnormal && f.clients.normal / f.clients.nnormal > DOCTOR_CLIENT_BUF) {
		found++;
		ADD("* Clients hold %" PRIu64 " bytes on average of replies not yet sent and requests "
		    "not yet run: some read their replies slowly or pipeline deeply. pkvs stops "
		    "reading a client whose unsent replies pass its output limit until they drain "
		    "(INFO: pkvs_max_output, pkvs_paused_clients).\n",
		    f.clients.normal / f.clients.nnormal);
	}
	if (f.clients.nreplicas && f.clients.replicas / f.clients.nreplicas > DOCTOR_REPLICA_BUF) {
		found++;
		ADD("* Replicas hold %" PRIu64 " bytes on average of changes not yet sent: a replica "
		    "link is slow, or a replica is still loading its copy.\n",
		    f.clients.replicas / f.clients.nreplicas);
	}
	if (f.si.scripts > DOCTOR_SCRIPTS || f.si.script_bytes > DOCTOR_SCRIPT_BYTES) {
		found++;
		ADD("* %" PRIu64 " scripts (%" PRIu64 " bytes) are cached: EVAL keeps every script it "
		    "runs, so an application that builds scripts with its data inside fills the "
		    "cache. Pass the data in KEYS and ARGV to fixed scripts (EVALSHA); SCRIPT FLUSH "
		    "empties the cache.\n", f.si.scripts, f.si.script_bytes);
	}
	if (!found)
		ADD("No memory problem found: the store is %.0f%% held (%" PRIu64 " of %" PRIu64
		    " bytes), clients hold %" PRIu64 " bytes of unsent replies and unrun requests, "
		    "and %" PRIu64 " scripts are cached.\n", 100 * full, f.held, f.store,
		    f.clients.normal, f.si.scripts);
#undef ADD
	resp_out_send_text(x, &o);
}

/* ---- MALLOC-STATS, PURGE, HELP ------------------------------------------- */

/* glibc's own report of its arenas (malloc_info's XML): the heap only,
 * not the store's mapping. */
static void cmd_memory_malloc_stats(struct resp_ctx *x, struct kv *kv,
				    const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)a, (void)n;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f || malloc_info(0, f) != 0) {
		if (f)
			fclose(f);
		free(text);
		resp_error(x, "ERR out of memory");
		return;
	}
	fclose(f);
	struct resp_out o = { 0 };
	resp_out_put(&o, text, len);
	free(text);
	resp_out_send_text(x, &o);
}

/* The heap's free memory back to the system (malloc_trim); the store's
 * buffers are the store's and are not touched. */
static void cmd_memory_purge(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			     uint32_t n)
{
	(void)kv, (void)a, (void)n;
	malloc_trim(0);
	resp_ok(x);
}

static void cmd_memory_help(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)a, (void)n;
	static const char *const help[] = {
		"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"DOCTOR",
		"    What in the store, the clients' buffers or the script cache looks wrong.",
		"MALLOC-STATS",
		"    The heap allocator's (glibc's) own report.",
		"PURGE",
		"    Gives the heap's free memory back to the system.",
		"STATS",
		"    The memory the store and the server use, in Redis's fields, then the",
		"    store's own (pkvs.store.*).",
		"USAGE <key> [SAMPLES <count>]",
		"    The bytes a key and its value take in the store (an estimate: <count>",
		"    members sampled, 5 by default, 0 for all).",
		"HELP",
		"    Prints this help.",
	};
	kv_reply_help(x, help, sizeof(help) / sizeof(help[0]));
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_memory[] = {
	{ "memory", -2, "", "server", "MEMORY subcommands: what keys, the store and the server cost.", NULL, 0, 0, 0 },
	{ "memory|doctor", 2, "", "server", "What in the store, the clients' buffers or the script cache looks wrong.", cmd_memory_doctor, 0, 0, 0 },
	{ "memory|help", 2, "loading stale", "server", "Lists MEMORY's subcommands.", cmd_memory_help, 0, 0, 0 },
	{ "memory|malloc-stats", 2, "", "server", "The heap allocator's (glibc's) own report.", cmd_memory_malloc_stats, 0, 0, 0 },
	{ "memory|purge", 2, "", "server", "Gives the heap's free memory back to the system.", cmd_memory_purge, 0, 0, 0 },
	{ "memory|stats", 2, "", "server", "The memory the store and the server use, in Redis's fields and the store's own.", cmd_memory_stats, 0, 0, 0 },
	{ "memory|usage", -3, "readonly", "server", "The bytes a key and its value take in the store (estimated from samples).", cmd_memory_usage, 2, 2, 1 },
	{ 0 }
};
