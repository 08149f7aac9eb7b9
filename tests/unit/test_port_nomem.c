/*
 * test_port_nomem.c - output that cannot be queued or described, on both
 * engines: a reply missing from the middle of a stream closes the
 * connection after what was queued before it (never a later reply in its
 * place); no memory for more iovecs sends fewer; no memory for any iovec
 * ends the connection instead of leaving its output stuck; a send over
 * 2 GiB is refused (its queue's doubling once wrapped to 0 and spun).
 *
 * Allocation failures come from linking with -Wl,--wrap=realloc (the
 * output queues are the only reallocs on these paths): __wrap_realloc
 * fails requests of exactly fail_size bytes, or of more than fail_over.
 * Shared helpers: port_fixture.h.
 */
#include <sys/uio.h>

#include "port_fixture.h"

void *__real_realloc(void *p, size_t n);
static size_t fail_size, fail_over, failed;

void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n)
{
	if ((fail_size && n == fail_size) || (fail_over && n > fail_over)) {
		failed++;
		return NULL;
	}
	return __real_realloc(p, n);
}

static struct paste_store *st;

struct link {
	struct paste_port *pt;
	int fd;
	uint32_t conn;
	struct seen s;
};

static int link_open(struct link *l, enum paste_engine e)
{
	memset(l, 0, sizeof(*l));
	l->pt = pf_open_port(st, e, 16, 16);
	if (!l->pt)
		return -1;
	l->fd = pf_client(paste_port_local_port(l->pt));
	for (int i = 0; i < 50 && !l->s.accepts; i++)
		pf_pump(l->pt, &l->s, 1, false);
	CHECK_EQ(l->s.accepts, 1);
	l->conn = l->s.last_conn;
	return l->s.accepts == 1 ? 0 : -1;
}

static void link_close(struct link *l)
{
	close(l->fd);
	pf_pump(l->pt, &l->s, 3, false);
	paste_port_close(l->pt);
	fail_size = fail_over = 0;
	failed = 0;
}

/* The client's next read within 2 s is end-of-file. */
static bool client_eof(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };
	char c;
	return poll(&p, 1, 2000) == 1 && read(fd, &c, 1) == 0;
}

/* A store buffer holding one byte, ch. */
static uint32_t byte_buf(char ch)
{
	uint32_t b = PASTE_NO_BUF;
	CHECK_EQ(paste_store_alloc(st, &b, 1), 1u);
	paste_store_buf(st, b)[0] = (uint8_t)ch;
	return b;
}

/* No reply pins b any more (the connection is closed): give it back. */
static void buf_done(uint32_t b)
{
	CHECK_EQ(paste_store_refcount(st, b), 1u);
	paste_store_unref(st, b, false);
}

/* Queue "cs" pairs times: a copied byte, then store buffer b's byte.
 * Copies and store segments alternate, so none merge: 2 * pairs segments. */
static void queue_pairs(struct link *l, uint32_t b, int pairs)
{
	for (int i = 0; i < pairs; i++) {
		CHECK_EQ(paste_port_send(l->pt, l->conn, "c", 1, 0), 0);
		CHECK_EQ(paste_port_send_store(l->pt, l->conn, b, 0, 1, 0), 0);
	}
}

/* A copied reply that cannot be queued: what came before it leaves, then
 * the connection closes; nothing queued after it is sent. */
static void test_send_nomem(enum paste_engine e)
{
	struct link l;
	if (link_open(&l, e))
		return;
	CHECK_EQ(paste_port_send(l.pt, l.conn, "a", 1, 0), 0);
	char big[100];
	memset(big, 'b', sizeof(big));
	fail_size = 128;            /* the byte queue's growth from 8 */
	CHECK_EQ(paste_port_send(l.pt, l.conn, big, sizeof(big), 0), -ENOMEM);
	fail_size = 0;
	CHECK_EQ(failed, 1u);
	CHECK(paste_port_conn_sending(l.pt, l.conn));
	CHECK_EQ(paste_port_send(l.pt, l.conn, "c", 1, 0), -ENOTCONN);
	pf_pump(l.pt, &l.s, 5, false);
	char got[8] = { 0 };
	CHECK_EQ(pf_read_all(l.fd, got, 1, 2000), 1);
	CHECK_EQ(got[0], 'a');
	CHECK(client_eof(l.fd));
	CHECK_EQ(l.s.closes, 1);
	link_close(&l);
}

/* A store reply whose segment cannot be queued: the same, and the buffer
 * is not pinned by the reply that was never queued. */
