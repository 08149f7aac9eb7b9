/*
 * phttpd.c - the PASTE HTTP server: main() only. The options fill the
 * configs of three layers, and --mode picks the service:
 *
 *   server/server.c   threads, one paste port each, signals, timeouts,
 *                     the failed store           (struct server_config)
 *   server/http.c     HTTP framing and replies    (struct http_config)
 *   services/rpc.c    a fixed reply (the paper's first figure)
 *   services/log.c    the durable log (its second)
 *
 * A new service is a line in `modes` and one in `mode_names` below (see
 * docs/design.md, "Adding a service").
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "http.h"
#include "options.h"
#include "server.h"
#include "services.h"

#define MAX_TIMEOUT 1000000u     /* seconds (11.5 days): more is a typo */
#define MAX_MIN_WAIT_US 1000000u /* paste_port_config.min_wait_us: the port refuses more */
#define MAX_WANT_DIV 1048576u    /* the most slots a port has: more waits for none */

static struct rpc_config rpc_cfg = { .body_len = 64 };
static struct log_config wal_cfg = { .max_held = 1 << 20 };

/* --mode: mode_names[i].value indexes modes[]. */
static const struct {
	const struct http_service *svc;
	const void *cfg;
} modes[] = {
	{ &rpc_service, &rpc_cfg },
	{ &log_service, &wal_cfg },
};
static const struct opt_choice mode_names[] = { { "rpc", 0 }, { "wal", 1 }, { NULL, 0 } };


