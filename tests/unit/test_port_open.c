/*
 * test_port_open.c - a uring port whose open fails part way (too few
 * descriptors for the direct-descriptor table, more ring buffers than the
 * store has free: the error says what to change and every buffer taken
 * goes back), and the batch-wait knobs of paste_port_config (min_wait_us
 * over 1 s refused; min_wait off with a divisor of 1 still serves; the
 * old environment knob ignored). Shared helpers: port_fixture.h.
 * Without io_uring nothing runs and the exit status is 77 (skip).
 */
#include <sys/resource.h>
#include <sys/wait.h>

#include "port_fixture.h"

static struct paste_store *st;

/* Too few descriptors for the direct-descriptor table: the error names
 * the limit to raise, and every buffer taken so far goes back. */
static void open_low_nofile(void)
{
	uint32_t before = paste_store_nfree(st);
	struct rlimit low = { 64, 64 };
	setrlimit(RLIMIT_NOFILE, &low);
	struct paste_port_config c = { .ring_bufs = 16, .max_conns = 4096, .store = st };
	struct paste_port *pt = NULL;
	struct paste_error err = { 0 };
	CHECK(paste_port_open(&pt, &c, &err) < 0);
	CHECK(strstr(err.msg, "RLIMIT_NOFILE") != NULL);
	CHECK(pt == NULL);
	CHECK_EQ(paste_store_nfree(st), before);
}

static void test_open_fails(void)
{
	check_in_child("RLIMIT_NOFILE 64", NULL, NULL, open_low_nofile);
	/* more ring buffers than the store has free */
	uint32_t before = paste_store_nfree(st);
	struct paste_port_config c = { .ring_bufs = 32768, .max_conns = 16, .store = st };
	struct paste_port *pt = NULL;
	struct paste_error err = { 0 };
	CHECK_EQ(paste_port_open(&pt, &c, &err), -ENOSPC);
	CHECK(strstr(err.msg, "free buffers") != NULL);
	CHECK_EQ(paste_store_nfree(st), before);
}

/* The batch-wait knobs are config fields (0 = default) and the
 * environment is ignored: PASTE_WANT_DIV=0 must not divide by zero. */
static void wait_knobs_env(void)
{
	setenv("PASTE_WANT_DIV", "0", 1);
	struct paste_port *pt = pf_open_port(st, PASTE_ENGINE_URING, 16, 16);
	CHECK(pt != NULL);
	if (!pt)
		return;
	int fd = pf_client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pf_pump(pt, &s, 5, false);   /* waits with a connection open */
	CHECK_EQ(s.accepts, 1);
	close(fd);
	pf_pump(pt, &s, 3, false);
	paste_port_close(pt);
}

static void test_wait_knobs(void)
{
	check_in_child("PASTE_WANT_DIV=0", NULL, NULL, wait_knobs_env);
	struct paste_port_config c = { .ring_bufs = 16, .max_conns = 16, .store = st,
				       .min_wait_us = 2000000 };
	struct paste_port *pt = NULL;
	struct paste_error err = { 0 };
	CHECK_EQ(paste_port_open(&pt, &c, &err), -EINVAL);
	CHECK(strstr(err.msg, "min_wait_us") != NULL);
	/* min_wait off, a divisor of 1: still one request, one reply */
	c.min_wait_us = 0;
	c.no_min_wait = true;
	c.want_div = 1;
	CHECK_EQ(paste_port_open(&pt, &c, &err), 0);
	int fd = pf_client(paste_port_local_port(pt));
	struct seen s = { 0 };
	pf_pump(pt, &s, 3, false);
	CHECK(write(fd, "x", 1) == 1);
	pf_pump(pt, &s, 3, false);
	CHECK_EQ(paste_port_send(pt, s.last_conn, "y", 1, 0), 0);
	pf_pump(pt, &s, 2, false);
	char b;
	CHECK_EQ(pf_read_all(fd, &b, 1, 1000), 1);
	close(fd);
	pf_pump(pt, &s, 3, false);
	paste_port_close(pt);
}

int main(void)
{
	bool uring = pf_uring_usable();
	struct pf_store s;
	if (pf_store_open(&s, "/dev/shm", "port-open", 8 << 20))
		return 1;
	st = s.st;
	paste_store_start(st);
	if (uring) {
		test_open_fails();
		test_wait_knobs();
	}
	pf_store_close(&s);
	return pf_done(uring);
}
