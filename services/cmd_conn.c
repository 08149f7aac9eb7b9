/*
 * cmd_conn.c - the connection's commands (pkvs_resp.h): who may run what
 * (AUTH, ACL, the maxmemory bound, min-replicas-to-write), CLIENT, RESET,
 * PING, ECHO. HELLO and QUIT are the protocol's own (server/resp.c); AUTH
 * and ACL are cmd_acl.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_block.h"
#include "cmd_pubsub.h"
#include "cmd_tracking.h"
#include "kv_acl.h"
#include "kv_evict.h"
#include "kv_repl.h"
#include "kv_vec.h"
#include "pkvs_resp.h"

bool kv_conn_allowed(struct resp_ctx *x, struct kv_cmd_rt *rt, const struct paste_resp_arg *argv,
		     uint32_t argc)
{
	if (!x->r->authed && !(rt->fl & KV_CMD_NO_AUTH)) {
		resp_error(x, "NOAUTH Authentication required.");
		return false;
	}
	/* ACL: one flag for a user allowed everything (cmd_acl.c). */
	const struct kv_acl_user *u = x->r->user;
	if (u && !u->all && !kv_acl_allowed(x, rt, argv, argc))
		return false;
	/* Over maxmemory, any command evicts first, as Redis's; only a
	 * command that may grow the data is then refused. */
	if (kv_over_maxmemory(x) && (rt->fl & KV_CMD_DENYOOM)) {
		resp_error(x, "OOM command not allowed when used memory > 'maxmemory'.");
		return false;
	}
	if (kv_noreplicas && ((rt->fl & KV_CMD_WRITE) || kv_multi_exec_writes(x, rt))) {
		if (!kv_multi_exec_abort(x, rt, KV_NOREPLICAS))   /* EXEC: EXECABORT ... */
			resp_error(x, "%s", KV_NOREPLICAS);
		return false;
	}
	return true;
}

/* ----------------------------------------------------------- CLIENT */

uint64_t kv_client_memory(struct resp_ctx *o)
{
	return paste_port_conn_queued(o->w->port, o->conn) + o->r->buf.cap;
}

/* One line of CLIENT LIST / INFO, Redis's fields; what pkvs does not
 * keep per client (the other buffer sizes) is 0. */
int kv_client_line(struct resp_ctx *o, char *out, size_t cap)
{
	const struct kv_acl_user *u = o->r->user;
	struct resp_conn *r = o->r;
	const struct kv_resp_conn *kc = o->sc;
	char peer[80], local[80];
	int fd;
	resp_conn_addr(o, peer, local, sizeof(peer), &fd);
	uint64_t now = o->w->now_ms;
	int multi = -1;              /* (MULTI's queue is cmd_multi.c's own) */
	uint32_t sub, psub, ssub;
	kv_pubsub_counts(o, &sub, &psub, &ssub);
	char flags[16], *f = flags;
	if (kv_monitor_is(o))
		*f++ = 'O';
	if (r->pubsub)
		*f++ = 'P';
	if (kv_block_is(o))
		*f++ = 'b';
	f += kv_tracking_flags(o, f);           /* t R B */
	if (r->no_evict)
		*f++ = 'e';
	if (f == flags)
		*f++ = 'N';
	*f = 0;
	return snprintf(out, cap,
		"id=%" PRIu64 " addr=%s laddr=%s fd=%d name=%s age=%" PRIu64 " idle=%" PRIu64
		" flags=%s db=%u sub=%u psub=%u ssub=%u multi=%d qbuf=%u qbuf-free=0 argv-mem=0"
		" multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=%" PRIu64 " tot-mem=%" PRIu64 " events=r cmd=%s user=%s"
		" redir=%" PRId64 " resp=%u\n",
		r->id, peer, local, fd, r->name ? r->name : "",
		(now - r->created_ms) / 1000, (now - o->c->last_ms) / 1000, flags, kc->db, sub, psub,
		ssub, multi,
		r->buf.len + r->cmd_bytes, paste_port_conn_queued(o->w->port, o->conn), kv_client_memory(o),
		kc->last ? kc->last->name : "NULL", u ? u->name : "default",
		kv_tracking_redir(o), r->proto);
}

