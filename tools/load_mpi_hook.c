/*
 * load_mpi_hook.c - `ringload load --mpi` without linking MPI: the rank
 * program lives in ringload-mpi.so (built where Open MPI is installed,
 * with libringload_mpi), found beside this program (the build) or in
 * ../lib/ringload (an install), and loaded only when --mpi is given.
 * RTLD_GLOBAL: Open MPI's components, which libmpi loads in turn, resolve
 * libmpi's symbols through the global scope.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "load_args.h"

#define PLUGIN "ringload-mpi.so"

/* dir/rel/PLUGIN for the directory of this program, or "" when unknown. */
static void plugin_path(char *out, size_t cap, const char *rel)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	out[0] = '\0';
	if (n <= 0)
		return;
	exe[n] = '\0';
	if (!(slash = strrchr(exe, '/')))
		return;
	*slash = '\0';
	snprintf(out, cap, "%s%s/%s", exe, rel, PLUGIN);
}

int load_mpi(const struct load_args *a)
{
	static const char *const where[] = { "", "/../lib/ringload" };
	char path[PATH_MAX + 64], tried[2 * (PATH_MAX + 64)] = "";
	int (*run)(const struct load_args *);
	void *h = NULL;

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]) && !h; i++) {
		plugin_path(path, sizeof(path), where[i]);
		if (path[0] && !(h = dlopen(path, RTLD_NOW | RTLD_GLOBAL)) && !tried[0])
			snprintf(tried, sizeof(tried), "%s", dlerror());
	}
	if (!h) {
		fprintf(stderr, "ringload load: --mpi: no %s (this ringload was built without Open "
			"MPI: make deps, then make): %s\n", PLUGIN, tried);
		return 1;
	}
	*(void **)&run = dlsym(h, "ringload_load_mpi");
	if (!run) {
		fprintf(stderr, "ringload load: --mpi: %s: %s\n", path, dlerror());
		return 1;
	}
	/* The plugin stays loaded: MPI must not be unloaded after finalizing. */
	return run(a);
}
