/*
 * pkvs.c - the persistent key-value server: main() only. One B+tree in
 * the packet store (services/kv.c), served in one thread over two front
 * ends on two ports of one paste port:
 *
 *   server/http.c + services/pkvs_http.c   PUT/GET/HEAD/DELETE /kv/<key>, GET /kv?...
 *   server/resp.c + services/pkvs_resp.c   the Redis protocol (RESP2, RESP3)
 *
 * Scale out by sharding: several pkvs behind twemproxy (README, "Growing
 * to several instances").
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "options.h"
#include "kv_acl.h"
#include "kv_notify.h"
#include "pkvs_resp.h"

#define PKVS_DEFAULT_STORE "/dev/shm/pkvs.store"
#define MAX_TIMEOUT 1000000u
/* What one unfinished command may hold (--max-request): a bulk load's
 * RPUSH, SADD, HSET, MSET or GEOADD of a few hundred thousand elements
 * (a SET's value streams into the store instead, whatever its size). */
#define PKVS_MAX_REQUEST (64u << 20)
/* Its arguments: more than Redis's clients send in one command. */
#define PKVS_MAX_ARGS (1u << 20)
/* What all unfinished commands may hold together (--max-request-total):
 * two commands of the default --max-request, or ~120 of 1 MiB, at once
 * (docs/design.md, "Memory per client"). */
#define PKVS_MAX_PENDING (128ull << 20)


/* "off", or a port number. */
static int parse_port(const char *name, const char *v, bool *on, uint16_t *port)
{
	if (!strcmp(v, "off")) {
		*on = false;
		return 0;
	}
	uint64_t p;
	if (opt_u64("pkvs", name, v, 0, 65535, false, &p))
		return -1;
	*on = true;
	*port = (uint16_t)p;
	return 0;
}