struct client_walk {
	struct resp_out *out;
	const struct paste_resp_arg *ids;   /* CLIENT LIST ID ...: these only */
	uint32_t nids;
	/* CLIENT KILL's filters */
	struct resp_ctx *self;
	uint64_t id;
	const struct paste_resp_arg *addr, *laddr;
	const struct kv_acl_user *user;     /* CLIENT KILL USER */
	bool skipme, kill_self;
	uint32_t killed;
};

static bool list_one(struct resp_ctx *o, void *arg)
{
	struct client_walk *cw = arg;
	if (cw->nids) {
		bool found = false;
		for (uint32_t i = 0; i < cw->nids && !found; i++) {
			int64_t id;
			found = !paste_resp_arg_i64(&cw->ids[i], &id) && (uint64_t)id == o->r->id;
		}
		if (!found)
			return true;
	}
	char line[1024];
	int n = kv_client_line(o, line, sizeof(line));
	resp_out_put(cw->out, line, (size_t)(n < (int)sizeof(line) ? n : (int)sizeof(line) - 1));
	return true;
}

static bool kill_one(struct resp_ctx *o, void *arg)
{
	struct client_walk *cw = arg;
	char peer[80], local[80];
	int fd;
	if (cw->addr || cw->laddr)
		resp_conn_addr(o, peer, local, sizeof(peer), &fd);
	if (cw->addr && !paste_resp_arg_eq(cw->addr, peer))
		return true;
	if (cw->laddr && !paste_resp_arg_eq(cw->laddr, local))
		return true;
	if (cw->id && o->r->id != cw->id)
		return true;
	if (cw->user && o->r->user != cw->user)
		return true;
	bool self = o->r->id == cw->self->r->id;
	if (self && cw->skipme)
		return true;
	if (self)
		cw->kill_self = true;           /* after the reply */
	else
		resp_close(o);
	cw->killed++;
	return true;
}

static void client_kill(struct resp_ctx *x, const struct paste_resp_arg *a, uint32_t n)
{
	struct client_walk cw = { .self = x, .skipme = true };
	if (n == 3) {                        /* CLIENT KILL addr:port */
		cw.addr = &a[2];
		cw.skipme = false;
	} else {
		for (uint32_t i = 2; i < n; i += 2) {
			if (i + 1 >= n) {
				resp_error(x, "ERR syntax error");
				return;
			}
			const struct paste_resp_arg *v = &a[i + 1];
			if (paste_resp_arg_eq(&a[i], "ID")) {
				int64_t id;
				if (paste_resp_arg_i64(v, &id) || id < 1) {
					resp_error(x, "ERR client-id should be greater than 0");
					return;
				}
				cw.id = (uint64_t)id;
			} else if (paste_resp_arg_eq(&a[i], "TYPE")) {
				if (!paste_resp_arg_eq(v, "normal") && !paste_resp_arg_eq(v, "master") &&
				    !paste_resp_arg_eq(v, "replica") && !paste_resp_arg_eq(v, "slave") &&
				    !paste_resp_arg_eq(v, "pubsub")) {
					resp_error(x, "ERR Unknown client type '%.*s'", (int)(v->len < 128 ? v->len : 128), v->p);
					return;
				}
				if (!paste_resp_arg_eq(v, "normal"))
					cw.id = UINT64_MAX;   /* pkvs has normal clients only */
			} else if (paste_resp_arg_eq(&a[i], "ADDR")) {
				cw.addr = v;
			} else if (paste_resp_arg_eq(&a[i], "LADDR")) {
				cw.laddr = v;
			} else if (paste_resp_arg_eq(&a[i], "USER")) {
				if (!(cw.user = kv_acl_get(v->p, v->len))) {
					resp_error(x, "ERR No such user '%.*s'", (int)(v->len < 128 ? v->len : 128), v->p);
					return;
				}
			} else if (paste_resp_arg_eq(&a[i], "SKIPME")) {
				if (paste_resp_arg_eq(v, "yes"))
					cw.skipme = true;
				else if (paste_resp_arg_eq(v, "no"))
					cw.skipme = false;
				else {
					resp_error(x, "ERR syntax error");
					return;
				}
			} else {
				resp_error(x, "ERR syntax error");
				return;
			}
		}
	}
	resp_each(x, kill_one, &cw);
	if (n == 3) {
		if (!cw.killed)
			resp_error(x, "ERR No such client");
		else
			resp_ok(x);
	} else {
		resp_int(x, cw.killed);
	}
	if (cw.kill_self)
		resp_close(x);
}

