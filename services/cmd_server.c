/*
 * cmd_server.c - the commands clients use to look at pkvs rather than
 * at its data: INFO, CONFIG GET, COMMAND (COUNT, DOCS, INFO, LIST),
 * CLIENT, and the connection's own: PING, ECHO, SELECT. (SCAN and KEYS
 * are in cmd_keyspace.c.)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "paste_version.h"
#include "pkvs_resp.h"


/* ------------------------------------------------------------- INFO */

static bool section_wanted(const struct paste_resp_arg *a, uint32_t n, const char *name)
{
	if (n < 2)
		return true;
	for (uint32_t i = 1; i < n; i++)
		if (paste_resp_arg_eq(&a[i], name) || paste_resp_arg_eq(&a[i], "all") ||
		    paste_resp_arg_eq(&a[i], "everything") || paste_resp_arg_eq(&a[i], "default"))
			return true;
	return false;
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

void cmd_info(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	struct server *s = x->w->srv;
	struct server_totals tt;
	server_totals(x->w, &tt);
	struct paste_btree_info bi;
	paste_btree_info(kv->tree, &bi);
	enum paste_durability d = x->w->persist ? paste_persist_mode(x->w->persist) : PASTE_DUR_NONE;
	char buf[6144];
	int k = 0;
#define ADD(...) k += snprintf(buf + k, sizeof(buf) - (size_t)k, __VA_ARGS__)
	if (section_wanted(a, n, "server"))
		ADD("# Server\r\nredis_version:%s\r\npkvs_version:%s\r\nredis_mode:standalone\r\n"
		    "os:Linux\r\nprocess_id:%d\r\ntcp_port:%u\r\nuptime_in_seconds:%" PRIu64 "\r\n"
		    "executable:pkvs\r\nio_engine:%s\r\n\r\n", PKVS_REDIS_VERSION, PASTE_VERSION,
		    (int)getpid(), s->cfg.port, (paste_clock_coarse_ms() - ((struct kv_handle *)x->ss)->started_ms) / 1000,
		    s->cfg.engine == PASTE_ENGINE_URING ? "io_uring" : "epoll");
	struct resp_pending rp;
	resp_pending_info(x, &rp);
	/* The limits on a client's memory: unsent replies before it is no
	 * longer read (0: none), one unfinished command, all of them. */
	if (section_wanted(a, n, "clients"))
		ADD("# Clients\r\nconnected_clients:%u\r\nmaxclients:%u\r\npkvs_paused_clients:%u"
		    "\r\npkvs_max_output:%" PRIu64 "\r\npkvs_max_request:%u\r\npkvs_max_request_total:%"
		    PRIu64 "\r\npkvs_request_bytes:%" PRIu64 "\r\n\r\n", tt.port.conns, s->cfg.max_conns,
		    tt.port.paused, s->cfg.max_output, rp.max_request, rp.limit, rp.bytes);
	if (section_wanted(a, n, "memory")) {
		/* The store is pkvs's memory: used_memory is what its buffers
		 * hold (values, the log's headers; not the receive ring's
		 * empty buffers), maxmemory their total (a write beyond is
		 * refused with OOM once a checkpoint and the cleaner found no
		 * more room). */
		const struct paste_store_geom *g = paste_store_geom(s->store);
		uint64_t total = (uint64_t)g->nbufs * g->buf_size;
		uint64_t used = (uint64_t)tt.bufs_held * g->buf_size;
		ADD("# Memory\r\nused_memory:%" PRIu64 "\r\nmaxmemory:%" PRIu64
		    "\r\nmaxmemory_policy:noeviction\r\npkvs_live_bytes:%" PRIu64
		    "\r\npkvs_live_buffers:%u\r\npkvs_utilization:%.2f\r\npkvs_clean_cycles:%" PRIu64
		    "\r\npkvs_clean_victims:%" PRIu64 "\r\npkvs_clean_moved:%" PRIu64
		    "\r\npkvs_clean_moved_bytes:%" PRIu64 "\r\npkvs_clean_damaged:%" PRIu64
		    "\r\npkvs_clean_ms:%.3f\r\npkvs_space_checkpoints:%" PRIu64
		    "\r\npkvs_room_calls:%" PRIu64 "\r\n\r\n",
		    used, total, bi.live_bytes, bi.live_bufs,
		    total ? 100.0 * (double)bi.live_bytes / (double)total : 0.0, bi.clean_cycles,
		    bi.clean_victims, bi.clean_moved, bi.clean_moved_bytes, bi.clean_damaged,
		    (double)bi.clean_ns / 1e6, bi.space_checkpoints, kv->n.room_calls);
	}
	if (section_wanted(a, n, "persistence"))
		ADD("# Persistence\r\nloading:0\r\naof_enabled:%d\r\nrdb_changes_since_last_save:%" PRIu64
		    "\r\npkvs_durability:%s\r\npkvs_ack:after %s\r\npkvs_checkpoints:%" PRIu64
		    "\r\npkvs_checkpoint_lsn:%" PRIu64 "\r\npkvs_records_since_checkpoint:%" PRIu64
		    "\r\npkvs_recovery_ms:%.3f\r\npkvs_replayed_at_start:%" PRIu64
		    "\r\npkvs_tree_height:%u\r\npkvs_tree_pages:%u\r\npkvs_tree_pages_total:%u"
		    "\r\npkvs_point_index_keys:%" PRIu64 "\r\npkvs_point_index_bytes:%" PRIu64
		    "\r\npkvs_hinted_sets:%" PRIu64 "\r\npkvs_hinted_dels:%" PRIu64
		    "\r\nstore_failed:%d\r\n\r\n",
		    d != PASTE_DUR_NONE, bi.records_since, paste_durability_name(d),
		    ack_after(s->cfg.engine, d),
		    bi.checkpoints, bi.ckpt_lsn, bi.records_since, (double)bi.recovery_ns / 1e6,
		    bi.replayed, bi.height, bi.pages_used, bi.pages_total, bi.point_keys, bi.point_bytes,
		    bi.hinted_sets, bi.hinted_dels, paste_store_failed(s->store, NULL) != 0);
	if (section_wanted(a, n, "stats")) {
		ADD("# Stats\r\ntotal_connections_received:%" PRIu64 "\r\ntotal_commands_processed:%" PRIu64
		    "\r\nkeyspace_hits:%" PRIu64 "\r\nkeyspace_misses:%" PRIu64 "\r\npkvs_sets:%" PRIu64
		    "\r\npkvs_dels:%" PRIu64 "\r\npkvs_batches:%" PRIu64 "\r\npkvs_syscalls:%" PRIu64
		    "\r\npkvs_fences:%" PRIu64 "\r\npkvs_commits:%" PRIu64 "\r\nmax_value:%" PRIu64
		    "\r\nrejected_connections:%" PRIu64 "\r\npkvs_output_pauses:%" PRIu64
		    "\r\npkvs_requests_too_big:%" PRIu64 "\r\n",
		    tt.port.accepts, tt.requests, kv->n.hits, kv->n.misses,
		    kv->n.sets, kv->n.dels, tt.port.polls, tt.port.syscalls,
		    tt.port.fences, tt.port.commits, kv->max_value, tt.port.refused, tt.port.pauses,
		    rp.refused);
		/* The barrier histogram as /metrics has it (cumulative, bucket
		 * bounds in microseconds), in Redis's latencystats style. */
		uint64_t cum = 0, total = 0;
		for (uint32_t i = 0; i < PASTE_PORT_LAT_BUCKETS; i++)
			total += tt.port.barrier_hist[i];
		ADD("pkvs_barriers:%" PRIu64 "\r\npkvs_barrier_usec_sum:%" PRIu64 "\r\npkvs_barrier_hist:",
		    total, tt.port.barrier_ns / 1000);
		for (uint32_t i = 0; i + 1 < PASTE_PORT_LAT_BUCKETS && k < (int)sizeof(buf) - 32; i++) {
			cum += tt.port.barrier_hist[i];
			ADD("%sle%llu=%" PRIu64, i ? "," : "", 1ull << i, cum);
		}
		ADD("\r\n\r\n");
	}
	if (section_wanted(a, n, "keyspace")) {
		ADD("# Keyspace\r\n");
		for (uint32_t d = 0; d < kv->ndbs; d++)
			if (kv_dbsize(kv, d))
				ADD("db%u:keys=%" PRIu64 ",expires=%" PRIu64 ",avg_ttl=0\r\n", d,
				    kv_dbsize(kv, d), kv_dbexpires(kv, d));
	}
#undef ADD
	if (k > (int)sizeof(buf))
		k = (int)sizeof(buf);
	resp_bulk(x, buf, (size_t)k);
}

/* ----------------------------------------------------------- CONFIG */

void cmd_config(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	if (!paste_resp_arg_eq(&a[1], "GET")) {
		resp_error(x, "ERR pkvs supports CONFIG GET only; its settings are command-line flags");
		return;
	}
	if (n < 3) {
		resp_arity_error(x, &a[0]);
		return;
	}
	enum paste_durability d = x->w->persist ? paste_persist_mode(x->w->persist) : PASTE_DUR_NONE;
	static const char *const names[] = { "save", "appendonly", "appendfsync", "databases",
					     "maxmemory" };
	const char *values[] = { "", d == PASTE_DUR_NONE ? "no" : "yes",
				 d == PASTE_DUR_NONE ? "no" : "always", "1", "0" };
	uint32_t hits = 0;
	bool hit[5] = { 0 };
	for (uint32_t i = 2; i < n; i++)
		for (uint32_t j = 0; j < 5; j++)
			if (!hit[j] && kv_glob(a[i].p, a[i].len, (const uint8_t *)names[j], strlen(names[j]))) {
				hit[j] = true;
				hits++;
			}
	if (resp_map(x, hits))
		return;
	for (uint32_t j = 0; j < 5; j++) {
		if (!hit[j])
			continue;
		resp_bulk(x, names[j], strlen(names[j]));
		resp_bulk(x, values[j], strlen(values[j]));
	}
}

/* ---------------------------------------------------------- COMMAND */

static void command_info(struct resp_out *o, const struct kv_cmd *c, int proto)
{
	char h[64];
	int k = paste_resp_put_array(h, sizeof(h), 10);
	resp_out_put(o, h, (size_t)k);
	resp_out_bulk(o, c->name, strlen(c->name));
	k = paste_resp_put_int(h, sizeof(h), c->arity);
	resp_out_put(o, h, (size_t)k);
	/* flags: a set of simple strings */
	uint32_t nf = 0;
	for (const char *p = c->flags; *p; p++)
		nf += (p == c->flags || p[-1] == ' ') && *p != ' ';
	k = paste_resp_put_set(h, sizeof(h), proto, nf);
	resp_out_put(o, h, (size_t)k);
	for (const char *p = c->flags; *p;) {
		size_t len = strcspn(p, " ");
		char f[40];
		snprintf(f, sizeof(f), "%.*s", (int)len, p);
		k = paste_resp_put_simple(h, sizeof(h), f);
		resp_out_put(o, h, (size_t)k);
		p += len;
		while (*p == ' ')
			p++;
	}
	k = paste_resp_put_int(h, sizeof(h), c->first_key);
	resp_out_put(o, h, (size_t)k);
	k = paste_resp_put_int(h, sizeof(h), c->last_key);
	resp_out_put(o, h, (size_t)k);
	k = paste_resp_put_int(h, sizeof(h), c->key_step);
	resp_out_put(o, h, (size_t)k);
	k = paste_resp_put_set(h, sizeof(h), proto, 0);   /* ACL categories */
	resp_out_put(o, h, (size_t)k);
	for (int i = 0; i < 3; i++) {                     /* tips, key specs, subcommands */
		k = paste_resp_put_array(h, sizeof(h), 0);
		resp_out_put(o, h, (size_t)k);
	}
}

static void command_docs(struct resp_out *o, const struct kv_cmd *c, int proto)
{
	char h[64];
	int k = paste_resp_put_map(h, sizeof(h), proto, 4);
	resp_out_put(o, h, (size_t)k);
	resp_out_bulk(o, "summary", 7);
	resp_out_bulk(o, c->summary, strlen(c->summary));
	resp_out_bulk(o, "since", 5);
	resp_out_bulk(o, "1.0.0", 5);
	resp_out_bulk(o, "group", 5);
	resp_out_bulk(o, c->group, strlen(c->group));
	resp_out_bulk(o, "complexity", 10);
	resp_out_bulk(o, "O(log N)", 8);
}

static const struct kv_cmd *find_cmd(const struct paste_resp_arg *a)
{
	struct kv_cmd_rt *rt = kv_cmd_find(a);
	return rt ? rt->c : NULL;
}

void cmd_command(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	int proto = x->r->proto;
	struct resp_out o = { 0 };
	char head[32];
	if (n == 1) {
		for (uint32_t i = 0; i < kv_cmd_count(); i++)
			command_info(&o, kv_cmd_at(i)->c, proto);
		resp_out_send(x, head, paste_resp_put_array(head, sizeof(head), kv_cmd_count()), &o);
	} else if (paste_resp_arg_eq(&a[1], "COUNT")) {
		resp_int(x, kv_cmd_count());
	} else if (paste_resp_arg_eq(&a[1], "LIST")) {
		for (uint32_t i = 0; i < kv_cmd_count(); i++)
			resp_out_bulk(&o, kv_cmd_at(i)->c->name, strlen(kv_cmd_at(i)->c->name));
		resp_out_send(x, head, paste_resp_put_array(head, sizeof(head), kv_cmd_count()), &o);
	} else if (paste_resp_arg_eq(&a[1], "INFO")) {
		uint32_t cnt = n == 2 ? kv_cmd_count() : n - 2;
		for (uint32_t i = 0; i < cnt; i++) {
			const struct kv_cmd *c = n == 2 ? kv_cmd_at(i)->c : find_cmd(&a[i + 2]);
			if (c) {
				command_info(&o, c, proto);
			} else {
				int k = paste_resp_put_null_array(head, sizeof(head), proto);
				resp_out_put(&o, head, (size_t)k);
			}
		}
		resp_out_send(x, head, paste_resp_put_array(head, sizeof(head), cnt), &o);
	} else if (paste_resp_arg_eq(&a[1], "DOCS")) {
		uint32_t cnt = 0;
		for (uint32_t i = 0; i < (n == 2 ? kv_cmd_count() : n - 2); i++) {
			const struct kv_cmd *c = n == 2 ? kv_cmd_at(i)->c : find_cmd(&a[i + 2]);
			if (!c)
				continue;
			resp_out_bulk(&o, c->name, strlen(c->name));
			command_docs(&o, c, proto);
			cnt++;
		}
		resp_out_send(x, head, paste_resp_put_map(head, sizeof(head), proto, cnt), &o);
	} else {
		resp_error(x, "ERR unknown subcommand for 'command': try COUNT, DOCS, INFO or LIST");
	}
}

/* ----------------------------------------------------------- CLIENT */

void cmd_client(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	struct resp_conn *r = x->r;
	if (paste_resp_arg_eq(&a[1], "SETNAME") && n == 3) {
		for (size_t i = 0; i < a[2].len; i++)
			if (a[2].p[i] <= ' ' || a[2].p[i] > '~') {
				resp_error(x, "ERR Client names cannot contain spaces, newlines or special characters.");
				return;
			}
		free(r->name);
		r->name = a[2].len ? strndup(a[2].p, a[2].len) : NULL;
		resp_ok(x);
	} else if (paste_resp_arg_eq(&a[1], "GETNAME") && n == 2) {
		if (r->name)
			resp_bulk(x, r->name, strlen(r->name));
		else
			resp_null(x);
	} else if (paste_resp_arg_eq(&a[1], "SETINFO") && n == 4) {
		resp_ok(x);       /* lib-name / lib-ver: accepted, not kept */
	} else if (paste_resp_arg_eq(&a[1], "ID") && n == 2) {
		resp_int(x, (int64_t)x->conn + 1);
	} else {
		resp_error(x, "ERR unknown subcommand or wrong number of arguments for 'client': "
			   "pkvs has SETNAME, GETNAME, SETINFO and ID");
	}
}

/* ------------------------------------------------------ connection */

void cmd_ping(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	if (n == 2)
		resp_bulk(x, a[1].p, a[1].len);
	else
		resp_simple(x, "PONG");
}

void cmd_echo(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)n;
	resp_bulk(x, a[1].p, a[1].len);
}

