/*
 * cmd_repl.c - the replication commands (SYNC, PSYNC, REPLCONF, ROLE,
 * REPLICAOF, SLAVEOF), the replica role's rules (kv_repl_refused) and
 * INFO's Replication lines; the stream and propagation are kv_repl.c,
 * the replica's link kv_replica.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cmd_block.h"
#include "kv_hash.h"
#include "kv_rdb.h"
#include "kv_repl.h"
#include "kv_set.h"
#include "kv_replica.h"
#include "kv_repl_rewrite.h"
#include "kv_repl_int.h"

static const char *const READONLY_ERR = "READONLY You can't write against a read only replica.";
static const char *const MASTERDOWN_ERR =
	"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

static void full_sync(struct resp_ctx *x, struct kv *kv, bool psync)
{
	if (kv_rs.replica) {
		resp_error(x, "NOMASTERLINK Can't SYNC while not connected with my master");
		return;
	}
	if (kv_repl_find(x->r->id))
		return;                         /* a replica already: ignored, as Redis */
	if (kv_rs.n == MAX_REPLICAS) {
		resp_error(x, "ERR max number of replicas reached");
		return;
	}
	struct kv_rdb_buf b = { 0 };
	int r = kv_rdb_snapshot(kv, &b, kv_repl_replid(), kv_rs.offset);
	if (r) {
		kv_rdb_free(&b);
		kv_reply_errno(x, r);
		return;
	}
	char h[96];
	int hl = 0;
	if (psync)
		hl = snprintf(h, sizeof(h), "+FULLRESYNC %s %" PRIu64 "\r\n", kv_repl_replid(), kv_rs.offset);
	hl += snprintf(h + hl, sizeof(h) - (size_t)hl, "$%zu\r\n", b.len);
	struct paste_port *pt = x->w->port;
	if (paste_port_send(pt, x->conn, h, (size_t)hl, PASTE_SEND_DURABLE) ||
	    paste_port_send(pt, x->conn, b.p, b.len, PASTE_SEND_DURABLE)) {
		kv_rdb_free(&b);
		return;
	}
	kv_rdb_free(&b);
	struct replica *rp = &kv_rs.r[kv_rs.n++];
	*rp = (struct replica){ .c = { x->w, x->conn, x->r->id }, .ack_ms = x->w->now_ms,
				.synced = kv_rs.offset };
	for (uint32_t i = 0; i < MAX_REPLICAS; i++)
		if (kv_rs.ports[i].id == x->r->id) {
			rp->port = kv_rs.ports[i].port;
			kv_rs.ports[i].id = 0;
		}
	x->r->reply_off = true;                 /* a replica gets the stream, no replies */
	kv_rs.sel_db = -1;                          /* the next unit starts with SELECT */
	if (!kv_rs.last_ping)
		kv_rs.last_ping = x->w->now_ms;
	kv_repl_listen_on(kv);
	kv_rs.clock_ms = x->w->now_ms;
	kv_repl_good_update();
}

static void cmd_sync(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)a, (void)n;
	full_sync(x, kv, false);
}

static void cmd_psync(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)a, (void)n;
	full_sync(x, kv, true);             /* no backlog: always a full resynchronization */
}

static void cmd_replconf(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	if (n % 2 == 0) {
		resp_error(x, "ERR syntax error");
		return;
	}
	for (uint32_t i = 1; i < n; i += 2) {
		if (opt_is(&a[i], "ACK") || opt_is(&a[i], "FACK")) {
			int64_t off;
			if (paste_resp_arg_i64(&a[i + 1], &off))
				return;
			struct replica *rp = kv_repl_find(x->r->id);
			if (rp) {
				if ((uint64_t)off > rp->ack)
					rp->ack = (uint64_t)off;
				rp->ack_ms = x->w->now_ms;
			}
			kv_rs.clock_ms = x->w->now_ms;
			kv_repl_good_update();
			if (kv_rs.nw)
				kv_repl_wait_check(0);
			return;                 /* no reply, as Redis */
		} else if (opt_is(&a[i], "GETACK")) {
			return;
		} else if (opt_is(&a[i], "listening-port")) {
			int64_t port;
			if (!kv_arg_int(x, &a[i + 1], &port))
				return;
			/* Its slot, a free one, or the oldest (a connection that
			 * closed without SYNC leaves its slot to be taken). */
			uint32_t j = 0;
			while (j < MAX_REPLICAS && kv_rs.ports[j].id && kv_rs.ports[j].id != x->r->id)
				j++;
			if (j == MAX_REPLICAS)
				j = kv_rs.ports_next++ % MAX_REPLICAS;
			kv_rs.ports[j].id = x->r->id;
			kv_rs.ports[j].port = (unsigned)port;
		} else if (!opt_is(&a[i], "capa") && !opt_is(&a[i], "ip-address") &&
			   !opt_is(&a[i], "rdb-only") && !opt_is(&a[i], "rdb-filter-only")) {
			resp_error(x, "ERR Unrecognized REPLCONF option: %.*s", (int)a[i].len, a[i].p);
			return;
		}
	}
	resp_ok(x);
}

