/*
 * checksums.c - the public SHA-256 (common/sha256.c, the digest loads
 * compute on the read path) and the one SHA256SUMS parser: the CLI's
 * --sha256-file and Python's sha256= read sums files through it, so a
 * line means the same to both, and the same message names its file and
 * line.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/common.h"
#include "../common/sha256.h"
#include "integrity.h"

#define SUMS_MAX_BYTES (16 << 20) /* a sums file past this is not one */
#define HASH_CHUNK (8 << 20)

/* ------------------------------------------------------------------ */
/* SHA-256                                                             */

struct rl_sha256 {
	struct cm_sha256 *c;    /* the library's one SHA-256 (common/sha256.c) */
};

rl_sha256 *rl_sha256_create(void)
{
	rl_sha256 *h = cm_calloc(1, sizeof(*h));

	if (h && !(h->c = cm_sha256_create())) {
		cm_free(h);
		h = NULL;
	}
	return h;
}

int rl_sha256_update(rl_sha256 *h, const void *data, size_t len)
{
	if (!h || (!data && len))
		return -EINVAL;
	return cm_sha256_update(h->c, data, len);
}

int rl_sha256_final(rl_sha256 *h, uint8_t out[32])
{
	if (!h || !out)
		return -EINVAL;
	return cm_sha256_final(h->c, out);
}

void rl_sha256_destroy(rl_sha256 *h)
{
	if (!h)
		return;
	cm_sha256_destroy(h->c);
	cm_free(h);
}

/* Every byte of fd into h, HASH_CHUNK at a time: 0 or -errno. */
static int hash_fd(rl_sha256 *h, int fd)
{
	uint8_t *buf = cm_malloc(HASH_CHUNK);
	ssize_t n;
	int ret = buf ? 0 : -ENOMEM;

	while (ret == 0 && (n = read(fd, buf, HASH_CHUNK)) != 0) {
		if (n < 0)
			ret = errno == EINTR ? 0 : -errno;
		else
			ret = rl_sha256_update(h, buf, (size_t)n);
	}
	cm_free(buf);
	return ret;
}

int rl_sha256_file(const char *path, uint8_t out[32])
{
	rl_sha256 *h;
	int fd, ret;

	if (!path || !out)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	h = rl_sha256_create();
	ret = h ? hash_fd(h, fd) : -ENOMEM;
	if (ret == 0)
		ret = rl_sha256_final(h, out);
	rl_sha256_destroy(h);
	close(fd);
	return ret;
}

int rl_sha256_from_hex(const char *hex, uint8_t out[32])
{
	uint8_t sha[32];

	if (!hex || !out)
		return -EINVAL;
	if (ld_parse_sha256(hex, sha) < 0)
		return RL_E_INVALID_ARG;
	memcpy(out, sha, sizeof(sha));
	return 0;
}

/* ------------------------------------------------------------------ */
/* SHA256SUMS files                                                    */

struct sums_line {
	char *name;             /* into text */
	char hex[65];
	uint8_t sha[32];
	unsigned line;
};

struct rl_sums {
	char *text;             /* the file's bytes, names unescaped in place */
	struct sums_line *lines;
	size_t n;
	int parsed;
	struct cm_err err;
};

rl_sums *rl_sums_create(void)
{
	return cm_calloc(1, sizeof(struct rl_sums));
}

void rl_sums_destroy(rl_sums *sums)
{
	if (!sums)
		return;
	cm_free(sums->text);
	cm_free(sums->lines);
	cm_free(sums);
}

const char *rl_sums_errmsg(const rl_sums *sums)
{
	return sums ? sums->err.msg : "";
}

/* An escaped name (a line starting with '\\') unescaped in place: 0, or
 * -1 for a backslash before anything but '\\', 'n' or 'r'. */
static int unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (*s == '\\') {
			s++;
			if (*s != '\\' && *s != 'n' && *s != 'r')
				return -1;
			*w++ = *s == 'n' ? '\n' : *s == 'r' ? '\r' : '\\';
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
	return 0;
}

/* One line s of n bytes (its newline gone, NUL-terminated at n) into *out:
 * 1 an entry, 0 skipped (empty or a comment), or a negative code with e
 * set naming name:line. */
static int parse_line(char *s, size_t n, const char *name, unsigned line,
		      struct sums_line *out, struct cm_err *e)
{
	int escaped;

	if (memchr(s, '\0', n)) /* the name would end there, naming another file */
		return cm_err_set(e, RL_E_INVALID_ARG, "%s:%u: a NUL byte in the line", name, line);
	if (!*s || *s == '#') /* sha256sum -c skips comment lines */
		return 0;
	escaped = *s == '\\';
	s += escaped;
	if (strlen(s) < 67 || s[64] != ' ' || (s[65] != ' ' && s[65] != '*') ||
	    (s[64] = '\0', ld_parse_sha256(s, out->sha) < 0))
		return cm_err_set(e, RL_E_INVALID_ARG, "%s:%u: not '<64 hex digits>  <file name>' "
				  "(sha256sum's format)", name, line);
	if (escaped && unescape(s + 66) < 0)
		return cm_err_set(e, RL_E_INVALID_ARG, "%s:%u: a bad escape in the name (sha256sum "
				  "escapes only \\\\, \\n and \\r)", name, line);
	memcpy(out->hex, s, 65);
	out->name = s + 66;
	out->line = line;
	return 1;
}