static void cmd_client_sub(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a,
			   uint32_t n)
{
	(void)kv;
	struct resp_conn *r = x->r;
	const struct paste_resp_arg *s = &a[1];
	if (paste_resp_arg_eq(s, "ID")) {
		resp_int(x, (int64_t)r->id);
	} else if (paste_resp_arg_eq(s, "INFO")) {
		struct resp_out o = { 0 };
		char line[1024];
		int k = kv_client_line(x, line, sizeof(line));
		resp_out_put(&o, line, (size_t)(k < (int)sizeof(line) ? k : (int)sizeof(line) - 1));
		resp_out_send_text(x, &o);
	} else if (paste_resp_arg_eq(s, "LIST")) {
		struct resp_out o = { 0 };
		struct client_walk cw = { .out = &o };
		if (n == 4 && paste_resp_arg_eq(&a[2], "TYPE")) {
			if (!paste_resp_arg_eq(&a[3], "normal") && !paste_resp_arg_eq(&a[3], "master") &&
			    !paste_resp_arg_eq(&a[3], "replica") && !paste_resp_arg_eq(&a[3], "slave") &&
			    !paste_resp_arg_eq(&a[3], "pubsub")) {
				resp_error(x, "ERR Unknown client type '%.*s'",
					   (int)(a[3].len < 128 ? a[3].len : 128), a[3].p);
				return;
			}
			if (!paste_resp_arg_eq(&a[3], "normal")) {
				resp_out_send_text(x, &o);
				return;
			}
		} else if (n > 3 && paste_resp_arg_eq(&a[2], "ID")) {
			for (uint32_t i = 3; i < n; i++) {
				int64_t id;
				if (paste_resp_arg_i64(&a[i], &id)) {
					resp_error(x, "ERR Invalid client ID");
					return;
				}
			}
			cw.ids = &a[3];
			cw.nids = n - 3;
		} else if (n != 2) {
			resp_error(x, "ERR syntax error");
			return;
		}
		resp_each(x, list_one, &cw);
		resp_out_send_text(x, &o);
	} else if (paste_resp_arg_eq(s, "KILL")) {
		client_kill(x, a, n);
	} else if (paste_resp_arg_eq(s, "SETNAME")) {
		if (resp_set_name(x, &a[2]))
			resp_ok(x);
	} else if (paste_resp_arg_eq(s, "GETNAME")) {
		if (r->name)
			resp_bulk(x, r->name, strlen(r->name));
		else
			resp_null(x);
	} else if (paste_resp_arg_eq(s, "SETINFO")) {
		/* Redis 7.2's (redis-py 8 sends it): LIB-NAME / LIB-VER checked
		 * and not kept. */
		if (!paste_resp_arg_eq(&a[2], "LIB-NAME") && !paste_resp_arg_eq(&a[2], "LIB-VER")) {
			resp_error(x, "ERR Unrecognized option '%.*s'", (int)(a[2].len < 128 ? a[2].len : 128),
				   a[2].p);
			return;
		}
		for (size_t i = 0; i < a[3].len; i++)
			if (a[3].p[i] < '!' || a[3].p[i] > '~') {
				resp_error(x, "ERR %s cannot contain spaces, newlines or special characters.",
					   paste_resp_arg_eq(&a[2], "LIB-NAME") ? "lib-name" : "lib-ver");
				return;
			}
		resp_ok(x);
	} else if (paste_resp_arg_eq(s, "REPLY")) {
		if (paste_resp_arg_eq(&a[2], "ON")) {
			r->reply_off = r->skip = false;
			resp_ok(x);
		} else if (paste_resp_arg_eq(&a[2], "OFF")) {
			r->reply_off = true;
		} else if (paste_resp_arg_eq(&a[2], "SKIP")) {
			if (!r->reply_off)
				r->skip_next = true;
		} else {
			resp_error(x, "ERR syntax error");
		}
	} else if (paste_resp_arg_eq(s, "NO-EVICT")) {
		if (paste_resp_arg_eq(&a[2], "ON") || paste_resp_arg_eq(&a[2], "OFF")) {
			r->no_evict = paste_resp_arg_eq(&a[2], "ON");
			resp_ok(x);
		} else {
			resp_error(x, "ERR syntax error");
		}
	} else if (paste_resp_arg_eq(s, "UNPAUSE")) {
		kv_client_unpause(x, kv);        /* cmd_pause.c */
	} else if (paste_resp_arg_eq(s, "PAUSE")) {
		kv_client_pause(x, kv, a, n);
	} else if (paste_resp_arg_eq(s, "TRACKING") || paste_resp_arg_eq(s, "CACHING") ||
		   paste_resp_arg_eq(s, "TRACKINGINFO") || paste_resp_arg_eq(s, "GETREDIR")) {
		kv_client_tracking(x, kv, a, n);  /* cmd_tracking.c */
	} else if (paste_resp_arg_eq(s, "UNBLOCK")) {
		int64_t id;
		if (n == 4 && !paste_resp_arg_eq(&a[3], "TIMEOUT") && !paste_resp_arg_eq(&a[3], "ERROR")) {
			resp_error(x, "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
			return;
		}
		if (paste_resp_arg_i64(&a[2], &id)) {
			resp_error(x, "ERR value is not an integer or out of range");
			return;
		}
		resp_int(x, kv_block_unblock(x, kv, (uint64_t)id, n == 4 && paste_resp_arg_eq(&a[3], "ERROR")));
	} else {
		static const char *const help[] = {
			"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"CACHING (YES|NO)",
			"    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
			"GETREDIR",
			"    Return the client ID we are redirecting to when tracking is enabled.",
			"GETNAME", "    Return the name of the current connection.",
			"ID", "    Return the ID of the current connection.",
			"INFO", "    Return information about the current client connection.",
			"KILL <ip:port>", "    Kill connection made from <ip:port>.",
			"KILL <option> <value> [<option> <value> [...]]",
			"    Kill connections. Options are: ID, TYPE, USER, ADDR, LADDR, SKIPME.",
			"LIST [options ...]", "    Return information about client connections: TYPE, ID.",
			"UNPAUSE", "    Stop the current client pause, resuming traffic.",
			"PAUSE <timeout> [WRITE|ALL]",
			"    Suspend all, or just write, clients for <timeout> milliseconds.",
			"REPLY (ON|OFF|SKIP)", "    Control the replies sent to the current connection.",
			"SETNAME <name>", "    Assign the name <name> to the current connection.",
			"TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
			"         [OPTIN] [OPTOUT] [NOLOOP]",
			"    Control server assisted client side caching.",
			"TRACKINGINFO",
			"    Report tracking status for the current connection.",
			"NO-EVICT (ON|OFF)", "    Protect the current client connection from eviction.",
			"HELP", "    Print this help.",
		};
		kv_reply_help(x, help, sizeof(help) / sizeof(help[0]));
	}
}

/* ------------------------------------------------------------ RESET */

static void cmd_reset(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)a, (void)n;
	struct resp_conn *r = x->r;
	kv_multi_reset(x);
	kv_pubsub_reset(x);
	kv_monitor_reset(x);
	kv_tracking_reset(x);
	((struct kv_resp_conn *)x->sc)->db = 0;
	r->proto = 2;
	resp_set_authed(x, srv_auth_start(resp_auth(x), &r->user));
	free(r->name);
	r->name = NULL;
	r->reply_off = r->skip = r->skip_next = false;   /* NO-EVICT stays, as in Redis */
	resp_simple(x, "RESET");
}

