/*
 * util.c - leaf helpers every engine file may call (and that call nothing
 * of the engine back): notes, the first error of a run, back-off, names.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "eng_int.h"
#include "util.h"

void eng_backoff(uint32_t attempt)
{
	/* The first retries go at once (a transient refusal clears fast);
	 * then 10 us doubling up to 320 us, so a thousand retries span about
	 * a third of a second rather than microseconds. */
	struct timespec ts = { 0, 0 };

	if (attempt <= 2)
		return;
	ts.tv_nsec = 10000L << CM_MIN(attempt - 3, 5u);
	nanosleep(&ts, NULL);
}

void eng_text_note(char *s, size_t size, const char *text, size_t len)
{
	char one[sizeof(((struct eng_stats *)0)->fallbacks)];
	size_t n = strlen(s);

	snprintf(one, sizeof(one), "%.*s", (int)len, text);
	if (!one[0] || strstr(s, one))
		return;
	if (n && n + 2 < size) {
		memcpy(s + n, "; ", 3);
		n += 2;
	}
	if (n + 1 < size)
		snprintf(s + n, size - n, "%s", one);
}

void eng_note(struct eng_batch *b, uint32_t flag, const char *fmt, ...)
{
	char text[sizeof(b->st->fallbacks)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	/* Workers note the same refusal each: keep it once. */
	pthread_mutex_lock(&b->note_lock);
	b->st->fallback_flags |= flag;
	eng_text_note(b->st->fallbacks, sizeof(b->st->fallbacks), text, strlen(text));
	pthread_mutex_unlock(&b->note_lock);
}

int eng_fail(struct eng_batch *b, int code, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&b->lock);
	if (!b->err) {
		b->err = code;
		va_start(ap, fmt);
		cm_err_vset(b->e, code, fmt, ap);
		va_end(ap);
	}
	/* Release: the error is set before any worker sees the flag (they
	 * read it again under the lock or after the join). */
	atomic_store_explicit(&b->failed, 1, memory_order_release);
	/* Workers waiting for bytes and the calling thread waiting for the
	 * others look again. */
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
	return code;
}

const char *eng_ring_nomem_reason(const char *release)
{
	unsigned major = 0, minor = 0;

	/* Until 5.12 io_uring charged its rings to RLIMIT_MEMLOCK; since,
	 * to the memory cgroup, so ENOMEM there means the kernel or the
	 * cgroup is out of memory. */
	if (sscanf(release, "%u.%u", &major, &minor) == 2 &&
	    (major < 5 || (major == 5 && minor < 12)))
		return "ring memory counts against RLIMIT_MEMLOCK before Linux 5.12";
	return "the kernel could not allocate the ring's memory (memory cgroup limit?)";
}

int eng_thread_start(pthread_t *t, size_t stack, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	int ret = pthread_attr_init(&attr);

	if (ret)
		return ret;
	/* Our threads need little stack; glibc keeps up to 40 MiB of the
	 * stacks of finished threads mapped for reuse, 8 MiB each by
	 * default, which a runtime sees as memory the load left behind. */
	if (pthread_attr_setstacksize(&attr, stack))
		pthread_attr_setstacksize(&attr, 8u << 20);
	ret = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return ret;
}