static void replica_addr(const struct replica *rp, char *ip, size_t cap)
{
	struct resp_ctx x;
	char peer[80], local[80];
	int fd;
	snprintf(ip, cap, "?");
	if (!kv_repl_peer_ctx(&rp->c, &x))
		return;
	resp_conn_addr(&x, peer, local, sizeof(peer), &fd);
	char *colon = strrchr(peer, ':');
	if (colon)
		*colon = 0;
	snprintf(ip, cap, "%s", peer);
}

static void cmd_role(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)a, (void)n;
	if (kv_rs.replica) {
		resp_array(x, 5);
		resp_bulk(x, "slave", 5);
		resp_bulk(x, kv_link.mhost, strlen(kv_link.mhost));
		resp_int(x, kv_link.mport);
		const char *st = kv_link.st == L_UP ? "connected" : kv_link.st == L_RDB ? "sync"
			       : kv_link.st == L_DOWN ? "connect" : "connecting";
		resp_bulk(x, st, strlen(st));
		resp_int(x, kv_link.st == L_UP ? (int64_t)kv_link.off : -1);
		return;
	}
	resp_array(x, 3);
	resp_bulk(x, "master", 6);
	resp_int(x, (int64_t)kv_rs.offset);
	resp_array(x, kv_rs.n);
	for (uint32_t i = 0; i < kv_rs.n; i++) {
		char ip[80], port[16], off[24];
		replica_addr(&kv_rs.r[i], ip, sizeof(ip));
		resp_array(x, 3);
		resp_bulk(x, ip, strlen(ip));
		resp_bulk(x, port, (size_t)snprintf(port, sizeof(port), "%u", kv_rs.r[i].port));
		resp_bulk(x, off, (size_t)snprintf(off, sizeof(off), "%" PRIu64, kv_rs.r[i].ack));
	}
}

static void cmd_replicaof(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)n;
	if (opt_is(&a[1], "NO") && opt_is(&a[2], "ONE")) {
		if (kv_rs.replica) {
			free(kv_link.mhost);
			kv_link.mhost = NULL;
			kv_rs.replica = false;
			kv_link_close(0);
			kv_repl_new_replid();           /* a new history starts here */
			kv_repl_listen_update();
		}
		resp_ok(x);
		return;
	}
	int64_t port;
	if (!kv_arg_range(x, &a[2], 0, 65535, "Invalid master port", &port))
		return;
	if (kv_rs.replica && kv_link.mport == (unsigned)port && strlen(kv_link.mhost) == a[1].len &&
	    !strncasecmp(kv_link.mhost, a[1].p, a[1].len)) {
		resp_simple(x, "OK Already connected to specified master");
		return;
	}
	char *h = malloc(a[1].len + 1);
	if (!h) {
		resp_error(x, "ERR out of memory");
		return;
	}
	memcpy(h, a[1].p, a[1].len);
	h[a[1].len] = 0;
	free(kv_link.mhost);
	kv_link.mhost = h;
	kv_link.mport = (unsigned)port;
	kv_rs.replica = true;
	kv_rs.kv = kv;
	kv_link_start(x);
	kv_repl_drop_replicas();                        /* they follow a primary no more */
	for (uint32_t i = 0; i < kv_rs.nw; i++) {
		struct resp_ctx wx;
		if (kv_repl_peer_ctx(&kv_rs.wt[i].c, &wx)) {
			resp_error(&wx, "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)");
			resp_unblock(&wx);
		}
	}
	kv_rs.nw = 0;
	kv_repl_listen_update();
	resp_ok(x);
}

/* The replica role's rules: writes refused while replica-read-only is
 * yes, and (replica-serve-stale-data no, link down) all but what may run
 * on stale data. */
static bool read_only(void)
{
	if (!kv_rs.replica)
		return false;
	const char *ro = kv_config_kept("replica-read-only");
	return !ro || !strcasecmp(ro, "yes");
}

static bool stale_refused(void)
{
	if (!kv_rs.replica || kv_link.st == L_UP)
		return false;
	const char *stale = kv_config_kept("replica-serve-stale-data");
	return stale && !strcasecmp(stale, "no");
}