/* ------------------------------------------------------- PING, ECHO */

static void cmd_ping(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv;
	if (n > 2)
		resp_error(x, "ERR wrong number of arguments for 'ping' command");
	else if (kv_pubsub_ping(x, a, n))
		return;                          /* subscribed, RESP2: its own form */
	else if (n == 2)
		resp_bulk(x, a[1].p, a[1].len);
	else
		resp_simple(x, "PONG");
}

static void cmd_echo(struct resp_ctx *x, struct kv *kv, const struct paste_resp_arg *a, uint32_t n)
{
	(void)kv, (void)n;
	resp_bulk(x, a[1].p, a[1].len);
}

/* name, arity, flags, group, summary, handler, first key, last key, step.
 * A container's subcommands follow it. */
const struct kv_cmd kv_cmds_conn[] = {
	{ "ping", -1, "fast", "connection", "Answers PONG, or sends its argument back.", cmd_ping, 0, 0, 0 },
	{ "echo", 2, "loading stale fast", "connection", "Sends its argument back.", cmd_echo, 0, 0, 0 },
	{ "reset", 1, "noscript loading stale fast no_auth allow_busy", "connection", "Puts the connection back as it was on connecting: database 0, RESP2, no transaction, subscription, MONITOR or tracking, name or reply mode, logged out while a password is set.", cmd_reset, 0, 0, 0 },
	{ "client", -2, "", "connection", "CLIENT subcommands: this connection's settings, and the server's connections.", NULL, 0, 0, 0 },
	{ "client|caching", 3, "noscript loading stale", "connection", "Turns the tracking of the next command's keys on (OPTIN) or off (OPTOUT).", cmd_client_sub, 0, 0, 0 },
	{ "client|getname", 2, "noscript loading stale", "connection", "The connection's name, null when it has none.", cmd_client_sub, 0, 0, 0 },
	{ "client|getredir", 2, "noscript loading stale", "connection", "The connection invalidations are redirected to: 0 none, -1 tracking off.", cmd_client_sub, 0, 0, 0 },
	{ "client|help", 2, "loading stale", "connection", "Lists CLIENT's subcommands.", cmd_client_sub, 0, 0, 0 },
	{ "client|id", 2, "noscript loading stale", "connection", "The connection's id, never reused while the server runs.", cmd_client_sub, 0, 0, 0 },
	{ "client|info", 2, "noscript loading stale", "connection", "This connection in one line of CLIENT LIST's fields.", cmd_client_sub, 0, 0, 0 },
	{ "client|kill", -3, "admin noscript loading stale", "connection", "Closes the connections picked by id, address, local address or user.", cmd_client_sub, 0, 0, 0 },
	{ "client|list", -2, "admin noscript loading stale", "connection", "One line of fields per open connection, optionally picked by type or id.", cmd_client_sub, 0, 0, 0 },
	{ "client|no-evict", 3, "admin noscript loading stale", "connection", "Sets this connection's no-evict flag, ON or OFF.", cmd_client_sub, 0, 0, 0 },
	{ "client|pause", -3, "admin noscript loading stale", "connection", "Holds clients' commands (ALL) or their writes (WRITE) for a while.", cmd_client_sub, 0, 0, 0 },
	{ "client|reply", 3, "noscript loading stale", "connection", "Turns replies to this connection on, off, or off for the next command only.", cmd_client_sub, 0, 0, 0 },
	{ "client|setinfo", 4, "noscript loading stale", "connection", "Takes a client library's name or version, checks it and keeps nothing.", cmd_client_sub, 0, 0, 0 },
	{ "client|setname", 3, "noscript loading stale", "connection", "Names the connection (CLIENT LIST shows it).", cmd_client_sub, 0, 0, 0 },
	{ "client|tracking", -3, "noscript loading stale", "connection", "Client-side caching: keys this connection reads are invalidated when they change.", cmd_client_sub, 0, 0, 0 },
	{ "client|trackinginfo", 2, "noscript loading stale", "connection", "This connection's tracking: its flags, redirection and BCAST prefixes.", cmd_client_sub, 0, 0, 0 },
	{ "client|unblock", -3, "admin noscript loading stale", "connection", "Wakes a connection waiting in a blocking command; 0 when it is not waiting.", cmd_client_sub, 0, 0, 0 },
	{ "client|unpause", 2, "admin noscript loading stale", "connection", "Ends the client pause: the held commands run.", cmd_client_sub, 0, 0, 0 },
	{ 0 }
};

