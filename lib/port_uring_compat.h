/*
 * port_uring_compat.h - the liburing calls the uring engine makes that
 * Debian bookworm's liburing 2.3 lacks or gets wrong, each behind a
 * compile-time version check: built against a liburing that has the
 * helper, the helper is used; against 2.3, the hand-written equivalent.
 * Both produce the same SQEs and the same io_uring_enter calls.
 *
 * The version: liburing >= 2.4 installs liburing/io_uring_version.h
 * (IO_URING_VERSION_MAJOR/MINOR, included by liburing.h); 2.3 has none,
 * and meson.build requires >= 2.3, so no header means 2.3.
 *
 *   helper                                   since  2.3 fallback
 *   io_uring_prep_accept_direct(ALLOC)       2.4    prep_accept + file_index
 *   io_uring_setup_buf_ring/free_buf_ring    2.4    mmap + register + init
 *   IOU_PBUF_RING_INC, IORING_CQE_F_BUF_MORE 2.8    the kernel ABI's values;
 *     io_uring_buf_reg.flags                        2.3 calls it pad
 *   io_uring_submit_and_wait_min_timeout     2.8    publish SQ tail, enter2
 *   IORING_FEAT_MIN_TIMEOUT, getevents_arg   2.8    the kernel ABI, spelled out
 *     .min_wait_usec (io_uring.h)
 */
#ifndef PASTE_PORT_URING_COMPAT_H
#define PASTE_PORT_URING_COMPAT_H

#include <errno.h>
#include <liburing.h>
#include <sys/mman.h>

#ifdef IO_URING_VERSION_MAJOR
#define PASTE_LIBURING_MAJOR IO_URING_VERSION_MAJOR
#define PASTE_LIBURING_MINOR IO_URING_VERSION_MINOR
#else
#define PASTE_LIBURING_MAJOR 2
#define PASTE_LIBURING_MINOR 3
#endif
/* (liburing's own IO_URING_CHECK_VERSION(M, m) is true when the library is
 * OLDER than M.m, and 2.3 does not have it.) */
#define PASTE_LIBURING_AT_LEAST(M, m) \
	(PASTE_LIBURING_MAJOR > (M) || (PASTE_LIBURING_MAJOR == (M) && PASTE_LIBURING_MINOR >= (m)))

/* Linux 6.12: provided buffers consumed incrementally; a completion whose
 * buffer the kernel will write more of says so. */
#ifndef IOU_PBUF_RING_INC
#define IOU_PBUF_RING_INC 2
#endif
#ifndef IORING_CQE_F_BUF_MORE
#define IORING_CQE_F_BUF_MORE (1U << 4)
#endif

/* Linux 6.12: io_uring_getevents_arg.min_wait_usec is honoured. */
#ifndef IORING_FEAT_MIN_TIMEOUT
#define IORING_FEAT_MIN_TIMEOUT (1U << 15)   /* io_uring.h of liburing >= 2.8 */
#endif

/* A one-shot accept into a direct descriptor the kernel picks. liburing
 * 2.3's io_uring_prep_accept_direct stores file_index + 1, which turns
 * IORING_FILE_INDEX_ALLOC (~0U) into 0, a plain accept; 2.4 special-cases
 * ALLOC. (io_uring_prep_multishot_accept_direct was right already in 2.3.) */
static inline void uring_prep_accept_alloc(struct io_uring_sqe *sqe, int fd)
{
#if PASTE_LIBURING_AT_LEAST(2, 4)
	io_uring_prep_accept_direct(sqe, fd, NULL, NULL, 0, IORING_FILE_INDEX_ALLOC);
#else
	io_uring_prep_accept(sqe, fd, NULL, NULL, 0);
	sqe->file_index = IORING_FILE_INDEX_ALLOC;   /* the kernel wants the value itself */
#endif
}

/* The provided-buffer ring: nb entries in anonymous memory (the kernel
 * refuses it inside a file mapping on ext4), registered as group bgid
 * with flags (IOU_PBUF_RING_INC or 0), empty. Returns it, or NULL with
 * *err = -errno, *what naming the step that failed and *hint what may
 * help ("" or a kernel version). */