int main(int argc, char **argv)
{
	struct server_config sc = {
		.name = "phttpd", .host = "127.0.0.1", .port = 60000, .threads = 1,
		.store_path = PASTE_DEFAULT_STORE_PATH, .ring_bufs = 4096, .max_conns = 16384,
		.node_size = PASTE_STORE_NO_NODES,   /* no tree: every buffer for the log */
		.cpu = -1, .header_to_ms = 60000, .body_to_ms = 60000, .idle_to_ms = 75000,
		.defer_accept_s = SRV_DEFER_ACCEPT_S, .proto = &http_proto,
		.max_output = PASTE_PORT_MAX_OUTPUT,
	};
	struct http_config hc = { .max_body = 1 << 20 };
	int mode = 0;
	/* Defaults, then $PASTE_STORE (paste-store's too), then --config FILE,
	 * then the command line: each overrides the one before. */
	const char *env_store = getenv("PASTE_STORE");
	if (env_store && *env_store)
		sc.store_path = env_store;
	const struct opt opts[] = {
		OPT_CONFIG_("config", "options from FILE, 'name = value' a line (the command line wins)"),
		OPT_STR_("host", "ADDR", &sc.host, "listen address (default 127.0.0.1; ::1 works)"),
		OPT_NUM_("port", "N", &sc.port, 0, 65535, "listen port (default 60000; 0 picks a free one)"),
		OPT_NUM_("threads", "N", &sc.threads, 1, PASTE_MAX_LANES,
			 "worker threads, one ring + SO_REUSEPORT listener each (default 1)"),
		OPT_CHOICE_("engine", "uring|epoll-batch|epoll", &sc.engine, opt_engines,
			    "paste port, the socket API batched (where io_uring is refused), "
			    "or its one-connection-a-poll baseline (default uring)"),
		OPT_CHOICE_("mode", "rpc|wal", &mode, mode_names,
			    "fixed replies, or the durable log (default rpc)"),
		OPT_NUM_("body-len", "N", &rpc_cfg.body_len, 0, 1 << 20, "RPC reply body bytes (default 64)"),
		OPT_STR_("store", "PATH", &sc.store_path,
			 "packet store (default $PASTE_STORE, else " PASTE_DEFAULT_STORE_PATH ")"),
		OPT_SIZE_("store-size", "SIZE", &sc.store_size, 1ull << 40,
			  "size when creating, K/M/G suffixes (default 256M)"),
		OPT_NUM_("buf-size", "N", &sc.buf_size, 0, 65536, "buffer bytes when creating (default 2048)"),
		OPT_CHOICE_("durability", "MODE", &sc.durability, opt_durabilities,
			    "auto|pmem|emulated|fsync|none (default auto)"),
		OPT_NUM_("pm-latency", "NS", &sc.pm_latency_ns, 0, 1000000000,
			 "emulated PM latency per fence (default 0)"),
		OPT_FLAG_("copy", &wal_cfg.copy, "WAL: copy bodies into fresh buffers instead of logging in place"),
		OPT_NUM_("max-body", "N", &hc.max_body, 0, 1ull << 40,
			 "largest Content-Length accepted (default 1048576)"),
		OPT_SIZE_("max-held", "SIZE", &wal_cfg.max_held, 1ull << 40,
			  "store bytes one unfinished body may pin, K/M/G (default 1M; 0 no limit)"),
		OPT_SECS_("header-timeout", "S", &sc.header_to_ms, MAX_TIMEOUT,
			  "seconds to send a request head, else 408 (default 60; 0 off)"),
		OPT_SECS_("body-timeout", "S", &sc.body_to_ms, MAX_TIMEOUT,
			  "seconds between body reads, else 408 (default 60; 0 off)"),
		OPT_SECS_("idle-timeout", "S", &sc.idle_to_ms, MAX_TIMEOUT,
			  "seconds a keep-alive connection may wait (default 75; 0 off)"),
		OPT_NUM_("ring-bufs", "N", &sc.ring_bufs, 0, 32768,
			 "provided buffers per thread, power of two (default 4096)"),
		OPT_NUM_("max-conns", "N", &sc.max_conns, 1, 1u << 20,
			 "connection slots per thread (default 16384); one more is answered 503 and closed"),
		OPT_SIZE_("max-output", "SIZE", &sc.max_output, 1ull << 40,
			  "unsent replies a connection may have before it is no longer read (default 64M; 0: no limit)"),
		OPT_FLAG_("busy-poll", &sc.busy_poll, "never sleep in the kernel"),
		OPT_NUM_("defer-accept", "S", &sc.defer_accept_s, 0, SRV_DEFER_ACCEPT_MAX_S,
			 "accept a connection once it sends data, or after ~S s (default 1; 0: off)"),
		/* Batch waiting (uring; for tuning): 0 would mean the port's
		 * default, so the flags take 1 and up. */
		OPT_NUM_("min-wait-us", "N", &sc.min_wait_us, 1, MAX_MIN_WAIT_US,
			 "uring, Linux >= 6.12: a pass settles for what came after N us (default 50)"),
		OPT_NUM_("want-div", "N", &sc.want_div, 1, MAX_WANT_DIV,
			 "uring: a pass waits for 1/N of the open connections, at most 64 (default 4)"),
		OPT_FLAG_("no-min-wait", &sc.no_min_wait,
			  "uring: a pass waits for one completion, no min_wait timer"),
		OPT_NUM_("commit-hold-us", "N", &sc.commit_hold_us, 1, 1000000,
			 "fsync: a commit waits up to N us for the last one's clients (default: half its time, <= 500)"),
		OPT_FLAG_("no-commit-hold", &sc.no_commit_hold,
			  "fsync: start each group commit at once"),
		OPT_NUM_("cpu", "N", &sc.cpu, 0, 4095, "pin thread i to CPU N+i"),
	};
	int r = opt_parse(sc.name, opts, (int)(sizeof(opts) / sizeof(opts[0])),
			  SRV_EXIT_HELP,
			  argc, argv);
	if (r)
		return r > 0 ? 0 : 2;
	hc.service = modes[mode].svc;
	hc.service_cfg = modes[mode].cfg;
	sc.proto_cfg = &hc;
	sc.mode = hc.service->base.name;
	sc.mode_note = wal_cfg.copy ? ", copy mode" : "";

	struct server *s;
	int code = server_open(&s, &sc);
	if (code)
		return code;
	/* Checked in every mode: a value that cannot work is a usage error
	 * even where it is not used. */
	uint32_t bs = paste_store_geom(s->store)->buf_size;
	if (wal_cfg.max_held && wal_cfg.max_held < bs) {
		fprintf(stderr, "phttpd: --max-held %" PRIu64 " is less than one %u-byte store buffer\n",
			wal_cfg.max_held, bs);
		return server_close(s, 2);
	}
	return server_close(s, server_run(s));
}
