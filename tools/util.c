/* util.c - see util.h. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

double cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
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

static int remove_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	if (remove(path) < 0 && errno != ENOENT && !remove_err)
		remove_err = -errno;
	return 0;
}

int cli_remove_tree(const char *path)
{
	/* Depth first, never following links: a link is removed, not its target. */
	remove_err = 0;
	if (nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
		return -errno;
	return remove_err;
}