/* ------------------------------------------------- the normal class's output limit */

struct kv_outlimit kv_normal_limit = { .cls = "normal" };

/* Connections over the soft limit: few (none unless the class is set and
 * a client stops reading), looked at each pass. */
static struct soft_ref {
	struct worker *w;
	uint32_t conn;
	uint64_t id;                    /* its CLIENT ID (a slot is reused) */
} *soft;
static uint32_t nsoft, capsoft;

void kv_normal_limit_check(struct resp_ctx *x)
{
	struct kv_resp_conn *kc = x->sc;
	if (x->r->state == R_DEAD || x->r->pubsub || kv_repl_is_replica(x))
		return;
	uint64_t q = paste_port_conn_queued(x->w->port, x->conn);
	bool was = kc->out_soft_since != 0;
	if (kv_outlimit_over(&kv_normal_limit, q, x->w->now_ms, &kc->out_soft_since)) {
		char peer[80], local[80];
		int fd;
		resp_conn_addr(x, peer, local, sizeof(peer), &fd);
		fprintf(stderr, "pkvs: client id=%" PRIu64 " addr=%s closed for overcoming of output "
			"buffer limits (%" PRIu64 " bytes unsent)\n", x->r->id, peer, q);
		resp_drop(x);
		return;
	}
	if (!was && kc->out_soft_since &&
	    !kv_vec_grow((void **)&soft, &capsoft, nsoft + 1, sizeof(*soft)))
		soft[nsoft++] = (struct soft_ref){ x->w, x->conn, x->r->id };
}