void cmd_select(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)n;
	int64_t db;
	if (paste_resp_arg_i64(&a[1], &db))
		resp_error(x, "ERR value is not an integer or out of range");
	else if (db != 0)
		resp_error(x, "ERR DB index is out of range (pkvs has database 0 only)");
	else
		resp_ok(x);
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_server[] = {
	{ "ping", -1, "fast", "connection", "Returns the server's liveliness response.", cmd_ping, 0, 0, 0 },
	{ "echo", 2, "fast", "connection", "Returns the given string.", cmd_echo, 0, 0, 0 },
	{ "select", 2, "loading stale fast", "connection", "Changes the selected database.", cmd_select, 0, 0, 0 },
	{ "info", -1, "loading stale", "server", "Returns information and statistics about the server.", cmd_info, 0, 0, 0 },
	{ "config", -2, "admin loading stale", "server", "CONFIG GET: the configuration parameters pkvs knows.", cmd_config, 0, 0, 0 },
	{ "command", -1, "loading stale", "server", "Returns detailed information about all commands.", cmd_command, 0, 0, 0 },
	{ "client", -2, "loading stale", "connection", "CLIENT SETNAME, GETNAME, SETINFO, ID.", cmd_client, 0, 0, 0 },
	{ "hello", -1, "fast loading stale", "connection", "Handshakes with the server.", NULL, 0, 0, 0 },
	{ "quit", -1, "fast loading stale", "connection", "Closes the connection.", NULL, 0, 0, 0 },
	{ 0 }
};
