/*
 * test_probe.c - what the engine reads about the machine before a load:
 * the request limits of the block device under a file (partitions,
 * device-mapper slaves and loop devices followed, on a sysfs tree built
 * here), the NUMA node of the caller's CPUs (on a machine of several nodes
 * built the same way), and how much of a file the page cache holds
 * (cachestat and mincore agreeing, and the engine choosing buffered reads
 * on that measure: with mincore too, as on kernels without cachestat, and
 * on overlayfs, where cachestat sees nothing).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../engine/eng_int.h"
#include "engine_util.h"
#include "harness.h"

static char *path_in(const char *name)
{
	return tu_path(th_tmpdir(), name);
}

/* Writes text into root/rel, making the directories on the way. */
static int put(const char *root, const char *rel, const char *text)
{
	char path[1024], cmd[1100];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	if (system(cmd) != 0)
		return -1;
	f = fopen(path, "w");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f);
}

/* root/rel -> target (a relative symlink, as sysfs has them). */
static int link_at(const char *root, const char *rel, const char *target)
{
	char path[1024], cmd[1100];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	if (system(cmd) != 0)
		return -1;
	return symlink(target, path);
}

static int queue(const char *root, const char *dev, const char *msk, const char *segs)
{
	char rel[256];

	snprintf(rel, sizeof(rel), "%s/queue/max_sectors_kb", dev);
	if (put(root, rel, msk))
		return -1;
	snprintf(rel, sizeof(rel), "%s/queue/max_segments", dev);
	if (put(root, rel, segs))
		return -1;
	snprintf(rel, sizeof(rel), "%s/queue/optimal_io_size", dev);
	if (put(root, rel, "0\n"))
		return -1;
	snprintf(rel, sizeof(rel), "%s/queue/nr_requests", dev);
	return put(root, rel, "64\n");
}

/*
 * A disk with a partition, a device-mapper device on that partition, and
 * a loop device whose backing file is on tmpfs: each file's limits are the
 * smallest along its chain, named as it goes.
 */
static void devq_chains(void)
{
	const char *root = path_in("sys");
	char backing[512];
	struct eng_devq q;

	CHECK(queue(root, "devices/pci/block/sda", "512\n", "128\n") == 0);
	CHECK(put(root, "devices/pci/block/sda/sda1/partition", "1\n") == 0);
	CHECK(link_at(root, "dev/block/8:0", "../../devices/pci/block/sda") == 0);
	CHECK(link_at(root, "dev/block/8:1", "../../devices/pci/block/sda/sda1") == 0);
	CHECK(queue(root, "devices/virtual/block/dm-0", "1024\n", "64\n") == 0);
	CHECK(link_at(root, "devices/virtual/block/dm-0/slaves/sda1",
		      "../../../../pci/block/sda/sda1") == 0);
	CHECK(link_at(root, "dev/block/253:0", "../../devices/virtual/block/dm-0") == 0);
	CHECK(queue(root, "devices/virtual/block/loop0", "1280\n", "128\n") == 0);
	snprintf(backing, sizeof(backing), "/dev/shm/rl-probe-%d\n", (int)getpid());
	CHECK(put(root, "devices/virtual/block/loop0/loop/backing_file", backing) == 0);
	CHECK(link_at(root, "dev/block/7:0", "../../devices/virtual/block/loop0") == 0);
	backing[strlen(backing) - 1] = '\0';
	CHECK(put("/", backing, "x") == 0);

	CHECK_EQ(eng_devq_probe(root, makedev(8, 1), &q), 1);
	CHECK_STR(q.name, "sda1 -> sda");
	CHECK_EQ(q.max_bytes, 512 << 10);
	CHECK_EQ(q.max_segments, 128);
	CHECK_EQ(q.nr_requests, 64);
	CHECK_EQ(eng_devq_probe(root, makedev(253, 0), &q), 1);
	CHECK_STR(q.name, "dm-0 -> sda1 -> sda");
	CHECK_EQ(q.max_bytes, 512 << 10);    /* the slave's is smaller */
	CHECK_EQ(q.max_segments, 64);        /* the dm device's is smaller */
	CHECK_EQ(eng_devq_probe(root, makedev(7, 0), &q), 1);
	unlink(backing);
	CHECKF(!strcmp(q.name, "loop0 -> (no block device)"), "%s", q.name);
	CHECK_EQ(q.max_bytes, 1280 << 10);
	/* none: a device sysfs does not know, and no device at all (tmpfs) */
	CHECK_EQ(eng_devq_probe(root, makedev(9, 9), &q), 0);
	CHECK_EQ(q.max_bytes, 0);
	CHECK_EQ(eng_devq_probe(root, makedev(0, 44), &q), 0);
	CHECK_STR(q.name, "");
}

/* The real device under the test directory: found when it is a block
 * device, with limits a request can be sized by. */
