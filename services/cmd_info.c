/*
 * cmd_info.c - INFO: the server's state and counters by section, in
 * Redis's fields (Server, Clients, Memory, Persistence, Stats,
 * Replication, CPU, Modules, Commandstats, Errorstats, Cluster,
 * Keyspace) and pkvs's own beside them (pkvs_*: the store, the tree,
 * checkpoints, barriers). The store is pkvs's memory: used_memory is
 * the dataset maxmemory bounds, pkvs_held_bytes what its buffers hold.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "paste_version.h"
#include "cmd_block.h"
#include "cmd_tracking.h"
#include "kv_repl.h"
#include "kv_evict.h"
#include "cmd_pubsub.h"
#include "pkvs_resp.h"

const char *kv_config_file;

enum {
	S_SERVER = 1u << 0, S_CLIENTS = 1u << 1, S_MEMORY = 1u << 2, S_PERSISTENCE = 1u << 3,
	S_STATS = 1u << 4, S_REPLICATION = 1u << 5, S_CPU = 1u << 6, S_MODULES = 1u << 7,
	S_ERRORSTATS = 1u << 8, S_CLUSTER = 1u << 9, S_KEYSPACE = 1u << 10,
	S_COMMANDSTATS = 1u << 11, S_LATENCYSTATS = 1u << 12,
	S_DEFAULT = S_SERVER | S_CLIENTS | S_MEMORY | S_PERSISTENCE | S_STATS | S_REPLICATION |
		    S_CPU | S_MODULES | S_ERRORSTATS | S_CLUSTER | S_KEYSPACE,
	S_ALL = S_DEFAULT | S_COMMANDSTATS | S_LATENCYSTATS,
};

static uint32_t info_sections(const struct paste_resp_arg *a, uint32_t n)
{
	static const struct { const char *name; uint32_t bits; } names[] = {
		{ "server", S_SERVER }, { "clients", S_CLIENTS }, { "memory", S_MEMORY },
		{ "persistence", S_PERSISTENCE }, { "stats", S_STATS },
		{ "replication", S_REPLICATION }, { "cpu", S_CPU }, { "modules", S_MODULES },
		{ "errorstats", S_ERRORSTATS }, { "cluster", S_CLUSTER }, { "keyspace", S_KEYSPACE },
		{ "commandstats", S_COMMANDSTATS }, { "latencystats", S_LATENCYSTATS },
		{ "default", S_DEFAULT }, { "all", S_ALL }, { "everything", S_ALL },
	};
	if (n < 2)
		return S_DEFAULT;
	uint32_t want = 0;
	for (uint32_t i = 1; i < n; i++)
		for (size_t j = 0; j < sizeof(names) / sizeof(names[0]); j++)
			if (paste_resp_arg_eq(&a[i], names[j].name))
				want |= names[j].bits;
	return want;
}

/* INFO's pkvs_ack: what a reply waits for. The epoll baseline pays a
 * barrier per reply; the other engines one per batch. */
static const char *ack_after(enum paste_engine e, enum paste_durability d)
{
	if (d == PASTE_DUR_NONE)
		return "nothing";
	if (e == PASTE_ENGINE_EPOLL)
		return d == PASTE_DUR_FSYNC ? "fdatasync per reply" : "fence per reply";
	return d == PASTE_DUR_FSYNC ? "group commit (fdatasync)" : "fence";
}

static void human(char *out, size_t cap, uint64_t n)
{
	if (n < 1024)
		snprintf(out, cap, "%" PRIu64 "B", n);
	else if (n < (1ull << 20))
		snprintf(out, cap, "%.2fK", (double)n / 1024);
	else if (n < (1ull << 30))
		snprintf(out, cap, "%.2fM", (double)n / (1 << 20));
	else if (n < (1ull << 40))
		snprintf(out, cap, "%.2fG", (double)n / (1 << 30));
	else
		snprintf(out, cap, "%.2fT", (double)n / (1ull << 40));
}