static void test_send_store_nomem(enum paste_engine e)
{
	struct link l;
	if (link_open(&l, e))
		return;
	uint32_t b = byte_buf('s');
	queue_pairs(&l, b, 4);
	CHECK_EQ(paste_store_refcount(st, b), 5u);
	fail_over = 8 * 12;         /* the segment array's growth past 8 */
	CHECK_EQ(paste_port_send_store(l.pt, l.conn, b, 0, 1, 0), -ENOMEM);
	fail_over = 0;
	CHECK_EQ(paste_store_refcount(st, b), 5u);
	CHECK_EQ(paste_port_send(l.pt, l.conn, "x", 1, 0), -ENOTCONN);
	pf_pump(l.pt, &l.s, 5, false);
	char got[16] = { 0 };
	CHECK_EQ(pf_read_all(l.fd, got, 8, 2000), 8);
	CHECK(memcmp(got, "cscscscs", 8) == 0);
	CHECK(client_eof(l.fd));
	CHECK_EQ(l.s.closes, 1);
	link_close(&l);
	buf_done(b);
}

/* No memory to grow the iovec array from 8: the send carries 8 and the
 * rest follows; the connection stays open. */
static void test_iov_fewer(enum paste_engine e)
{
	struct link l;
	if (link_open(&l, e))
		return;
	CHECK_EQ(paste_port_send(l.pt, l.conn, "0", 1, 0), 0);
	pf_pump(l.pt, &l.s, 2, false);          /* iovecs: 8 of them now */
	char got[32] = { 0 };
	CHECK_EQ(pf_read_all(l.fd, got, 1, 2000), 1);
	uint32_t b = byte_buf('s');
	queue_pairs(&l, b, 6);
	fail_size = 16 * sizeof(struct iovec);
	pf_pump(l.pt, &l.s, 5, false);
	fail_size = 0;
	CHECK(failed >= 1);
	CHECK_EQ(pf_read_all(l.fd, got, 12, 2000), 12);
	CHECK(memcmp(got, "cscscscscscs", 12) == 0);
	CHECK_EQ(l.s.closes, 0);
	CHECK_EQ(paste_port_send(l.pt, l.conn, "z", 1, 0), 0);   /* still open */
	pf_pump(l.pt, &l.s, 2, false);
	CHECK_EQ(pf_read_all(l.fd, got, 1, 2000), 1);
	CHECK_EQ(got[0], 'z');
	link_close(&l);
	buf_done(b);
}

/* No memory for a first iovec: the connection ends (its output cannot
 * leave) rather than keeping the reply queued forever. */
static void test_iov_none(enum paste_engine e)
{
	struct link l;
	if (link_open(&l, e))
		return;
	CHECK_EQ(paste_port_send(l.pt, l.conn, "r", 1, 0), 0);
	fail_size = 8 * sizeof(struct iovec);
	pf_pump(l.pt, &l.s, 3, false);
	fail_size = 0;
	CHECK_EQ(failed, 1u);
	CHECK_EQ(l.s.closes, 1);
	CHECK(client_eof(l.fd));
	link_close(&l);
}

/* Over 2 GiB in one queue: refused with -ENOMEM (the wrap refuses over
 * 1 GiB; a 32-bit doubling from 2^31 wrapped to 0 and never returned),
 * and over 4 GiB with -E2BIG; both close the connection. p is never
 * read: the queue cannot grow. */
static void test_huge(enum paste_engine e)
{
	struct link l;
	if (link_open(&l, e))
		return;
	static const char small[16];
	fail_over = (size_t)1 << 30;
	CHECK_EQ(paste_port_send(l.pt, l.conn, small, ((size_t)1 << 31) + 16, 0), -ENOMEM);
	CHECK_EQ(failed, 1u);
	link_close(&l);
	if (link_open(&l, e))
		return;
	CHECK_EQ(paste_port_send(l.pt, l.conn, "a", 1, 0), 0);
	CHECK_EQ(paste_port_send(l.pt, l.conn, small, (size_t)UINT32_MAX, 0), -E2BIG);
	CHECK_EQ(paste_port_send(l.pt, l.conn, "b", 1, 0), -ENOTCONN);
	pf_pump(l.pt, &l.s, 5, false);
	char got[4] = { 0 };
	CHECK_EQ(pf_read_all(l.fd, got, 1, 2000), 1);
	CHECK_EQ(got[0], 'a');
	CHECK(client_eof(l.fd));
	link_close(&l);
}

static void run(enum paste_engine e)
{
	test_send_nomem(e);
	test_send_store_nomem(e);
	test_iov_fewer(e);
	test_iov_none(e);
	test_huge(e);
}

int main(void)
{
	bool uring = pf_uring_usable();
	struct pf_store s;
	if (pf_store_open(&s, "/dev/shm", "port-nomem", 8 << 20))
		return 1;
	st = s.st;
	paste_store_start(st);
	if (uring)
		run(PASTE_ENGINE_URING);
	run(PASTE_ENGINE_EPOLL);
	run(PASTE_ENGINE_EPOLL_BATCH);
	pf_store_close(&s);
	return pf_done(uring);
}
