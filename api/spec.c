/* spec.c - rl_spec_* of ringload.h, over planner/spec.c. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spec_internal.h"

rl_spec *rl_spec_create(void)
{
	rl_spec *s = rl_calloc(1, sizeof(*s));

	if (s && !(s->pl = pl_spec_new())) {
		rl_free(s);
		return NULL;
	}
	return s;
}

void rl_spec_destroy(rl_spec *spec)
{
	if (!spec)
		return;
	pl_spec_free(spec->pl);
	rl_free(spec);
}

const char *rl_spec_errmsg(const rl_spec *spec)
{
	return spec ? spec->err.msg : "";
}

int rl_spec_parse(rl_spec *spec, const char *json, size_t len)
{
	if (!spec)
		return -EINVAL;
	rl_err_clear(&spec->err);
	return pl_spec_parse(spec->pl, json, len, &spec->err);
}

/* Specs are small: anything over this is not one. */
#define SPEC_MAX_BYTES (64u << 20)

int rl_spec_load(rl_spec *spec, const char *path)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd, ret;

	if (!spec)
		return -EINVAL;
	rl_err_clear(&spec->err);
	if (!path)
		return rl_err_set(&spec->err, RL_E_INVALID_ARG, "spec path is NULL");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		return rl_err_set(&spec->err, ret, "%s: %s", path, rl_strerror(ret));
	}
	if (fstat(fd, &st)) {
		ret = -errno;
		close(fd);
		return rl_err_set(&spec->err, ret, "%s: %s", path, rl_strerror(ret));
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > SPEC_MAX_BYTES) {
		close(fd);
		return rl_err_set(&spec->err, RL_E_SPEC, "%s: not a regular file of at most %u bytes",
				  path, SPEC_MAX_BYTES);
	}
	buf = rl_malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return rl_err_set(&spec->err, -ENOMEM, "%s: out of memory", path);
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			close(fd);
			rl_free(buf);
			return rl_err_set(&spec->err, ret, "%s: read failed: %s", path,
					  rl_strerror(ret));
		}
		got += (size_t)n;
	}
	close(fd);
	ret = pl_spec_parse(spec->pl, buf, got, &spec->err);
	rl_free(buf);
	if (ret) {
		char msg[RL_ERRMSG_MAX];

		memcpy(msg, spec->err.msg, sizeof(msg));
		rl_err_set(&spec->err, ret, "%s: %s", path, msg);
	}
	return ret;
}

int rl_spec_set_mesh(rl_spec *spec, unsigned ndim, const uint32_t *shape,
		     const char *const *axes, const uint32_t *devices,
		     const uint32_t *process_of_device)
{
	if (!spec)
		return -EINVAL;
	rl_err_clear(&spec->err);
	return pl_spec_set_mesh(spec->pl, ndim, shape, axes, devices, process_of_device,
				&spec->err);
}

int rl_spec_add_rule(rl_spec *spec, const char *regex, unsigned ndims,
		     const rl_dim_spec *dims)
{
	if (!spec)
		return -EINVAL;
	rl_err_clear(&spec->err);
	if (ndims && !dims)
		return rl_err_set(&spec->err, RL_E_INVALID_ARG, "rule: dims is NULL");
	return pl_spec_add_rule(spec->pl, regex, ndims, dims, &spec->err);
}

int rl_spec_add_target_json(rl_spec *spec, const char *json, size_t len)
{
	if (!spec)
		return -EINVAL;
	rl_err_clear(&spec->err);
	return pl_spec_add_target_json(spec->pl, json, len, &spec->err);
}
