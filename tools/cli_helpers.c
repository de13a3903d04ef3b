/* util.c - see util.h. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_helpers.h"

double cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * form, no surrogate, at most U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *s)
{
	unsigned c = s[0], n, cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	for (unsigned i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)  /* a NUL stops here too */
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void cli_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		size_t n = c >= 0x80 ? utf8_seq((const unsigned char *)s) : 1;

		if (c >= 0x80 && n) {
			fwrite(s, 1, n, f);
			s += n - 1;
		} else if (c >= 0x80) {
			fputs("\xef\xbf\xbd", f);  /* not UTF-8: U+FFFD; see cli_json_path() */
		} else if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

void cli_mark_cut(char *buf, size_t cap)
{
	size_t at = cap - 4;

	while (at > 0 && ((unsigned char)buf[at] & 0xc0) == 0x80)
		at--;  /* no UTF-8 sequence cut in two: its lead byte goes too */
	memcpy(buf + at, "...", 4);
}

int cli_utf8_valid(const char *s)
{
	while (*s) {
		size_t n = (unsigned char)*s >= 0x80 ? utf8_seq((const unsigned char *)s) : 1;

		if (!n)
			return 0;
		s += n;
	}
	return 1;
}

void cli_json_path(FILE *f, const char *key, const char *s)
{
	fprintf(f, "\"%s\":", key);
	cli_json_str(f, s);
	if (cli_utf8_valid(s))
		return;
	fprintf(f, ",\"%s_hex\":\"", key);
	for (; *s; s++)
		fprintf(f, "%02x", (unsigned char)*s);
	fputc('"', f);
}

int cli_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		/* at most 1 GiB a call: Linux writes at most 2 GiB - 4 KiB anyway */
		ssize_t w = write(fd, c, n > (1u << 30) ? (1u << 30) : n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* nftw passes no user pointer: cli_remove_tree() is for one thread at a time
 * (the CLI's main thread, or the signal thread once main is parked). */
static int remove_err;
static int (*remove_stop)(void);

static int remove_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	if (remove(path) < 0 && errno != ENOENT && !remove_err)
		remove_err = -errno;
	/* asked after every entry: one large file can take a second to unlink */
	return remove_stop && remove_stop();
}

int cli_remove_tree_until(const char *path, int (*stop)(void))
{
	int r;

	/* Depth first, never following links: a link is removed, not its target. */
	remove_err = 0;
	remove_stop = stop;
	r = nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	remove_stop = NULL;
	if (r < 0 && errno != ENOENT)
		return -errno;
	return r > 0 ? 1 : remove_err;
}

int cli_remove_tree(const char *path)
{
	return cli_remove_tree_until(path, NULL);
}

/* stdin, stdout and stderr on /dev/null; every other fd closed. */
static void detach_fds(void)
{
	int fd = open("/dev/null", O_RDWR);

	for (int i = 0; i < 3; i++)
		if (fd < 0)
			close(i);
		else if (fd != i)
			dup2(fd, i);
	if (close_range(3, ~0u, 0) < 0)
		for (int i = 3; i < 1024; i++)
			close(i);
}

int cli_remove_tree_later(const char *path)
{
	sigset_t none;
	int sync[2], err;
	pid_t pid;
	char c;

	sigemptyset(&none);
	if (pipe2(sync, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	err = errno;
	if (pid != 0) {
		/* Back once the remover holds none of our fds (detach_fds closes
		 * its end of sync too): a pipe on our stdout must not outlive our
		 * exit while the child has yet to run. */
		close(sync[1]);
		while (pid > 0 && read(sync[0], &c, 1) < 0 && errno == EINTR)
			;
		close(sync[0]);
		return pid < 0 ? -err : 0;
	}
	/* Its own session: the terminal's next Ctrl-C is not for it. No fd of
	 * the caller's: a pipe on stdout or stderr ($(ringload ...), | tee)
	 * reaches EOF when the command exits, not when the removal ends. */
	setsid();
	detach_fds();
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	_exit(cli_remove_tree(path) ? 1 : 0);
}
