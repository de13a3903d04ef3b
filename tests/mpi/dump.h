/*
 * dump.h - one dump layout for test_mpi and its rank program: every shard
 * of a plan as DIR/<device id>/<tensor, '/' as %2F>.bin, so that the
 * dumps of an MPI load and of single-process loads compare with diff -r.
 */
#ifndef TESTS_MPI_DUMP_H
#define TESTS_MPI_DUMP_H

#include <stdio.h>
#include <sys/stat.h>

#include "ringload.h"

/* dir and its parents (mkdir -p). */
static inline void dump_mkdirs(const char *dir)
{
	char p[16384];

	snprintf(p, sizeof(p), "%s", dir);
	for (char *c = p + 1; *c; c++)
		if (*c == '/') {
			*c = '\0';
			mkdir(p, 0755);
			*c = '/';
		}
	mkdir(p, 0755);
}

/* Shard s from areas[device] (NULL: ld's staging). */
static inline int dump_shard(const char *dir, const rl_plan *plan, const rl_loader *ld,
			     unsigned char *const *areas, size_t s)
{
	char path[16384], name[4096], *o = name;
	rl_shard_info si;
	rl_device_info di;
	const unsigned char *base;
	FILE *f;
	int ok;

	rl_plan_shard(plan, s, &si);
	rl_plan_device(plan, si.device, &di);
	for (const char *c = si.name; *c && o < name + sizeof(name) - 4; c++)
		o += *c == '/' ? sprintf(o, "%%2F") : sprintf(o, "%c", *c);
	*o = 0;
	snprintf(path, sizeof(path), "%s/%u", dir, di.id);
	dump_mkdirs(path);
	snprintf(path, sizeof(path), "%s/%u/%s.bin", dir, di.id, name);
	base = areas ? areas[si.device] : rl_loader_staging(ld, si.device, NULL);
	if (!(f = fopen(path, "wb")))
		return -1;
	ok = !si.nbytes || (base && fwrite(base + si.offset, 1, si.nbytes, f) == si.nbytes);
	return fclose(f) || !ok ? -1 : 0;
}

static inline int dump_areas(const char *dir, const rl_plan *plan, const rl_loader *ld,
			     unsigned char *const *areas)
{
	for (size_t s = 0; s < rl_plan_num_shards(plan); s++)
		if (dump_shard(dir, plan, ld, areas, s))
			return -1;
	return 0;
}

static inline int dump_plan(const char *dir, const rl_plan *plan, const rl_loader *ld)
{
	return dump_areas(dir, plan, ld, NULL);
}

#endif
