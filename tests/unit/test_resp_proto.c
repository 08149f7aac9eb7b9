/*
 * test_resp_proto.c - server/resp.c's look ahead, driven through
 * server/server.c with a recording RESP service over a real port, both
 * engines: before it runs a command, the protocol hands the service the
 * key of the command after it (resp_service.prefetch), in a pipeline, after
 * a streamed value's CRLF, and across the batch's connections
 * (server_proto.peek); never bytes that are not a command's start (a
 * value's middle, or the next event of the connection being handled,
 * whose state is still the one before that event).
 *
 * The record is "pf:<key>;" for each prefetch, "begin:<key>;" when a
 * value starts streaming and "run:<key>;" when a command runs.
 */
#include "server_fixture.h"
#include "resp.h"

static char rec[16384];
static size_t rec_len;

static void note(const char *what, const char *p, size_t n)
{
	int k = snprintf(rec + rec_len, sizeof(rec) - rec_len, "%s:%.*s;", what, (int)n, p);
	if (k > 0 && (size_t)k < sizeof(rec) - rec_len)
		rec_len += (size_t)k;
}

static void rec_reset(void)
{
	rec_len = 0;
	rec[0] = 0;
}

static char stream_key[64];
static size_t stream_klen;

static void rec_command(struct resp_ctx *x, const struct paste_resp_arg *argv, uint32_t argc)
{
	note("run", argc > 1 ? argv[1].p : "", argc > 1 ? argv[1].len : 0);
	resp_ok(x);
}

static bool rec_split(const struct paste_resp_arg *argv, uint32_t argc)
{
	return argc == 3 && paste_resp_arg_eq(&argv[0], "SET");
}

static int rec_begin(struct resp_ctx *x, const struct paste_resp_arg *argv, uint32_t argc,
		     const char **why)
{
	(void)x;
	(void)why;
	stream_klen = argc > 1 && argv[1].len < sizeof(stream_key) ? argv[1].len : 0;
	memcpy(stream_key, argv[1].p, stream_klen);
	note("begin", stream_key, stream_klen);
	return 0;
}

static void rec_data(struct resp_ctx *x, const struct paste_event *ev, uint32_t off, uint32_t len)
{
	(void)x, (void)ev, (void)off, (void)len;
}

static void rec_end(struct resp_ctx *x)
{
	note("run", stream_key, stream_klen);
	resp_ok(x);
}

static void rec_closed(struct resp_ctx *x)
{
	(void)x;
}

static void rec_prefetch(void *ss, void *sc, const char *key, size_t klen)
{
	(void)ss, (void)sc;
	note("pf", key, klen);
}

static const struct resp_service rec_service = {
	.base = { .name = "rec" },
	.command = rec_command,
	.stream_begin = rec_begin,
	.stream_data = rec_data,
	.stream_split = rec_split,
	.stream_end = rec_end,
	.closed = rec_closed,
	.prefetch = rec_prefetch,
};
static const struct resp_config rec_cfg = { .service = &rec_service, .server_name = "test",
					     .version = "0" };
/* fx_open names the mode from an HTTP config before adjust swaps in RESP. */
static const struct http_service name_only = { .base = { .name = "rec" } };
static const struct http_config name_cfg = { .service = &name_only };

static void use_resp(struct server_config *sc)
{
	sc->proto = &resp_proto;
	sc->proto_cfg = &rec_cfg;
	sc->buf_size = 2048;     /* the value below is laid out against it */
}

/* Pump until n "+OK\r\n" replies came on fd. */
static bool oks(struct fixture *f, int fd, int n)
{
	char buf[4096];
	size_t want = 5u * (size_t)n, got = fx_read(f, fd, buf, sizeof(buf), want, 3000, NULL);
	bool ok = got == want;
	for (size_t i = 0; ok && i < got; i += 5)
		ok = !memcmp(buf + i, "+OK\r\n", 5);
	return ok;
}

/* Send in[0..n) on fd; the replies are n_ok "+OK" and the record is want. */
static void expect(struct fixture *f, int fd, const char *in, size_t n, int n_ok, const char *want)
{
	rec_reset();
	fx_send(fd, in, n);
	CHECK(oks(f, fd, n_ok));
	if (strcmp(rec, want))
		fprintf(stderr, "  want %s\n  got  %s\n", want, rec);
	CHECK(!strcmp(rec, want));
}

static size_t get_cmd(char *out, const char *key)
{
	return (size_t)sprintf(out, "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", strlen(key), key);
}

/* Six GETs in one write (one event): each command's key is prefetched
 * just before the command ahead of it runs. */