/* Every line of text (len bytes, NUL-terminated at len) into lines[]:
 * the count, or a negative code with e set. */
static long parse_text(char *text, size_t len, const char *name, struct sums_line *lines,
		       struct cm_err *e)
{
	char *s = text, *end = text + len;
	unsigned line = 0;
	long n = 0;

	while (s < end) {
		char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t k = (size_t)((nl ? nl : end) - s);
		int r;

		line++;
		s[k] = '\0';
		if (k && s[k - 1] == '\r') /* one: a CRLF file's */
			s[--k] = '\0';
		r = parse_line(s, k, name, line, lines + n, e);
		if (r < 0)
			return r;
		n += r;
		s = nl ? nl + 1 : end;
	}
	return n;
}

int rl_sums_parse(rl_sums *sums, const char *name, const void *text, size_t len)
{
	struct sums_line *lines;
	char *copy;
	long n;

	if (!sums || !name || (!text && len))
		return -EINVAL;
	if (sums->parsed)
		return cm_err_set(&sums->err, RL_E_STATE, "%s: this handle already holds a "
				  "sums file", name);
	if (len > SUMS_MAX_BYTES)
		return cm_err_set(&sums->err, RL_E_INVALID_ARG, "%s: more than 16 MiB: not a "
				  "sums file", name);
	copy = cm_malloc(len + 1);
	/* a line holds at most one entry and takes at least 68 bytes: len / 68 + 1 */
	lines = cm_calloc(len / 68 + 1, sizeof(*lines));
	if (!copy || !lines) {
		cm_free(copy);
		cm_free(lines);
		return cm_err_set(&sums->err, -ENOMEM, "%s: out of memory", name);
	}
	if (len)
		memcpy(copy, text, len);
	copy[len] = '\0';
	n = parse_text(copy, len, name, lines, &sums->err);
	if (n < 0) {
		cm_free(copy);
		cm_free(lines);
		return (int)n;
	}
	cm_err_clear(&sums->err);
	*sums = (struct rl_sums){ .text = copy, .lines = lines, .n = (size_t)n, .parsed = 1 };
	return (int)n;
}

/* The bytes of path, a regular file of at most SUMS_MAX_BYTES, into
 * *buf (cm_malloc'd) and *len: 0 or a negative code with e set. O_NONBLOCK
 * so that a FIFO named by mistake is refused, not waited on. */
static int read_sums(const char *path, char **buf, size_t *len, struct cm_err *e)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), ret = 0;
	struct stat st;
	size_t got = 0;

	if (fd < 0)
		return cm_err_set(e, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > SUMS_MAX_BYTES)
		ret = cm_err_set(e, RL_E_INVALID_ARG, "%s: not a regular file of at most 16 MiB",
				 path);
	else if (!(*buf = cm_malloc((size_t)st.st_size + 1)))
		ret = cm_err_set(e, -ENOMEM, "%s: out of memory", path);
	while (ret == 0 && got < (size_t)st.st_size) {
		ssize_t n = read(fd, *buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno != EINTR)
			ret = cm_err_set(e, -errno, "%s: %s", path, strerror(errno));
		else if (n == 0)
			break; /* shrunk since fstat: what is there is the file */
		else if (n > 0)
			got += (size_t)n;
	}
	*len = got;
	close(fd);
	return ret;
}

int rl_sums_open(rl_sums *sums, const char *path)
{
	char *buf = NULL;
	size_t len = 0;
	int ret;

	if (!sums || !path)
		return -EINVAL;
	if (sums->parsed)
		return cm_err_set(&sums->err, RL_E_STATE, "%s: this handle already holds a "
				  "sums file", path);
	ret = read_sums(path, &buf, &len, &sums->err);
	if (ret == 0)
		ret = rl_sums_parse(sums, path, buf, len);
	cm_free(buf);
	return ret;
}

size_t rl_sums_count(const rl_sums *sums)
{
	return sums ? sums->n : 0;
}

int rl_sums_get(const rl_sums *sums, size_t i, rl_sums_entry *out)
{
	rl_sums_entry x;
	size_t n;

	if (!sums || !out || out->size < sizeof(size_t) || i >= sums->n)
		return -EINVAL;
	memset(&x, 0, sizeof(x));
	x.name = sums->lines[i].name;
	memcpy(x.sha256, sums->lines[i].sha, sizeof(x.sha256));
	memcpy(x.hex, sums->lines[i].hex, sizeof(x.hex));
	x.line = sums->lines[i].line;
	n = CM_MIN(out->size, sizeof(x));
	memcpy((char *)out + sizeof(size_t), (const char *)&x + sizeof(size_t),
	       n - sizeof(size_t));
	out->size = n;
	return 0;
}

long rl_sums_find(const rl_sums *sums, const char *name)
{
	if (!sums || !name)
		return -EINVAL;
	for (size_t i = sums->n; i-- > 0;)
		if (!strcmp(sums->lines[i].name, name))
			return (long)i;
	return -ENOENT;
}
