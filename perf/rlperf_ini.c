/*
 * rlperf_ini.c - fio's job file format: [section] headers, then one option
 * per line as key=value or a bare key; ';' and '#' start a comment
 * anywhere on a line (fio cuts there too, so a value cannot hold them);
 * ${VAR} in a value is replaced by the environment variable VAR (empty when
 * unset), as fio does. Knows nothing of what the options mean: each
 * section goes to a callback, which rlperf_opts.c supplies.
 *
 * Where rlperf is stricter than fio: a header must end with ']' (fio drops
 * the last character, whatever it is), blanks around '=' are ignored (fio
 * keeps them in the value, so "size= 4k" reads as 4 there), "include" is
 * refused.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rlperf.h"

#define INI_MAX_BYTES (16u << 20)   /* no job file is near this */

struct section {
	const char *path;
	char *name;
	unsigned line;
	struct rp_ini_opt *opts;
	size_t n, cap;
};

static int ini_fail(char *err, size_t errlen, const char *path, unsigned line,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int ini_fail(char *err, size_t errlen, const char *path, unsigned line,
		    const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(err, errlen, "rlperf: %s:%u: ", path, line);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < errlen)
		vsnprintf(err + n, errlen - n, fmt, ap);
	va_end(ap);
	return -1;
}

/* The whole file, NUL-terminated; NULL with the reason in err. Opened
 * O_NONBLOCK so that a FIFO is refused at once, not waited on forever. */
static char *read_file(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	struct stat st;
	char *buf = NULL;
	const char *why = NULL;
	size_t n = 0;

	if (!f) {
		snprintf(err, errlen, "rlperf: unable to open '%s' job file: %s", path,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (st.st_size > INI_MAX_BYTES)
		why = "job file larger than 16 MiB";
	else if (!(buf = malloc((size_t)st.st_size + 1)))
		why = "out of memory";
	else if ((n = fread(buf, 1, (size_t)st.st_size, f)) != (size_t)st.st_size)
		why = "read error";
	if (why) {
		snprintf(err, errlen, "rlperf: %s: %s", path, why);
		free(buf);
		buf = NULL;
	} else {
		buf[n] = '\0';
	}
	fclose(f);
	return buf;
}

/* Cuts comments and blanks around the line; returns its start. */
static char *trim_line(char *p)
{
	char *end;

	while (isspace((unsigned char)*p))
		p++;
	end = p + strcspn(p, ";#");
	while (end > p && (isspace((unsigned char)end[-1]) || iscntrl((unsigned char)end[-1])))
		end--;
	*end = '\0';
	return p;
}

/* value with ${VAR} expanded, allocated; NULL when out of memory */
static char *expand_env(const char *v)
{
	size_t cap = strlen(v) + 1, n = 0;
	char *out = malloc(cap);

	while (out && *v) {
		const char *close = v[0] == '$' && v[1] == '{' ? strchr(v, '}') : NULL;
		const char *add = v, *val;
		size_t len = 1;

		if (close) {
			char name[256];

			snprintf(name, sizeof(name), "%.*s", (int)(close - v - 2), v + 2);
			val = getenv(name);
			add = val ? val : "";
			len = strlen(add);
			v = close + 1;
		} else {
			v++;
		}
		if (n + len + 1 > cap) {
			char *bigger = realloc(out, cap = n + len + 1 + cap);

			if (!bigger) {
				free(out);
				return NULL;
			}
			out = bigger;
		}
		memcpy(out + n, add, len);
		n += len;
	}
	if (out)
		out[n] = '\0';
	return out;
}

static void section_clear(struct section *s)
{
	for (size_t i = 0; i < s->n; i++)
		free((char *)s->opts[i].val);
	s->n = 0;
}

/* Adds "key[=value]" (trimmed, in place) to s. */
static int add_opt(struct section *s, char *p, unsigned line, char *err, size_t errlen)
{
	char *eq = strchr(p, '='), *key_end = eq ? eq : p + strlen(p);
	struct rp_ini_opt *o;

	while (key_end > p && isspace((unsigned char)key_end[-1]))
		key_end--;
	*key_end = '\0';
	if (!*p)
		return ini_fail(err, errlen, s->path, line, "'=' without an option name");
	if (rp_grow((void **)&s->opts, &s->cap, s->n + 1, sizeof(*s->opts)))
		return ini_fail(err, errlen, s->path, line, "out of memory");
	o = &s->opts[s->n];
	o->key = p;
	o->line = line;
	o->val = NULL;
	if (eq) {
		eq++;
		while (isspace((unsigned char)*eq))
			eq++;
		o->val = expand_env(eq);
		if (!o->val)
			return ini_fail(err, errlen, s->path, line, "out of memory");
	}
	s->n++;
	return 0;
}

static int flush(struct section *s, rp_ini_fn fn, void *user, char *err, size_t errlen)
{
	int rc = 0;

	if (s->name)
		rc = fn(user, s->name, s->line, s->opts, s->n, err, errlen);
	section_clear(s);
	return rc;
}

/* One trimmed, non-empty line. */
static int ini_line(struct section *s, char *p, unsigned line, rp_ini_fn fn,
		    void *user, char *err, size_t errlen)
{
	size_t len = strlen(p);
	int rc;

	if (p[0] == '[') {
		if (len < 3 || p[len - 1] != ']')
			return ini_fail(err, errlen, s->path, line, "bad section header "
					"'%s' (expected [name])", p);
		rc = flush(s, fn, user, err, errlen);
		if (rc)
			return rc;
		p[len - 1] = '\0';
		s->name = p + 1;
		s->line = line;
		return 0;
	}
	if (!strncmp(p, "include", 7) && (isspace((unsigned char)p[7]) || !p[7]))
		return ini_fail(err, errlen, s->path, line, "include is not supported "
				"by rlperf");
	if (!s->name)
		return ini_fail(err, errlen, s->path, line, "option <%s> outside of [] "
				"job section", p);
	return add_opt(s, p, line, err, errlen);
}

int rp_ini_parse(const char *path, rp_ini_fn fn, void *user, char *err, size_t errlen)
{
	struct section s = { .path = path };
	char *buf = read_file(path, err, errlen), *p, *next;
	unsigned line = 0;
	int rc = 0;

	if (!buf)
		return -1;
	for (p = buf; p && !rc; p = next) {
		next = strchr(p, '\n');
		if (next)
			*next++ = '\0';
		line++;
		p = trim_line(p);
		if (*p)
			rc = ini_line(&s, p, line, fn, user, err, errlen);
	}
	if (!rc)
		rc = flush(&s, fn, user, err, errlen);
	if (!rc && !s.name) {
		snprintf(err, errlen, "rlperf: %s: no [job] section", path);
		rc = -1;
	}
	section_clear(&s);
	free(s.opts);
	free(buf);
	return rc;
}
