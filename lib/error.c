/* error.c - the one way errors carry a sentence back to the user. */
#include <stdarg.h>
#include <stdio.h>
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