bool kv_repl_refused(struct resp_ctx *x, struct kv_cmd_rt *rt)
{
	const char *why = NULL;
	if (read_only() && ((rt->fl & KV_CMD_WRITE) || kv_multi_exec_writes(x, rt)))
		why = READONLY_ERR;
	else if (stale_refused() &&
		 (!(rt->fl & KV_CMD_STALE) || kv_multi_exec_lacks(x, rt, KV_CMD_STALE)))
		why = MASTERDOWN_ERR;
	if (!why)
		return false;
	if (!kv_multi_exec_abort(x, rt, why)) {
		kv_multi_reject(x);
		resp_error(x, "%s", why);
	}
	return true;
}

const char *kv_repl_refusal(bool write)
{
	if (write && read_only())
		return READONLY_ERR;
	if (stale_refused())
		return MASTERDOWN_ERR;
	if (write && kv_noreplicas)
		return KV_NOREPLICAS;
	return NULL;
}

const char *kv_repl_primary(char *buf, size_t cap)
{
	if (!kv_rs.replica)
		return "";
	snprintf(buf, cap, "%s %u", kv_link.mhost, kv_link.mport);
	return buf;
}

void kv_repl_info(char *out, size_t cap)
{
	size_t k = 0;
#define PUT(...) (k += (size_t)snprintf(out + k, k < cap ? cap - k : 0, __VA_ARGS__))
	if (kv_rs.replica) {
		uint64_t now = kv_link.w ? kv_link.w->now_ms : 0;
		bool up = kv_link.st == L_UP;
		PUT("role:slave\r\nmaster_host:%s\r\nmaster_port:%u\r\nmaster_link_status:%s\r\n"
		    "master_last_io_seconds_ago:%lld\r\nmaster_sync_in_progress:%d\r\n"
		    "slave_read_repl_offset:%" PRIu64 "\r\nslave_repl_offset:%" PRIu64 "\r\n",
		    kv_link.mhost, kv_link.mport, up ? "up" : "down",
		    up ? (long long)((now - kv_link.last_io) / 1000) : -1LL, kv_link.st == L_RDB, kv_link.off, kv_link.off);
		if (!up)
			PUT("master_link_down_since_seconds:%lld\r\n",
			    kv_link.down_since ? (long long)((now - kv_link.down_since) / 1000) : -1LL);
		PUT("slave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\n");
	} else {
		PUT("role:master\r\n");
	}
	PUT("connected_slaves:%u\r\n", kv_rs.n);
	for (uint32_t i = 0; i < kv_rs.n; i++) {
		char ip[80];
		replica_addr(&kv_rs.r[i], ip, sizeof(ip));
		struct resp_ctx x;
		uint64_t now = kv_repl_peer_ctx(&kv_rs.r[i].c, &x) ? x.w->now_ms : kv_rs.r[i].ack_ms;
		PUT("slave%u:ip=%s,port=%u,state=online,offset=%" PRIu64 ",lag=%" PRIu64 "\r\n", i, ip,
		    kv_rs.r[i].port, kv_rs.r[i].ack, (now - kv_rs.r[i].ack_ms) / 1000);
	}
	PUT("master_failover_state:no-failover\r\nmaster_replid:%s\r\n"
	    "master_replid2:0000000000000000000000000000000000000000\r\n"
	    "master_repl_offset:%" PRIu64 "\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n"
	    "repl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n",
	    kv_rs.replica && kv_link.mreplid[0] ? kv_link.mreplid : kv_repl_replid(), kv_rs.replica ? kv_link.off : kv_rs.offset);
#undef PUT
}

/* name, arity, flags, group, summary, handler, first key, last key, step */
const struct kv_cmd kv_cmds_repl[] = {
	{ "sync", 1, "admin noscript no_async_loading no_multi", "server", "Starts a replica's full synchronization: the data set as RDB, then the command stream.", cmd_sync, 0, 0, 0 },
	{ "psync", -3, "admin noscript no_async_loading no_multi", "server", "Starts a replica's synchronization: always a full one (+FULLRESYNC), then the command stream.", cmd_psync, 0, 0, 0 },
	{ "replconf", -1, "admin noscript loading stale allow_busy", "server", "A replica's settings and acknowledgements (listening-port, capa, ACK).", cmd_replconf, 0, 0, 0 },
	{ "role", 1, "noscript loading stale fast", "server", "The replication role: master with its replicas' offsets, or slave and its primary.", cmd_role, 0, 0, 0 },
	{ "replicaof", 3, "admin noscript stale no_async_loading", "server", "Makes pkvs a replica of host port (writes refused), or a primary again (NO ONE).", cmd_replicaof, 0, 0, 0 },
	{ "slaveof", 3, "admin noscript stale no_async_loading", "server", "Makes pkvs a replica of host port, or a primary again (NO ONE): REPLICAOF's old name.", cmd_replicaof, 0, 0, 0 },
	{ 0 },
};