/* A fixed run id (40 hex digits) per process, as Redis's. */
static const char *run_id(void)
{
	static char id[41];
	if (!id[0]) {
		uint64_t seed = paste_clock_ns() ^ ((uint64_t)getpid() << 32);
		for (int i = 0; i < 40; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			id[i] = "0123456789abcdef"[(seed >> 59) & 15];
		}
	}
	return id;
}

struct clients_count {
	uint32_t n;
};

static bool count_client(struct resp_ctx *o, void *arg)
{
	(void)o;
	((struct clients_count *)arg)->n++;
	return true;
}

/* instantaneous_ops_per_sec and _kbps. Redis samples its counters every
 * 100 ms and averages the last 16 rates; here the pass hook keeps a
 * sample at most every 100 ms, and INFO reports the rate from the oldest
 * of the last 1.6 s (or the newest older one, after an idle spell with no
 * passes) to now. One compare per pass, a totals read per 100 ms. */
#define RATE_SAMPLES 16
#define RATE_EVERY_MS 100
struct rate_sample {
	uint64_t ms, ops, in, out;
};
static struct {
	struct rate_sample s[RATE_SAMPLES];
	uint32_t n, last;                /* samples kept; the newest's slot */
} rates;

static struct rate_sample sample_of(struct worker *w, uint64_t now_ms)
{
	struct server_totals tt;
	server_totals(w, &tt);
	return (struct rate_sample){ now_ms, tt.requests, tt.port.bytes_in, tt.port.bytes_out };
}

/* The dataset's peak (used_memory_peak), taken with the rates' samples
 * and whenever INFO or MEMORY STATS reads it; CONFIG RESETSTAT starts it
 * again from now, as Redis's. */
static uint64_t peak_used;

uint64_t kv_used_peak(struct kv *kv)
{
	uint64_t u = kv_evict_used(kv) + kv_evict_clients;
	if (u > peak_used)
		peak_used = u;
	return peak_used;
}

void kv_info_sample(struct worker *w, struct kv *kv)
{
	if (rates.n && w->now_ms - rates.s[rates.last].ms < RATE_EVERY_MS)
		return;
	kv_used_peak(kv);
	rates.last = rates.n ? (rates.last + 1) % RATE_SAMPLES : 0;
	rates.s[rates.last] = sample_of(w, w->now_ms);
	if (rates.n < RATE_SAMPLES)
		rates.n++;
}

/* The rates (ops, input and output KiB per second) up to now. */
static void rates_now(struct worker *w, double *ops, double *in_kbps, double *out_kbps)
{
	*ops = *in_kbps = *out_kbps = 0;
	if (!rates.n)
		return;
	struct rate_sample now = sample_of(w, w->now_ms), *from = NULL;
	for (uint32_t i = 0; i < rates.n; i++) {   /* newest first */
		struct rate_sample *c = &rates.s[(rates.last + RATE_SAMPLES - i) % RATE_SAMPLES];
		if (c->ms >= now.ms)
			continue;
		if (from && now.ms - c->ms > RATE_SAMPLES * RATE_EVERY_MS)
			break;
		from = c;
	}
	if (!from)
		return;
	double secs = (double)(now.ms - from->ms) / 1000;
	*ops = (double)(now.ops - from->ops) / secs;
	*in_kbps = (double)(now.in - from->in) / 1024 / secs;
	*out_kbps = (double)(now.out - from->out) / 1024 / secs;
}

/* The server's and the port's totals as CONFIG RESETSTAT left them: INFO
 * reports Redis's resettable counters from here, the totals themselves
 * (the rates', /metrics') never going back. */
static struct {
	uint64_t accepts, requests, in, out, refused, reads;
} since;

void kv_info_resetstat(struct worker *w, struct kv *kv)
{
	peak_used = 0;
	kv_used_peak(kv);
	struct server_totals tt;
	server_totals(w, &tt);
	since.accepts = tt.port.accepts;
	since.requests = tt.requests;
	since.in = tt.port.bytes_in;
	since.out = tt.port.bytes_out;
	since.refused = tt.port.refused;
	since.reads = tt.port.events;
}

