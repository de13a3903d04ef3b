/* err.c - the per-handle error record. */
#include <stdio.h>
#include <string.h>

#include "common.h"

int cm_err_vset(struct cm_err *e, int code, const char *fmt, va_list ap)
{
	if (!e)
		return code;
	e->code = code;
	if (vsnprintf(e->msg, sizeof(e->msg), fmt, ap) >= (int)sizeof(e->msg)) {
		size_t at = sizeof(e->msg) - 4;

		/* no UTF-8 sequence cut in two: its lead byte goes too */
		while (at > 0 && ((unsigned char)e->msg[at] & 0xc0) == 0x80)
			at--;
		memcpy(e->msg + at, "...", 4);
	}
	/* One line: callers print it as is. */
	for (char *c = e->msg; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	return code;
}

int cm_err_set(struct cm_err *e, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cm_err_vset(e, code, fmt, ap);
	va_end(ap);
	return code;
}

void cm_err_clear(struct cm_err *e)
{
	e->code = 0;
	e->msg[0] = '\0';
}
