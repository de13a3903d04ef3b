/*
 * numa.c - where staging memory goes on a machine with several NUMA nodes.
 *
 * A runtime pins its loading thread near the device it feeds (numactl,
 * taskset, or its own affinity): when the CPUs that thread may run on all
 * lie on one node, staging and bounce buffers are placed on that node, and
 * the workers, which inherit the thread's affinity, run there too. When
 * they span several nodes (or the machine has one), nothing is bound:
 * every page lands on the node of the worker that first touches it, which
 * is the worker that reads into it. The node comes from sysfs (read at a
 * given root so that tests can build a machine of several nodes); the
 * placement is mbind(MPOL_PREFERRED), so a full node spills over rather
 * than fail (libnuma's numa_tonode_memory binds strictly).
 */
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "numa.h"

#define NUMA_MAX_NODES 1024

/* 1 when the cpulist text ("0-3,8,10-11") names a CPU of set. */
static int list_meets(const char *s, const cpu_set_t *set)
{
	while (*s) {
		char *end;
		unsigned long a = strtoul(s, &end, 10), b = a;

		if (end == s)
			return 0;
		if (*end == '-')
			b = strtoul(end + 1, &end, 10);
		for (unsigned long c = a; c <= b && c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, set))
				return 1;
		s = *end == ',' ? end + 1 : end;
		if (*s == '\n')
			break;
	}
	return 0;
}

/* Whether node dir/nodeN has a CPU of set; -1 when it has no cpulist. */
static int node_meets(const char *dir, const char *node, const cpu_set_t *set)
{
	char path[PATH_MAX], text[4096];
	FILE *f;
	int meets;

	if (snprintf(path, sizeof(path), "%s/%s/cpulist", dir, node) >= (int)sizeof(path))
		return -1;
	f = fopen(path, "r");
	if (!f)
		return -1;
	meets = fgets(text, sizeof(text), f) ? list_meets(text, set) : 0;
	fclose(f);
	return meets;
}

int eng_numa_node(const char *sysfs_root)
{
	char dir[PATH_MAX];
	struct dirent *de;
	cpu_set_t set;
	int nodes = 0, hit = -1, hits = 0;
	DIR *d;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return -1;
	snprintf(dir, sizeof(dir), "%s/devices/system/node", sysfs_root);
	d = opendir(dir);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		int m;

		if (strncmp(de->d_name, "node", 4) || !isdigit((unsigned char)de->d_name[4]))
			continue;
		m = node_meets(dir, de->d_name, &set);
		if (m < 0)
			continue;
		nodes++;
		if (m) {
			hits++;
			hit = atoi(de->d_name + 4);
		}
	}
	closedir(d);
	return nodes > 1 && hits == 1 && hit < NUMA_MAX_NODES ? hit : -1;
}

void eng_numa_place(void *p, size_t len, int node)
{
	unsigned long mask[NUMA_MAX_NODES / (8 * sizeof(unsigned long))];

	if (node < 0 || node >= NUMA_MAX_NODES || !p || !len)
		return;
	memset(mask, 0, sizeof(mask));
	mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
	/* maxnode counts one past the mask's bits (the kernel's convention) */
	syscall(SYS_mbind, p, len, MPOL_PREFERRED, mask, NUMA_MAX_NODES + 1, 0);
}
