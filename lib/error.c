/* error.c - the one way errors carry a sentence back to the user. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "paste.h"

int paste_error_set(struct paste_error *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
		err->code = code;
	}
	return code;
}

void paste_error_append(struct paste_error *err, const char *fmt, ...)
{
	if (!err)
		return;
	size_t used = strnlen(err->msg, sizeof(err->msg));
	if (used + 3 >= sizeof(err->msg))
		return;
	if (used) {
		memcpy(err->msg + used, "; ", 3);
		used += 2;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg + used, sizeof(err->msg) - used, fmt, ap);
	va_end(ap);
}

int paste_exit_status(int err)
{
	switch (-err) {
	case 0:
		return PASTE_EXIT_OK;
	case EBADMSG:
		return PASTE_EXIT_DAMAGED;
	case EBUSY:
		return PASTE_EXIT_IN_USE;
	case EINVAL: case EPROTO: case ENODEV: case EOPNOTSUPP: case ERANGE: case E2BIG:
	case ENAMETOOLONG: case ENOENT: case ENOTDIR:
		return PASTE_EXIT_USAGE;
	case EIO: case ENOSPC: case EDQUOT: case EFBIG: case EROFS: case EACCES: case EPERM:
	case ENXIO: case ESTALE:
		return PASTE_EXIT_IO;
	default:
		return PASTE_EXIT_FAILURE;
	}
}