int main(int argc, char **argv)
{
	struct server_config sc = {
		.name = "pkvs", .host = "127.0.0.1", .threads = 1,
		.store_path = PKVS_DEFAULT_STORE, .ring_bufs = 4096, .max_conns = 4096,
		.cpu = -1, .header_to_ms = 60000, .body_to_ms = 60000, .idle_to_ms = 0,
		.defer_accept_s = SRV_DEFER_ACCEPT_S, .max_output = PASTE_PORT_MAX_OUTPUT,
		.mode = "kv", .mode_note = "",
	};
	static struct kv_handle kvh = { .cfg = { .max_value = 0 } };
	struct http_config hc = { .max_body = 1ull << 30, .service = &pkvs_http_service,
				  .service_cfg = &kvh };
	/* Bulks up to Redis's 512 MiB are read: one over the value limit is
	 * streamed, dropped and refused with an error, not a closed connection. */
	struct resp_config rc = { .parser = { .max_bulk = 512ull << 20,
					      .max_command = PKVS_MAX_REQUEST,
					      .max_args = PKVS_MAX_ARGS },
				  .max_pending = PKVS_MAX_PENDING,
				  .service = &pkvs_resp_service, .service_cfg = &kvh,
				  .server_name = "pkvs", .version = PKVS_REDIS_VERSION };
	/* One password and protected mode for both front ends (server/auth.h). */
	static struct srv_auth auth = { .protected_mode = true };
	rc.auth = &auth;
	hc.auth = &auth;
	sc.peer_addrs = true;
	const char *requirepass = NULL, *notify = NULL, *aclfile = NULL;
	/* maxmemory and its settings, read as CONFIG SET reads them. */
	static const char *const evict_names[] = { "maxmemory", "maxmemory-policy", "maxmemory-samples",
						   "lfu-log-factor", "lfu-decay-time",
						   "maxmemory-clients" };
	const char *evict[6] = { 0 };
	auth.users = &kv_acl_users;           /* ACL users (services/kv_acl.c) */
	int protected_mode = 1;
	static const struct opt_choice yes_no[] = { { "yes", 1 }, { "no", 0 }, { NULL, 0 } };
	const char *http_port = "8080", *resp_port = "6379";
	uint64_t max_value = 0;
	/* Defaults, then $PKVS_STORE, then --config FILE, then the command
	 * line: each overrides the one before. */
	const char *env_store = getenv("PKVS_STORE");
	if (env_store && *env_store)
		sc.store_path = env_store;
	const struct opt opts[] = {
		OPT_CONFIG_("config", "options from FILE, 'name = value' a line (the command line wins)"),
		OPT_STR_("host", "ADDR", &sc.host, "listen address (default 127.0.0.1; ::1 works)"),
		OPT_STR_("http-port", "N|off", &http_port, "HTTP front end port (default 8080; 0 picks a free one)"),
		OPT_STR_("resp-port", "N|off", &resp_port, "Redis-protocol port (default 6379; 0 picks a free one)"),
		OPT_CHOICE_("engine", "E", &sc.engine, opt_engines,
			    "uring (default), epoll-batch (where io_uring is refused) or epoll"),
		OPT_STR_("store", "PATH", &sc.store_path,
			 "packet store file (default $PKVS_STORE, else " PKVS_DEFAULT_STORE ")"),
		OPT_SIZE_("store-size", "SIZE", &sc.store_size, 1ull << 40,
			  "size when creating the store (default 256M; K/M/G)"),
		OPT_NUM_("buf-size", "N", &sc.buf_size, 0, 65536,
			 "buffer bytes when creating (default 2048)"),
		OPT_SIZE_("node-size", "SIZE", &sc.node_size, 1ull << 40,
			  "tree node area when creating (default 1/8 of the store; ~64 B per small key, x2 for checkpoints)"),
		OPT_CHOICE_("durability", "MODE", &sc.durability, opt_durabilities,
			    "auto (default), pmem, emulated, fsync or none"),
		OPT_NUM_("pm-latency", "NS", &sc.pm_latency_ns, 0, 1000000000,
			 "emulated PM: busy wait per fence (the paper: 10000)"),
		OPT_FLAG_("copy", &kvh.cfg.copy, "copy values into fresh buffers instead of holding them"),
		OPT_NUM_("databases", "N", &kvh.cfg.databases, 1, KV_MAX_DBS,
			 "databases for SELECT, SWAPDB and MOVE (default 16, at most 64)"),
		OPT_SIZE_("max-value", "SIZE", &max_value, 1ull << 40,
			  "largest value (default and cap: 512M, Redis's proto-max-bulk-len)"),
		OPT_NUM_("checkpoint-records", "N", &kvh.cfg.tree.ckpt_records, 0, 1u << 30,
			 "checkpoint the tree after N log records (default 65536)"),
		OPT_NUM_("checkpoint-ms", "MS", &kvh.cfg.tree.ckpt_ms, 0, 3600000,
			 "... or MS after the first change since the last one (default 1000)"),
		OPT_NUM_("clean-free-pct", "PCT", &kvh.cfg.tree.clean_free_pct, 1, 100,
			 "the cleaner runs while fewer than PCT % of the store's buffers are free (default 20)"),
		OPT_NUM_("clean-live-pct", "PCT", &kvh.cfg.tree.clean_live_pct, 1, 100,
			 "... and empties buffers whose live values fill under PCT % (default 80)"),
		OPT_FLAG_("no-clean", &kvh.cfg.tree.no_clean, "no cleaner: sparse buffers stay as they are"),
		OPT_FLAG_("no-point-index", &kvh.cfg.tree.no_point_index,
			  "no DRAM hash of keys <= 32 bytes: GETs descend the tree (saves ~85-170 B per key)"),
		OPT_NUM_("max-conns", "N", &sc.max_conns, 1, 1u << 20,
			 "connection slots (default 4096); one more is answered an error and closed"),
		OPT_SIZE_("max-output", "SIZE", &sc.max_output, 1ull << 40,
			  "unsent replies a client may have before it is no longer read (default 64M; 0: no limit)"),
		{ "max-request", "SIZE", "bytes one unfinished command may hold (default 64M; at most 1G)",
		  OPT_SIZE, &rc.parser.max_command, sizeof(rc.parser.max_command), 1024, 1u << 30, 1, NULL },
		OPT_SIZE_("max-request-total", "SIZE", &rc.max_pending, 1ull << 40,
			  "bytes all unfinished commands may hold together (default 128M; 0: no bound)"),
		OPT_NUM_("ring-bufs", "N", &sc.ring_bufs, 1, 1u << 20, "receive buffers posted (default 4096)"),
		OPT_SECS_("header-timeout", "S", &sc.header_to_ms, MAX_TIMEOUT,
			  "a command or request head must arrive within S s (default 60; 0 off)"),
		OPT_SECS_("body-timeout", "S", &sc.body_to_ms, MAX_TIMEOUT,
			  "at most S s between the bytes of a value (default 60; 0 off)"),
		OPT_SECS_("idle-timeout", "S", &sc.idle_to_ms, MAX_TIMEOUT,
			  "close connections idle for S s (default 0: never, as Redis)"),
		OPT_FLAG_("busy-poll", &sc.busy_poll, "never sleep in the kernel"),
		OPT_NUM_("defer-accept", "S", &sc.defer_accept_s, 0, SRV_DEFER_ACCEPT_MAX_S,
			 "accept a connection once it sends data, or after ~S s (default 1; 0: off)"),
		OPT_NUM_("commit-hold-us", "N", &sc.commit_hold_us, 1, 1000000,
			 "fsync: a commit waits up to N us for the last one's clients (default: half its time, <= 500)"),
		OPT_FLAG_("no-commit-hold", &sc.no_commit_hold,
			  "fsync: start each group commit at once"),
		OPT_NUM_("cpu", "N", &sc.cpu, 0, 4095, "pin the server thread to CPU N"),
		OPT_STR_("requirepass", "PASS", &requirepass,
			 "clients must AUTH with PASS (HTTP: Basic or Bearer); CONFIG SET changes it"),
		OPT_STR_("aclfile", "PATH", &aclfile,
			 "ACL users from PATH at start (ACL LOAD and ACL SAVE use it too)"),
		OPT_CHOICE_("protected-mode", "yes|no", &protected_mode, yes_no,
			    "without a password, refuse clients not on loopback (default yes, as Redis)"),
		OPT_STR_("notify-keyspace-events", "CLASSES", &notify,
			 "keyspace notifications, Redis's letters (KEA: all; default none); CONFIG SET changes it"),
		OPT_STR_("maxmemory", "BYTES", &evict[0],
			 "bound on the dataset (INFO used_memory), Redis's units (100mb; default 0: none)"),
		OPT_STR_("maxmemory-policy", "POLICY", &evict[1],
			 "noeviction (default: writes refused over maxmemory), allkeys-lru|lfu|random, volatile-lru|lfu|random|ttl"),
		OPT_STR_("maxmemory-samples", "N", &evict[2], "keys sampled per eviction choice (default 5)"),
		OPT_STR_("lfu-log-factor", "N", &evict[3], "the LFU counter's logarithm factor (default 10)"),
		OPT_STR_("lfu-decay-time", "MIN", &evict[4], "minutes per step the LFU counter decays (default 1)"),
		OPT_STR_("maxmemory-clients", "BYTES|N%", &evict[5],
			 "close the clients holding the most while their buffers pass this (default 0: never)"),
	};
	int r = opt_parse(sc.name, opts, (int)(sizeof(opts) / sizeof(opts[0])),
			  "One thread serves both front ends (the tree has one owner); run several\n"
			  "pkvs behind twemproxy (nutcracker) to use more cores or machines.\n"
			  SRV_EXIT_HELP,
			  argc, argv);
	if (r)
		return r > 0 ? 0 : 2;
	bool http_on, resp_on;
	uint16_t hp = 0, rp = 0;
	if (parse_port("http-port", http_port, &http_on, &hp) ||
	    parse_port("resp-port", resp_port, &resp_on, &rp))
		return 2;
	if (!http_on && !resp_on) {
		fprintf(stderr, "pkvs: --http-port off and --resp-port off: nothing to serve\n");
		return 2;
	}
	kvh.cfg.max_value = max_value;
	auth.protected_mode = protected_mode;
	for (int i = 0; i < 6; i++) {
		const char *why;
		if (evict[i] && kv_config_preset(evict_names[i], evict[i], &why)) {
			fprintf(stderr, "pkvs: --%s %s: %s\n", evict_names[i], evict[i], why);
			return 2;
		}
	}
	if (notify) {
		int fl = kv_notify_parse(notify, strlen(notify));
		if (fl < 0) {
			fprintf(stderr, "pkvs: --notify-keyspace-events %s: a letter is none of "
				"Redis's classes 'Ag$lshzxeKEtmdn'\n", notify);
			return 2;
		}
		kv_notify_set(NULL, (uint32_t)fl);
	}
	if (requirepass && *requirepass && srv_auth_set(&auth, requirepass, strlen(requirepass))) {
		fprintf(stderr, "pkvs: out of memory\n");
		return 1;
	}
	char aclerr[512];
	if (kv_acl_start(aclfile, aclerr, sizeof(aclerr))) {
		fprintf(stderr, "pkvs: --aclfile %s: %s\n", aclfile, aclerr);
		return 2;
	}
	for (int i = 1; i < argc; i++)        /* INFO config_file */
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			kv_config_file = argv[i + 1];
		else if (!strncmp(argv[i], "--config=", 9))
			kv_config_file = argv[i] + 9;
	if (http_on)
		sc.listen[sc.nlisten++] = (struct server_listener){ "http", hp, &http_proto, &hc };
	if (resp_on)
		sc.listen[sc.nlisten++] = (struct server_listener){ "resp", rp, &resp_proto, &rc };

	struct server *s;
	int code = server_open(&s, &sc);
	if (code)
		return code;
	return server_close(s, server_run(s));
}