static void test_pipeline(struct fixture *f)
{
	int fd = fx_client(f);
	char in[256];
	size_t n = 0;
	const char *keys[] = { "a", "bb", "c", "dd", "e", "f" };
	for (int i = 0; i < 6; i++)
		n += get_cmd(in + n, keys[i]);
	expect(f, fd, in, n, 6, "pf:bb;run:a;pf:c;run:bb;pf:dd;run:c;pf:e;run:dd;pf:f;run:e;run:f;");
	close(fd);
}

/* A streamed SET whose value spans three receive buffers, then a GET, in
 * one write. The value is made of 32-byte GET commands for "qqq...", one
 * starting at each buffer's first byte: the server must not take those
 * bytes (a later event of the connection it is handling, whose state is
 * still the one before) for a command. The GET after the value is
 * prefetched once the value's CRLF is in, before the SET runs. */
static void test_stream(struct fixture *f)
{
	int fd = fx_client(f);
	static char in[8192];
	static const char fake[] = "*2\r\n$3\r\nGET\r\n$12\r\nqqqqqqqqqqqq\r\n";
	CHECK_EQ(sizeof(fake) - 1, 32);
	size_t head = (size_t)sprintf(in, "*3\r\n$3\r\nSET\r\n$6\r\nkkkkkk\r\n$4992\r\n");
	CHECK_EQ(head, 32);   /* so every 2048-byte buffer starts with a fake command */
	for (size_t i = 0; i < 4992; i += 32)
		memcpy(in + head + i, fake, 32);
	size_t n = head + 4992;
	n += (size_t)sprintf(in + n, "\r\n");
	n += get_cmd(in + n, "z");
	/* A first command, so that the connection's receive is armed and the
	 * three buffers of the next write arrive in one batch. */
	char first[64];
	fx_send(fd, first, get_cmd(first, "y"));
	CHECK(oks(f, fd, 1));
	expect(f, fd, in, n, 2, "begin:kkkkkk;pf:z;run:kkkkkk;run:z;");
	close(fd);
}

/* Two connections' GETs in one batch: the second event's key is
 * prefetched before the first event's command runs. A round where the two
 * did not land in one pass proves nothing and is tried again. The epoll
 * baseline hands over one connection per poll (port_epoll.c), so there
 * nothing is ever looked up ahead across connections; epoll-batch hands
 * over every ready one, as uring does. */
static void test_across(struct fixture *f, bool batches)
{
	int a = fx_client(f), b = fx_client(f);
	int seen = 0;
	for (int round = 0; round < 50 && seen < 3; round++) {
		char ka[16], kb[16], in[64], ra[16], rb[16];
		snprintf(ka, sizeof(ka), "a%d", round);
		snprintf(kb, sizeof(kb), "b%d", round);
		rec_reset();
		fx_send(a, in, get_cmd(in, ka));
		fx_send(b, in, get_cmd(in, kb));
		usleep(2000);        /* both are in before the pass */
		CHECK(oks(f, a, 1));
		CHECK(oks(f, b, 1));
		snprintf(ra, sizeof(ra), "run:%s;", ka);
		snprintf(rb, sizeof(rb), "run:%s;", kb);
		/* Whatever the order, a prefetch names the command that runs
		 * after the next one, and comes before both. */
		char want_ab[96], want_ba[96];
		snprintf(want_ab, sizeof(want_ab), "pf:%s;%s%s", kb, ra, rb);
		snprintf(want_ba, sizeof(want_ba), "pf:%s;%s%s", ka, rb, ra);
		bool two = !strcmp(rec, want_ab) || !strcmp(rec, want_ba);
		bool apart = (!strcmp(rec, "") || strstr(rec, "pf:") == NULL);
		if (!two && !apart)
			fprintf(stderr, "  across: %s\n", rec);
		CHECK(two || apart);
		if (getenv("VERBOSE"))
			fprintf(stderr, "  round %d: %s\n", round, rec);
		seen += two;
	}
	CHECK(batches ? seen >= 1 : seen == 0);
	close(a);
	close(b);
}

static void run_engine(enum paste_engine e)
{
	struct fixture f;
	if (fx_open(&f, e, &name_cfg, "resp-ahead", use_resp)) {
		CHECK(!"server open");
		return;
	}
	test_pipeline(&f);
	test_stream(&f);
	test_across(&f, e != PASTE_ENGINE_EPOLL);
	fx_close(&f);
}

int main(void)
{
	run_engine(PASTE_ENGINE_URING);
	run_engine(PASTE_ENGINE_EPOLL);
	run_engine(PASTE_ENGINE_EPOLL_BATCH);
	return check_done();
}