static void devq_real(void)
{
	struct eng_devq q;
	uint8_t *bytes = tu_write_file(path_in("real.bin"), 4096, 1);
	int ret;

	CHECK(bytes != NULL);
	free(bytes);
	ret = eng_devq_probe_path(path_in("real.bin"), &q);
	CHECK(ret >= 0);
	if (ret == 0)
		SKIP("the test directory is on no block device");
	CHECKF(q.name[0] && q.max_bytes >= 4096, "%s: %u", q.name, q.max_bytes);
	CHECK_EQ(eng_devq_probe_path(path_in("none.bin"), &q), -ENOENT);
}

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/*
 * NUMA: a thread whose CPUs lie on one of several nodes gets that node;
 * CPUs on two nodes, or a machine of one node, get none (-1).
 */
static void numa_node_choice(void)
{
	const char *two = path_in("numa2"), *one = path_in("numa1");
	cpu_set_t saved;
	int a = -1, b = -1;

	CHECK(sched_getaffinity(0, sizeof(saved), &saved) == 0);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &saved)) {
			if (a < 0)
				a = c;
			else if (b < 0)
				b = c;
		}
	if (b < 0)
		SKIP("needs two CPUs");
	{
		char la[64], lb[64];

		snprintf(la, sizeof(la), "%d\n", a);
		snprintf(lb, sizeof(lb), "%d,%d-%d\n", b, b + 100, b + 101);
		CHECK(put(two, "devices/system/node/node0/cpulist", la) == 0);
		CHECK(put(two, "devices/system/node/node1/cpulist", lb) == 0);
		CHECK(put(two, "devices/system/node/online", "0-1\n") == 0);
		snprintf(la, sizeof(la), "%d-%d\n", CM_MIN(a, b), CM_MAX(a, b));
		CHECK(put(one, "devices/system/node/node0/cpulist", la) == 0);
	}
	CHECK_EQ(eng_numa_node(two), -1);     /* spans both */
	CHECK_EQ(eng_numa_node(one), -1);     /* one node */
	CHECK(pin(b) == 0);
	CHECK_EQ(eng_numa_node(two), 1);
	CHECK_EQ(eng_numa_node(one), -1);
	CHECK(pin(a) == 0);
	CHECK_EQ(eng_numa_node(two), 0);
	CHECK(sched_setaffinity(0, sizeof(saved), &saved) == 0);
	CHECK_EQ(eng_numa_node(path_in("nothing")), -1);
}

/* Placing memory on a node is advisory: on this machine's node and on one
 * that does not exist, the memory works the same. */
static void numa_place_harmless(void)
{
	size_t len = 4 << 20;
	uint8_t *p = eng_staging_alloc(len);

	CHECK(p);
	eng_numa_place(p, len, 0);
	eng_numa_place(p + (2 << 20), 2 << 20, 1000);
	eng_numa_place(p, len, -1);
	memset(p, 7, len);
	CHECK(p[len - 1] == 7);
	eng_staging_free(p, len);
	CHECKF(eng_numa_node("/sys") >= -1, "node %d", eng_numa_node("/sys"));
}

/* cachestat and mincore say the same of a warm and of an evicted file,
 * over the whole file and over a range of it. */
static void cached_bytes_agree(void)
{
	const char *path = path_in("cached.bin");
	uint64_t size = 3 << 20;
	int fd, used_mincore;

	free(tu_write_file(path, size, 3));
	for (int hot = 1; hot >= 0; hot--) {
		long drops = th_cache_drops();
		int64_t a, b, c;

		CHECK(hot ? tu_warm(path) == 0 : tu_evict(path) == 0);
		fd = open(path, O_RDONLY);
		CHECK(fd >= 0);
		used_mincore = 0;
		a = eng_cached_bytes(fd, 0, size, 0, &used_mincore);
		b = eng_cached_bytes(fd, 0, size, 1, &(int){ 0 });
		c = eng_cached_bytes(fd, 4096 + 100, 8192, 1, &(int){ 0 });
		close(fd);
		CHECKF(a >= 0 && b >= 0, "%lld %lld", (long long)a, (long long)b);
		if (hot && (a != (int64_t)size || b != (int64_t)size) &&
		    th_cache_dropped_since(drops))
			SKIP(TH_CACHE_DROPPED);
		CHECKF(hot ? a == (int64_t)size && b == (int64_t)size : a < 65536 && b < 65536,
		       "hot %d: cachestat%s %lld, mincore %lld", hot,
		       used_mincore ? " (mincore)" : "", (long long)a, (long long)b);
		CHECK_EQ(c, hot ? 3 * 4096 : c); /* three pages touch the range */
	}
	CHECK_EQ(eng_cached_bytes(-1, 0, 4096, 0, &used_mincore) < 0, 1);
}

/*
 * The engine's choice of mode for a file hot and evicted: a hot file is
 * read buffered, a cold one with O_DIRECT, and the measure says it came
 * from mincore where want_mincore. The file is written at path and read
 * at read_path (the same file through an overlay mount, or path itself).
 */