static void cmd_info(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct server *s = x->w->srv;
	struct kv_handle *h = x->ss;
	uint32_t want = info_sections(a, n);
	struct server_totals tt;
	server_totals(x->w, &tt);
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	enum paste_durability d = x->w->persist ? paste_persist_mode(x->w->persist) : PASTE_DUR_NONE;
	struct resp_out o = { 0 };
	char line[1024], hb[32], hb2[32];
#define ADD(...) resp_out_put(&o, line, (size_t)snprintf(line, sizeof(line), __VA_ARGS__))
	bool first = true;
#define SECTION(name) do { if (!first) ADD("\r\n"); first = false; ADD("# " name "\r\n"); } while (0)
	uint64_t now_ms = paste_clock_coarse_ms();
	if (want & S_SERVER) {
		struct utsname u;
		uname(&u);
		char exe[512];
		ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		exe[el > 0 ? el : 0] = 0;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t up = (now_ms - h->started_ms) / 1000;
		SECTION("Server");
		ADD("redis_version:%s\r\npkvs_version:%s\r\nredis_mode:standalone\r\nos:%s %s %s\r\n"
		    "arch_bits:%d\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:%s\r\n"
		    "process_id:%d\r\nprocess_supervised:no\r\nrun_id:%s\r\ntcp_port:%u\r\n"
		    "server_time_usec:%" PRIu64 "\r\nuptime_in_seconds:%" PRIu64
		    "\r\nuptime_in_days:%" PRIu64 "\r\nhz:10\r\nconfigured_hz:10\r\nexecutable:%s\r\n"
		    "config_file:%s\r\nio_threads_active:0\r\nio_engine:%s\r\n",
		    PKVS_REDIS_VERSION, PASTE_VERSION, u.sysname, u.release, u.machine,
		    (int)(sizeof(void *) * 8),
		    s->cfg.engine == PASTE_ENGINE_URING ? "io_uring" : "epoll", (int)getpid(), run_id(),
		    kv_resp_port(x), (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000, up,
		    up / 86400, exe, kv_config_file ? kv_config_file : "",
		    paste_engine_name(s->cfg.engine));
	}
	struct resp_pending rp;
	resp_pending_info(x, &rp);
	struct kv_tracking_info ti;
	kv_tracking_info(&ti);
	if (want & S_CLIENTS) {
		struct clients_count cc = { 0 };
		resp_each(x, count_client, &cc);
		/* The limits on a client's memory: unsent replies before it is
		 * no longer read (0: none), one unfinished command, all of them. */
		SECTION("Clients");
		/* connected_clients: both front ends' (the Redis port's alone in
		 * pkvs_resp_clients). */
		ADD("connected_clients:%u\r\ncluster_connections:0\r\nmaxclients:%u\r\n"
		    "client_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\n"
		    "blocked_clients:%u\r\ntracking_clients:%" PRIu64 "\r\nclients_in_timeout_table:0\r\n"
		    "pkvs_resp_clients:%u\r\npkvs_paused_clients:%u\r\npkvs_max_output:%" PRIu64
		    "\r\npkvs_max_request:%u\r\npkvs_max_request_total:%" PRIu64
		    "\r\npkvs_request_bytes:%" PRIu64 "\r\n",
		    tt.port.conns, s->cfg.max_conns, kv_block_count() + kv_pause_count(), ti.clients, cc.n, tt.port.paused, s->cfg.max_output, rp.max_request, rp.limit, rp.bytes);
	}
	if (want & S_MEMORY) {
		/* The store is pkvs's memory: used_memory is the dataset as
		 * maxmemory bounds it (kv_evict.h: the values the tree names and
		 * a cost per entry), pkvs_held_bytes what the store's buffers
		 * hold (values, the log's headers, values replaced but not yet
		 * given back; not the receive ring's empty buffers),
		 * pkvs_store_bytes their total. maxmemory is the bound past which
		 * writes evict or are refused: the store's size, or CONFIG SET
		 * maxmemory's if lower. */
		const struct paste_store_geom *g = paste_store_geom(s->store);
		uint64_t total = (uint64_t)g->nbufs * g->buf_size;
		/* Clients' buffers count, as in Redis's used_memory; replicas' not. */
		uint64_t clients = kv_clients_memory(x), repl = kv_repl_active ? kv_repl_queued() : 0;
		uint64_t used = kv_evict_used(kv) + clients, held = (uint64_t)tt.bufs_held * g->buf_size;
		human(hb, sizeof(hb), used);
		uint64_t maxmemory = kv_config_maxmemory();
		uint64_t bound = maxmemory && maxmemory < total ? maxmemory : total;
		human(hb2, sizeof(hb2), bound);
		SECTION("Memory");
		ADD("used_memory:%" PRIu64 "\r\nused_memory_human:%s\r\nused_memory_rss:%" PRIu64
		    "\r\nused_memory_peak:%" PRIu64 "\r\nused_memory_dataset:%" PRIu64
		    "\r\nmaxmemory:%" PRIu64 "\r\nmaxmemory_human:%s\r\nmaxmemory_policy:%s\r\n"
		    "mem_not_counted_for_evict:0\r\nmem_allocator:libc\r\nactive_defrag_running:0\r\n"
		    "lazyfree_pending_objects:%" PRIu64
		    "\r\nlazyfreed_objects:%" PRIu64 "\r\n",
		    used, hb, kv_rss_bytes(), kv_used_peak(kv), bi.live_bytes, bound, hb2,
		    kv_evict_policy_name(kv_evict_cfg.policy), kv_sweep_pending(kv), kv->n.lazyfreed);
		ADD("mem_clients_slaves:%" PRIu64 "\r\nmem_clients_normal:%" PRIu64
		    "\r\npkvs_held_bytes:%" PRIu64 "\r\n", repl, clients, held);
		ADD("pkvs_store_bytes:%" PRIu64 "\r\npkvs_live_bytes:%" PRIu64
		    "\r\npkvs_live_buffers:%u\r\npkvs_utilization:%.2f\r\npkvs_clean_cycles:%" PRIu64
		    "\r\npkvs_clean_victims:%" PRIu64 "\r\npkvs_clean_moved:%" PRIu64
		    "\r\npkvs_clean_moved_bytes:%" PRIu64 "\r\npkvs_clean_damaged:%" PRIu64
		    "\r\npkvs_clean_ms:%.3f\r\npkvs_space_checkpoints:%" PRIu64
		    "\r\npkvs_room_calls:%" PRIu64 "\r\n",
		    total, bi.live_bytes, bi.live_bufs,
		    total ? 100.0 * (double)bi.live_bytes / (double)total : 0.0, bi.clean_cycles,
		    bi.clean_victims, bi.clean_moved, bi.clean_moved_bytes, bi.clean_damaged,
		    (double)bi.clean_ns / 1e6, bi.space_checkpoints, kv->n.room_calls);
		struct kv_script_info si;
		kv_script_info(kv, &si);
		ADD("used_memory_lua:%zu\r\nused_memory_vm_eval:%zu\r\nused_memory_scripts_eval:%" PRIu64
		    "\r\nnumber_of_cached_scripts:%" PRIu64 "\r\nnumber_of_functions:%" PRIu64
		    "\r\nnumber_of_libraries:%" PRIu64 "\r\nused_memory_vm_functions:%zu"
		    "\r\nused_memory_vm_total:%zu\r\n",
		    si.eval_bytes, si.eval_bytes, si.script_bytes, si.scripts, si.functions, si.libraries,
		    si.fn_bytes, si.eval_bytes + si.fn_bytes);
	}
	if (want & S_PERSISTENCE) {
		SECTION("Persistence");
		ADD("loading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:%" PRIu64
		    "\r\nrdb_bgsave_in_progress:0\r\nrdb_last_save_time:%" PRIu64
		    "\r\nrdb_last_bgsave_status:ok\r\nrdb_saves:%" PRIu64 "\r\naof_enabled:%d\r\n"
		    "aof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\n"
		    "aof_last_write_status:%s\r\n",
		    bi.records_since, kv_last_save(x), kv_save_count(), d != PASTE_DUR_NONE,
		    paste_store_failed(s->store, NULL) ? "err" : "ok");
		ADD("pkvs_durability:%s\r\npkvs_ack:after %s\r\npkvs_checkpoints:%" PRIu64
		    "\r\npkvs_checkpoint_lsn:%" PRIu64 "\r\npkvs_records_since_checkpoint:%" PRIu64
		    "\r\npkvs_recovery_ms:%.3f\r\npkvs_replayed_at_start:%" PRIu64
		    "\r\npkvs_tree_height:%u\r\npkvs_tree_pages:%u\r\npkvs_tree_pages_total:%u"
		    "\r\npkvs_point_index_keys:%" PRIu64 "\r\npkvs_point_index_bytes:%" PRIu64
		    "\r\npkvs_hinted_sets:%" PRIu64 "\r\npkvs_hinted_dels:%" PRIu64
		    "\r\nstore_failed:%d\r\n",
		    paste_durability_name(d), ack_after(s->cfg.engine, d),
		    bi.checkpoints, bi.ckpt_lsn, bi.records_since, (double)bi.recovery_ns / 1e6,
		    bi.replayed, bi.height, bi.pages_used, bi.pages_total, bi.point_keys, bi.point_bytes,
		    bi.hinted_sets, bi.hinted_dels, paste_store_failed(s->store, NULL) != 0);
	}
	if (want & S_STATS) {
		uint32_t nerr;
		uint64_t errors;
		resp_errstats(x, &nerr, &errors);
		double ops, in_kbps, out_kbps;
		rates_now(x->w, &ops, &in_kbps, &out_kbps);
		uint64_t chans, pats, shards;
		kv_pubsub_topics(&chans, &pats, &shards);
		SECTION("Stats");
		ADD("total_connections_received:%" PRIu64 "\r\ntotal_commands_processed:%" PRIu64
		    "\r\ninstantaneous_ops_per_sec:%.0f\r\ntotal_net_input_bytes:%" PRIu64
		    "\r\ntotal_net_output_bytes:%" PRIu64 "\r\ninstantaneous_input_kbps:%.2f\r\n"
		    "instantaneous_output_kbps:%.2f\r\nrejected_connections:%" PRIu64
		    "\r\nexpired_keys:%" PRIu64 "\r\nevicted_keys:%" PRIu64 "\r\nevicted_clients:%" PRIu64 "\r\n"
		    "keyspace_hits:%" PRIu64 "\r\nkeyspace_misses:%" PRIu64 "\r\npubsub_channels:%" PRIu64
		    "\r\npubsub_patterns:%" PRIu64 "\r\npubsubshard_channels:%" PRIu64
		    "\r\nlatest_fork_usec:0\r\ntotal_forks:0\r\n"
		    "migrate_cached_sockets:0\r\n",     /* MIGRATE keeps none (cmd_dump.c) */
		    tt.port.accepts - since.accepts, tt.requests - since.requests, ops,
		    tt.port.bytes_in - since.in, tt.port.bytes_out - since.out, in_kbps, out_kbps,
		    tt.port.refused - since.refused, kv->n.expired, kv_evict_count(), kv_clients_evicted(false), kv->n.hits, kv->n.misses,
		    chans, pats, shards);
		ADD("tracking_total_keys:%" PRIu64 "\r\ntracking_total_items:%" PRIu64
		    "\r\ntracking_total_prefixes:%" PRIu64 "\r\ntotal_error_replies:%" PRIu64
		    "\r\ntotal_reads_processed:%" PRIu64 "\r\n", ti.keys, ti.items, ti.prefixes, errors,
		    tt.port.events - since.reads);
		ADD("pkvs_sets:%" PRIu64 "\r\npkvs_dels:%" PRIu64 "\r\npkvs_batches:%" PRIu64
		    "\r\npkvs_syscalls:%" PRIu64 "\r\npkvs_fences:%" PRIu64 "\r\npkvs_commits:%" PRIu64
		    "\r\nmax_value:%" PRIu64 "\r\npkvs_output_pauses:%" PRIu64
		    "\r\npkvs_requests_too_big:%" PRIu64 "\r\n",
		    kv->n.sets, kv->n.dels, tt.port.polls, tt.port.syscalls, tt.port.fences,
		    tt.port.commits, kv->max_value, tt.port.pauses, rp.refused);
		/* The barrier histogram as /metrics has it (cumulative, bucket
		 * bounds in microseconds), in Redis's latencystats style. */
		uint64_t cum = 0, total = 0;
		for (uint32_t i = 0; i < PASTE_PORT_LAT_BUCKETS; i++)
			total += tt.port.barrier_hist[i];
		ADD("pkvs_barriers:%" PRIu64 "\r\npkvs_barrier_usec_sum:%" PRIu64 "\r\npkvs_barrier_hist:",
		    total, tt.port.barrier_ns / 1000);
		for (uint32_t i = 0; i + 1 < PASTE_PORT_LAT_BUCKETS; i++) {
			cum += tt.port.barrier_hist[i];
			ADD("%sle%llu=%" PRIu64, i ? "," : "", 1ull << i, cum);
		}
		ADD("\r\n");
	}
	if (want & S_REPLICATION) {
		SECTION("Replication");
		char repl[8192];
		kv_repl_info(repl, sizeof(repl));        /* kv_repl.c */
		resp_out_put(&o, repl, strlen(repl));
	}
	if (want & S_CPU) {
		struct rusage self, kids;
		getrusage(RUSAGE_SELF, &self);
		getrusage(RUSAGE_CHILDREN, &kids);
#define TV(t) ((double)(t).tv_sec + (double)(t).tv_usec / 1e6)
		SECTION("CPU");
		ADD("used_cpu_sys:%f\r\nused_cpu_user:%f\r\nused_cpu_sys_children:%f\r\n"
		    "used_cpu_user_children:%f\r\n", TV(self.ru_stime), TV(self.ru_utime),
		    TV(kids.ru_stime), TV(kids.ru_utime));
#undef TV
	}
	if (want & S_MODULES)
		SECTION("Modules");
	if (want & S_COMMANDSTATS) {
		SECTION("Commandstats");
		for (uint32_t i = 0; i < kv_cmd_count(); i++) {
			const struct kv_cmd_rt *rt = kv_cmd_at(i);
			if (!rt->calls && !rt->rejected && !rt->failed)
				continue;
			uint64_t us = rt->ns / 1000;
			ADD("cmdstat_%s:calls=%" PRIu64 ",usec=%" PRIu64 ",usec_per_call=%.2f,"
			    "rejected_calls=%" PRIu64 ",failed_calls=%" PRIu64 "\r\n", rt->c->name,
			    rt->calls, us, rt->calls ? (double)rt->ns / 1000.0 / (double)rt->calls : 0.0,
			    rt->rejected, rt->failed);
		}
	}
	if (want & S_ERRORSTATS) {
		uint32_t nerr;
		uint64_t errors;
		const struct resp_errstat *es = resp_errstats(x, &nerr, &errors);
		SECTION("Errorstats");
		for (uint32_t i = 0; i < nerr; i++)
			ADD("errorstat_%s:count=%" PRIu64 "\r\n", es[i].code, es[i].count);
	}
	if (want & S_LATENCYSTATS) {
		SECTION("Latencystats");
		if (kv_latency_tracking)
			kv_latency_info(&o);
	}
	if (want & S_CLUSTER) {
		SECTION("Cluster");
		ADD("cluster_enabled:0\r\n");
	}
	if (want & S_KEYSPACE) {
		SECTION("Keyspace");
		for (uint32_t db = 0; db < kv->ndbs; db++)
			if (kv_dbsize(kv, db))
				ADD("db%u:keys=%" PRIu64 ",expires=%" PRIu64 ",avg_ttl=0\r\n", db,
				    kv_dbsize(kv, db), kv_dbexpires(kv, db));
	}
#undef SECTION
#undef ADD
	resp_out_send_text(x, &o);
}

/* name, arity, flags, group, summary, handler, first key, last key, step. */
const struct kv_cmd kv_cmds_info[] = {
	{ "info", -1, "loading stale", "server", "The server's state and counters, by section.", cmd_info, 0, 0, 0 },
	{ 0 }
};
