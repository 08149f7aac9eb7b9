/*
 * test_port_commit_hold.c - sizing of group commits (uring, fsync on
 * /var/tmp): after a commit ends, the next waits for the connections it
 * answered to come back (3/4 as many events as it covered), at most
 * commit_hold_us; -1 never waits. A held commit starts by its deadline
 * even when nothing arrives: the pass does not sleep past it, whatever
 * timeout the app gave paste_port_poll.
 * Without io_uring the test is skipped (77).
 */
#include "port_fixture.h"

#define NCLI 4

struct fix {
	struct pf_store s;
	struct paste_persist *p;
	struct paste_port *pt;
	int cli[NCLI];
	uint32_t slot[NCLI];
	int got[NCLI];            /* requests seen per client */
};

static int fix_open(struct fix *f, int32_t hold_us)
{
	memset(f, 0, sizeof(*f));
	if (pf_store_open(&f->s, "/var/tmp", "hold", 8 << 20))
		return -1;
	struct paste_persist_config pc = { .mode = PASTE_DUR_FSYNC };
	struct paste_error err = { 0 };
	if (paste_persist_open(&f->p, f->s.st, &pc, &err)) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	paste_store_start(f->s.st);
	struct paste_port_config c = { .engine = PASTE_ENGINE_URING, .ring_bufs = 16, .max_conns = 16,
				       .store = f->s.st, .persist = f->p, .commit_hold_us = hold_us };
	return (f->pt = pf_port_open(&c)) ? 0 : -1;
}

static void fix_close(struct fix *f)
{
	for (int i = 0; i < NCLI; i++)
		if (f->cli[i] > 0)
			close(f->cli[i]);
	paste_port_close(f->pt);
	paste_persist_close(f->p);
	pf_store_close(&f->s);
}

/* One pass as an app that stores every request: flush (something to make
 * durable) and a durable reply of the request's byte. */
static void serve(struct fix *f, int ms)
{
	struct paste_event *evs;
	int n = paste_port_poll(f->pt, &evs, ms);
	for (int i = 0; i < n; i++) {
		if (evs[i].type != PASTE_EV_DATA || !evs[i].len)
			continue;
		int c = evs[i].data[0] - 'a';
		if (c < 0 || c >= NCLI)
			continue;
		f->slot[c] = evs[i].conn;
		f->got[c]++;
		uint8_t *b = paste_store_buf(f->s.st, evs[i].buf) + evs[i].off;
		paste_persist_flush(f->p, b, evs[i].len);
		CHECK_EQ(paste_port_send(f->pt, evs[i].conn, evs[i].data, 1, PASTE_SEND_DURABLE), 0);
	}
}

static uint64_t commits(struct fix *f)
{
	struct paste_port_stats ps;
	paste_port_stats(f->pt, &ps);
	return ps.commits;
}

/* Serve with poll timeout ms until client c's reply is readable (or 5 s);
 * returns seconds waited from `from`, reads the reply. */
static double serve_until_reply(struct fix *f, int c, int ms, double from)
{
	char b;
	while (pf_now_s() - from < 5) {
		struct pollfd pfd = { f->cli[c], POLLIN, 0 };
		if (poll(&pfd, 1, 0) == 1) {
			CHECK_EQ(read(f->cli[c], &b, 1), 1);
			CHECK_EQ(b, 'a' + c);
			return pf_now_s() - from;
		}
		serve(f, ms);
	}
	CHECK(0);
	return 5;
}

static void send_req(struct fix *f, int c)
{
	char b = (char)('a' + c);
	CHECK_EQ(write(f->cli[c], &b, 1), 1);
}

/* Every client sends and gets its reply: one round of commits. */
static void round_all(struct fix *f)
{
	double t0 = pf_now_s();
	for (int c = 0; c < NCLI; c++)
		send_req(f, c);
	for (int c = 0; c < NCLI; c++)
		serve_until_reply(f, c, 50, t0);
}

static int fix_start(struct fix *f, int32_t hold_us)
{
	if (fix_open(f, hold_us))
		return -1;
	for (int c = 0; c < NCLI; c++)
		if ((f->cli[c] = pf_client(paste_port_local_port(f->pt))) < 0)
			return -1;
	/* Two rounds: the second's commit covers the NCLI requests alone
	 * (no accepts), which sets the count the next commit waits for. */
	round_all(f);
	round_all(f);
	return 0;
}

/* One client sends, then (while the loop keeps serving) two more 20 ms
 * later: 3 of the 4 the last commit covered. Held: one commit answers
 * all three, well before the 200 ms deadline. Never held (-1): the first
 * is committed alone. */
static void test_hold_until_clients_return(int32_t hold_us)
{
	struct fix f;
	if (fix_start(&f, hold_us)) {
		CHECK(0);
		fix_close(&f);
		return;
	}
	uint64_t before = commits(&f);
	double t0 = pf_now_s();
	send_req(&f, 0);
	while (pf_now_s() - t0 < 0.02)
		serve(&f, 1);
	struct pollfd pfd = { f.cli[0], POLLIN, 0 };
	bool early = poll(&pfd, 1, 0) == 1;
	send_req(&f, 1);
	send_req(&f, 2);
	double w0 = serve_until_reply(&f, 0, 50, t0);
	double w1 = serve_until_reply(&f, 1, 50, t0);
	double w2 = serve_until_reply(&f, 2, 50, t0);
	if (hold_us > 0) {
		CHECK(!early);
		CHECK(w0 < 0.15 && w1 < 0.15 && w2 < 0.15);
		CHECK_EQ(commits(&f) - before, 1);
	} else {
		CHECK(early);            /* answered alone, before the others sent */
		CHECK(commits(&f) - before >= 2);
	}
	fix_close(&f);
}

/* One client of the four sends and nobody else: the commit waits out its
 * 200 ms and then starts, although the app polls with a 2 s timeout. */
static void test_hold_deadline(void)
{
	struct fix f;
	if (fix_start(&f, 200000)) {
		CHECK(0);
		fix_close(&f);
		return;
	}
	double t0 = pf_now_s();
	send_req(&f, 3);
	double w = serve_until_reply(&f, 3, 2000, t0);
	CHECK(w >= 0.15);
	CHECK(w < 1.0);
	if (w < 0.15 || w >= 1.0)
		fprintf(stderr, "  held reply after %.3f s (deadline 0.2 s)\n", w);
	fix_close(&f);
}

/* Out of range is refused. */
static void test_hold_range(void)
{
	struct pf_store s;
	if (pf_store_open(&s, "/dev/shm", "holdr", 4 << 20)) {
		CHECK(0);
		return;
	}
	struct paste_port *pt = NULL;
	struct paste_error err = { 0 };
	struct paste_port_config c = { .engine = PASTE_ENGINE_URING, .store = s.st,
				       .commit_hold_us = 1000001 };
	CHECK_EQ(paste_port_open(&pt, &c, &err), -EINVAL);
	CHECK(strstr(err.msg, "commit_hold_us") != NULL);
	c.commit_hold_us = -2;
	CHECK_EQ(paste_port_open(&pt, &c, &err), -EINVAL);
	pf_store_close(&s);
}

int main(void)
{
	if (!pf_uring_usable())
		return pf_done(false);
	test_hold_range();
	test_hold_until_clients_return(200000);
	test_hold_until_clients_return(-1);
	test_hold_deadline();
	return pf_done(true);
}