static void engine_choice(const char *path, const char *read_path, int mincore_only,
			  int want_mincore)
{
	for (int hot = 1; hot >= 0; hot--) {
		struct tu_plan p = { .align = 4096, .chunk = 64 << 10, .use_direct = 1 };
		struct eng_file_stat fst;
		struct eng_opts o;
		struct eng_stats st;
		struct eng_job job;
		struct cm_err e = { 0 };
		struct eng *eng;
		uint64_t at;
		long drops;
		int ret;

		tu_add_file(&p, path, (1 << 20) + 5, 4);
		free(p.paths[0]);
		p.paths[0] = strdup(read_path);
		tu_add_item(&p, 0, 0, (1 << 20) + 5, 1, 0, 0, 0);
		CHECK(tu_build(&p) == 0);
		drops = th_cache_drops();
		CHECK(hot ? tu_warm(read_path) == 0 : tu_evict(path) == 0);
		eng_opts_default(&o);
		o.direct = ENG_DIRECT_AUTO;
		CHECK(eng_create(&o, &eng, &e) == 0);
		eng_set_cache_probe(eng, mincore_only);
		tu_job(&p, &job);
		job.file_stats = &fst;
		ret = eng_run(eng, &job, &st, &e);
		eng_destroy(eng);
		CHECKF(ret == 0, "%d %s", ret, e.msg);
		CHECK(tu_compare(&p, &at) == 0);
		CHECK(fst.probed && fst.probe_mincore == want_mincore);
		if (hot && fst.mode != ENG_FILE_CACHED && th_cache_dropped_since(drops)) {
			tu_free(&p);
			SKIP(TH_CACHE_DROPPED);
		}
		CHECKF(fst.mode == (hot ? ENG_FILE_CACHED : ENG_FILE_DIRECT),
		       "hot %d: mode %d, %llu of %llu", hot, fst.mode,
		       (unsigned long long)fst.resident, (unsigned long long)fst.needed);
		CHECK_EQ(st.files_cached, hot);
		CHECK_EQ(st.direct_io, !hot);
		tu_free(&p);
	}
}

/* The engine's choice on that measure, with mincore standing in for
 * cachestat as on a kernel before 6.5. */
static void engine_choice_mincore(void)
{
	engine_choice(path_in("choice.bin"), path_in("choice.bin"), 1, 1);
}

/* A read-only overlayfs at dir/merged over dir/lower (and an empty
 * dir/lower2), as a container's root is; 0, or -1 when it cannot be mounted. */
static int mount_overlay(const char *dir)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd), "mkdir -p %s/lower %s/lower2 %s/merged && "
		 "mount -t overlay overlay -o lowerdir=%s/lower:%s/lower2 %s/merged 2>/dev/null",
		 dir, dir, dir, dir, dir, dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void unmount_overlay(const char *dir)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/merged", dir);
	umount2(path, MNT_DETACH);
}

/*
 * On overlayfs, where cachestat sees none of a file's pages (they are the
 * lower file's), the probe asks mincore: a hot file through the overlay
 * counts as resident and is read buffered, an evicted one with O_DIRECT.
 */
static void overlayfs_hot_file(void)
{
	const char *dir = path_in("ovl");
	char lower[1024], merged[1024];
	uint64_t size = 3 << 20;
	int64_t got;
	int fd, used_mincore = 0;
	long drops;

	if (geteuid() != 0)
		SKIP("needs root, to mount an overlayfs");
	if (mount_overlay(dir) < 0)
		SKIP("cannot mount an overlayfs here (no overlay module, or no privilege)");
	snprintf(lower, sizeof(lower), "%s/lower/hot.bin", dir);
	snprintf(merged, sizeof(merged), "%s/merged/hot.bin", dir);
	free(tu_write_file(lower, size, 5));
	drops = th_cache_drops();
	fd = tu_warm(merged) == 0 ? open(merged, O_RDONLY) : -1;
	got = fd >= 0 ? eng_cached_bytes(fd, 0, size, 0, &used_mincore) : -1;
	if (fd >= 0)
		close(fd);
	snprintf(lower, sizeof(lower), "%s/lower/choice.bin", dir);
	snprintf(merged, sizeof(merged), "%s/merged/choice.bin", dir);
	if (got == (int64_t)size)
		engine_choice(lower, merged, 0, 1);
	unmount_overlay(dir);
	if (got != (int64_t)size && th_cache_dropped_since(drops))
		SKIP(TH_CACHE_DROPPED);
	CHECKF(got == (int64_t)size && used_mincore, "hot file on overlayfs: %lld of %llu "
	       "bytes resident, mincore %d", (long long)got, (unsigned long long)size,
	       used_mincore);
}

int main(void)
{
	th_seed();
	RUN(devq_chains);
	RUN(devq_real);
	RUN(numa_node_choice);
	RUN(numa_place_harmless);
	RUN(cached_bytes_agree);
	RUN(engine_choice_mincore);
	RUN(overlayfs_hot_file);
	return th_done();
}
