/*
 * file_cached.c - rl_file_cached_bytes: the loader's page-cache probe, public.
 *
 * RL_DIRECT_AUTO asks it before each load; the Python drop-ins ask it to
 * choose between reading a checkpoint and mapping it (a file the page
 * cache holds is mapped, as safetensors does, instead of copied).
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "ringload.h"
#include "../engine/eng_int.h"

int64_t rl_file_cached_bytes(const char *path, uint64_t off, uint64_t len)
{
	int64_t n;
	int fd, mincore = 0;

	if (!path || off + len < off)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = eng_cached_bytes(fd, off, len, 0, &mincore);
	close(fd);
	/* whole pages count: the first and last may reach past the range */
	return n > (int64_t)len ? (int64_t)len : n;
}