void kv_normal_limit_pass(struct worker *w)
{
	for (uint32_t i = 0; i < nsoft;) {
		struct resp_ctx x;
		if (soft[i].w != w) {
			i++;
			continue;
		}
		bool live = resp_ctx_of(&x, w, soft[i].conn) && x.r->id == soft[i].id;
		if (live)
			kv_normal_limit_check(&x);      /* drained, dropped, or still waiting */
		if (!live || x.r->state == R_DEAD || !((struct kv_resp_conn *)x.sc)->out_soft_since)
			soft[i] = soft[--nsoft];
		else
			i++;
	}
}

/* ------------------------------------- clients' memory, client eviction */

static struct {
	uint64_t bytes;                 /* maxmemory-clients in bytes, or */
	uint32_t pct;                   /* in % of maxmemory */
	uint64_t evicted;               /* INFO evicted_clients */
} climit;
bool kv_clients_limit_on;

void kv_clients_limit_set(const char *p, size_t n)
{
	uint64_t v = 0;
	climit.pct = 0;
	climit.bytes = 0;
	if (n && p[n - 1] == '%')
		climit.pct = (uint32_t)strtoul(p, NULL, 10);
	else if (kv_mem_value(p, n, &v))
		climit.bytes = v;
	kv_clients_limit_on = climit.pct || climit.bytes;
}

uint64_t kv_clients_evicted(bool reset)
{
	uint64_t n = climit.evicted;
	if (reset)
		climit.evicted = 0;
	return n;
}

uint64_t kv_clients_memory(struct resp_ctx *x)
{
	struct server_totals tt;
	server_totals(x->w, &tt);
	struct resp_pending rp;
	resp_pending_info(x, &rp);
	uint64_t repl = kv_repl_active ? kv_repl_queued() : 0;
	/* Kept where the eviction loop and the peak read it (kv_evict.h). */
	kv_evict_clients = (tt.port.queued > repl ? tt.port.queued - repl : 0) + rp.bytes;
	return kv_evict_clients;
}

struct evictable {
	uint32_t conn;
	uint64_t id, mem;
};

static int by_mem_desc(const void *a, const void *b)
{
	uint64_t x = ((const struct evictable *)a)->mem, y = ((const struct evictable *)b)->mem;
	return x < y ? 1 : x > y ? -1 : 0;
}

void kv_clients_evict(struct resp_ctx *x)
{
	uint64_t limit = climit.pct ? kv_config_maxmemory() / 100 * climit.pct : climit.bytes;
	uint64_t total;
	if (!limit || (total = kv_clients_memory(x)) <= limit)
		return;
	struct worker *w = x->w;
	struct evictable *e = malloc((size_t)w->nopen * sizeof(*e));
	if (!e)
		return;
	uint32_t n = 0;
	for (uint32_t i = 0; i < w->nopen; i++) {
		struct resp_ctx o;
		if (!resp_ctx_of(&o, w, w->open[i]) || o.r->no_evict ||
		    (kv_repl_active && kv_repl_is_replica(&o)))
			continue;
		e[n++] = (struct evictable){ o.conn, o.r->id, kv_client_memory(&o) };
	}
	qsort(e, n, sizeof(*e), by_mem_desc);
	for (uint32_t i = 0; i < n && total > limit; i++) {
		struct resp_ctx o;
		if (!resp_ctx_of(&o, w, e[i].conn) || o.r->id != e[i].id)
			continue;
		total = total > e[i].mem ? total - e[i].mem : 0;
		climit.evicted++;
		resp_drop(&o);
	}
	free(e);
}
