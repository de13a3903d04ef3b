/* spec_handle.c - rl_spec_* of ringload.h, over planner/spec.c. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spec_internal.h"

rl_spec *rl_spec_create(void)
{
	rl_spec *s = cm_calloc(1, sizeof(*s));

	if (s && !(s->pl = pl_spec_new())) {
		cm_free(s);
		return NULL;
	}
	return s;
}

void rl_spec_destroy(rl_spec *spec)
{
	if (!spec)
		return;
	pl_spec_free(spec->pl);
	cm_free(spec);
}

const char *rl_spec_errmsg(const rl_spec *spec)
{
	return spec ? spec->err.msg : "";
}

int rl_spec_parse(rl_spec *spec, const char *json, size_t len)
{
	if (!spec)
		return -EINVAL;
	cm_err_clear(&spec->err);
	if (!json)
		return cm_err_set(&spec->err, -EINVAL, "spec: text is NULL");
	return pl_spec_parse(spec->pl, json, len, &spec->err);
}

/* Specs are small: anything over this is not one. */
#define SPEC_MAX_BYTES (64u << 20)

/*
 * Reads fd to its end into a fresh buffer (NUL-terminated), refusing more
 * than SPEC_MAX_BYTES. hint is the expected size (0 for a pipe).
 */
static int read_all(int fd, size_t hint, char **out, size_t *outlen)
{
	size_t cap = (hint ? hint + 1 : 4096) + 1, got = 0;
	char *buf = cm_malloc(cap), *nb;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n;

		if (got + 1 == cap) {
			if (cap > SPEC_MAX_BYTES) {
				cm_free(buf);
				return RL_E_TOO_LARGE;
			}
			cap = cap * 2 > SPEC_MAX_BYTES + 2u ? SPEC_MAX_BYTES + 2u : cap * 2;
			nb = cm_realloc(buf, cap);
			if (!nb) {
				cm_free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		n = read(fd, buf + got, cap - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int ret = -errno;

			cm_free(buf);
			return ret;
		}
		if (!n)
			break;
		got += (size_t)n;
	}
	if (got > SPEC_MAX_BYTES) {
		cm_free(buf);
		return RL_E_TOO_LARGE;
	}
	buf[got] = '\0';
	*out = buf;
	*outlen = got;
	return 0;
}

/*
 * Opened O_NONBLOCK so that a FIFO with no writer cannot hang the open; a
 * regular file is read as is (O_NONBLOCK means nothing to it), a pipe or
 * FIFO (`--sharding <(...)`) back in blocking mode to its end, up to
 * SPEC_MAX_BYTES. Anything else (a directory, a device) is refused.
 */
int rl_spec_load(rl_spec *spec, const char *path)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	int fd, ret;

	if (!spec)
		return -EINVAL;
	cm_err_clear(&spec->err);
	if (!path)
		return cm_err_set(&spec->err, -EINVAL, "spec path is NULL");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		return cm_err_set(&spec->err, ret, "%s: %s", path, rl_strerror(ret));
	}
	if (fstat(fd, &st)) {
		ret = -errno;
		close(fd);
		return cm_err_set(&spec->err, ret, "%s: %s", path, rl_strerror(ret));
	}
	if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
		close(fd);
		return cm_err_set(&spec->err, RL_E_SPEC, "%s: not a regular file or a pipe",
				  path);
	}
	if (S_ISREG(st.st_mode) && (uint64_t)st.st_size > SPEC_MAX_BYTES) {
		close(fd);
		return cm_err_set(&spec->err, RL_E_TOO_LARGE, "%s: over %u bytes: not a spec",
				  path, SPEC_MAX_BYTES);
	}
	if (S_ISFIFO(st.st_mode)) {
		int fl = fcntl(fd, F_GETFL);

		if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK)) {
			ret = -errno;
			close(fd);
			return cm_err_set(&spec->err, ret, "%s: %s", path, rl_strerror(ret));
		}
	}
	ret = read_all(fd, S_ISREG(st.st_mode) ? (size_t)st.st_size : 0, &buf, &got);
	close(fd);
	if (ret == RL_E_TOO_LARGE)
		return cm_err_set(&spec->err, ret, "%s: over %u bytes: not a spec", path,
				  SPEC_MAX_BYTES);
	if (ret)
		return cm_err_set(&spec->err, ret, "%s: read failed: %s", path,
				  rl_strerror(ret));
	if (!got && S_ISFIFO(st.st_mode)) {
		cm_free(buf);
		return cm_err_set(&spec->err, RL_E_SPEC, "%s: empty (a pipe with no writer?)",
				  path);
	}
	ret = pl_spec_parse(spec->pl, buf, got, &spec->err);
	cm_free(buf);
	if (ret) {
		char msg[CM_ERRMSG_MAX];

		memcpy(msg, spec->err.msg, sizeof(msg));
		cm_err_set(&spec->err, ret, "%s: %s", path, msg);
	}
	return ret;
}

int rl_spec_set_mesh(rl_spec *spec, unsigned ndim, const uint32_t *shape,
		     const char *const *axes, const uint32_t *devices,
		     const uint32_t *process_of_device)
{
	if (!spec)
		return -EINVAL;
	cm_err_clear(&spec->err);
	if (ndim && (!shape || !axes))
		return cm_err_set(&spec->err, -EINVAL, "mesh: shape or axes is NULL");
	return pl_spec_set_mesh(spec->pl, ndim, shape, axes, devices, process_of_device,
				&spec->err);
}

int rl_spec_add_rule(rl_spec *spec, const char *regex, unsigned ndims,
		     const rl_dim_spec *dims)
{
	if (!spec)
		return -EINVAL;
	cm_err_clear(&spec->err);
	if (!regex)
		return cm_err_set(&spec->err, -EINVAL, "rule: regex is NULL");
	if (ndims && !dims)
		return cm_err_set(&spec->err, -EINVAL, "rule: dims is NULL");
	return pl_spec_add_rule(spec->pl, regex, ndims, dims, &spec->err);
}

int rl_spec_add_target_json(rl_spec *spec, const char *json, size_t len)
{
	if (!spec)
		return -EINVAL;
	cm_err_clear(&spec->err);
	if (!json)
		return cm_err_set(&spec->err, -EINVAL, "target: text is NULL");
	return pl_spec_add_target_json(spec->pl, json, len, &spec->err);
}

int rl_spec_set_dtype(rl_spec *spec, int dtype)
{
	if (!spec)
		return -EINVAL;
	cm_err_clear(&spec->err);
	return pl_spec_set_dtype(spec->pl, dtype, &spec->err);
}

int rl_spec_set_files_of_process(rl_spec *spec, unsigned process, size_t n,
				 const char *const *files)
{
	if (!spec)
		return -EINVAL;
	cm_err_clear(&spec->err);
	return pl_avail_set(spec->pl, process, n, files, &spec->err);
}
