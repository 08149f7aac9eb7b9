/* error.c - the one way errors carry a sentence back to the user. */
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
