/*
 * files.c - the small file helpers of the checkpoint reader: full preads,
 * path joining, system error messages and reading a small whole file
 * (an index).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_io.h"

int pl_ckpt_oom(struct cm_err *e)
{
	return cm_err_set(e, -ENOMEM, "out of memory opening checkpoint");
}

int pl_sys_err(struct cm_err *e, int err, const char *what, const char *path)
{
	return cm_err_set(e, -err, "%s: %s: %s", path, what, strerror(err));
}

int pl_pread_full(int fd, char *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, buf + done, len - done, (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO; /* the file shrank under us */
		done += (size_t)n;
	}
	return 0;
}

char *pl_path_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p;

	if (a + b + 2 < a)
		return NULL;
	p = cm_malloc(a + b + 2);
	if (!p)
		return NULL;
	memcpy(p, dir, a);
	p[a] = '/';
	memcpy(p + a + 1, name, b + 1);
	return p;
}

char *pl_path_dir(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return cm_strdup(".");
	if (slash == path)
		return cm_strdup("/");
	return cm_strndup(path, (size_t)(slash - path));
}

int pl_read_small_file(const char *path, uint64_t max, int bad_code, char **out,
		       size_t *len, struct cm_err *e)
{
	struct stat st;
	char *buf;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return pl_sys_err(e, errno, "cannot open", path);
	if (fstat(fd, &st) < 0) {
		r = pl_sys_err(e, errno, "cannot stat", path);
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		if (!S_ISREG(st.st_mode))
			return cm_err_set(e, bad_code, "%s: not a regular file", path);
		return cm_err_set(e, bad_code, "%s: file of %" PRIu64 " bytes is larger "
				  "than %" PRIu64, path, (uint64_t)st.st_size, max);
	}
	buf = cm_malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return pl_ckpt_oom(e);
	}
	r = pl_pread_full(fd, buf, (size_t)st.st_size, 0);
	close(fd);
	if (r) {
		cm_free(buf);
		return pl_sys_err(e, -r, "cannot read", path);
	}
	buf[st.st_size] = '\0';
	*out = buf;
	*len = (size_t)st.st_size;
	return 0;
}