static inline struct io_uring_buf_ring *uring_buf_ring_setup(struct io_uring *ring, uint32_t nb,
							      uint16_t bgid, unsigned flags, int *err,
							      const char **what, const char **hint)
{
	*hint = " (Linux >= 5.19)";
#if PASTE_LIBURING_AT_LEAST(2, 4)
	/* 2.4: io_uring_setup_buf_ring (newer versions may let the kernel
	 * allocate the ring: IOU_PBUF_RING_MMAP) */
	*what = "setting up the provided-buffer ring";
	return io_uring_setup_buf_ring(ring, nb, bgid, flags, err);
#else
	size_t bytes = (size_t)nb * sizeof(struct io_uring_buf);
	struct io_uring_buf_ring *br = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
					    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (br == MAP_FAILED) {
		*err = -errno;
		*what = "mmap of the buffer ring";
		*hint = "";
		return NULL;
	}
	/* 2.3 calls the kernel's flags field "pad". */
	struct io_uring_buf_reg reg = { .ring_addr = (uintptr_t)br, .ring_entries = nb, .bgid = bgid,
					.pad = (uint16_t)flags };
	io_uring_buf_ring_init(br);
	int r = io_uring_register_buf_ring(ring, &reg, 0);
	if (r < 0) {
		munmap(br, bytes);
		*err = r;
		*what = "registering the provided-buffer ring";
		return NULL;
	}
	return br;
#endif
}

/* Before io_uring_queue_exit: 2.4's io_uring_free_buf_ring unregisters
 * (one more io_uring_register at close) and unmaps. With 2.3 the memory is
 * ours: unmapping it while registered is safe (the kernel has the pages
 * pinned until the ring is torn down). */
static inline void uring_buf_ring_free(struct io_uring *ring, struct io_uring_buf_ring *br,
				       uint32_t nb, uint16_t bgid)
{
#if PASTE_LIBURING_AT_LEAST(2, 4)
	if (io_uring_free_buf_ring(ring, br, nb, bgid) < 0)
		munmap(br, (size_t)nb * sizeof(struct io_uring_buf));  /* 2.4's own munmap */
#else
	(void)ring; (void)bgid;
	munmap(br, (size_t)nb * sizeof(struct io_uring_buf));
#endif
}

/* Submit everything queued and wait for wait_nr completions, but let the
 * kernel settle for what arrived once min_wait_us passed (Linux 6.12,
 * IORING_FEAT_MIN_TIMEOUT: the caller checks), or ts passed. One
 * io_uring_enter; returns its result (-ETIME: timed out). */
static inline int uring_submit_and_wait_min(struct io_uring *ring, unsigned wait_nr,
					    struct __kernel_timespec *ts, unsigned min_wait_us)
{
#if PASTE_LIBURING_AT_LEAST(2, 8)
	/* 2.8's helper passes min_wait_usec only with a timeout (without one
	 * it enters without EXT_ARG and would wait for all of wait_nr): a
	 * wait without a timeout takes the path below. */
	if (ts) {
		struct io_uring_cqe *cqe;
		return io_uring_submit_and_wait_min_timeout(ring, &cqe, wait_nr, ts, min_wait_us, NULL);
	}
	struct io_uring_getevents_arg arg = {
		.min_wait_usec = min_wait_us,
		.ts = (uint64_t)(uintptr_t)ts,
	};
#else
	/* io_uring_getevents_arg as Linux 6.12 has it (2.3 calls the field pad) */
	struct {
		uint64_t sigmask;
		uint32_t sigmask_sz;
		uint32_t min_wait_usec;
		uint64_t ts;
	} arg = {
		.min_wait_usec = min_wait_us,
		.ts = (uint64_t)(uintptr_t)ts,
	};
#endif
	/* What io_uring_submit_and_wait_timeout does: publish the SQ tail,
	 * then one enter with the extended argument. */
	struct io_uring_sq *sq = &ring->sq;
	unsigned tail = sq->sqe_tail;
	if (sq->sqe_head != tail) {
		sq->sqe_head = tail;
		io_uring_smp_store_release(sq->ktail, tail);
	}
	unsigned to_submit = tail - IO_URING_READ_ONCE(*sq->khead);
	return io_uring_enter2((unsigned)ring->ring_fd, to_submit, wait_nr,
			       IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
			       (sigset_t *)&arg, sizeof(arg));   /* liburing's wrappers return -errno */
}

#endif
