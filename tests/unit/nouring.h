/*
 * nouring.h - for the tests of what runs where io_uring is refused (a
 * sysctl, or a seccomp policy such as a container runtime's default): one
 * call that makes this process's io_uring_setup fail with ENOSYS, as such
 * a policy does. Irreversible, so call it in a forked child.
 */
#ifndef PASTE_TEST_NOURING_H
#define PASTE_TEST_NOURING_H

#include <errno.h>
#include <stddef.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

/* 0, or -1 when the filter could not be installed. */
static inline int refuse_io_uring(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return -1;
	return 0;
}

#endif
