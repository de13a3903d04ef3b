/*
 * bench_fill.c - how fast this machine hands out fresh memory: maps SIZE
 * bytes, advises huge pages, and touches every 4 KiB page with one thread
 * per core (each its own contiguous part), as a loader that fills fresh
 * staging must; prints GB/s over the wall time from the mapping to the
 * last touch, and the CPU seconds spent. No loader can fill staging faster
 * than this, so perf/load_media.sh compares against min(medium, fill).
 *
 *   build/perf/bench_fill SIZE [THREADS]     (SIZE with K/M/G; THREADS: cores)
 *   output: "gbps cpu_seconds bytes threads"
 *
 * Also the way to prime a virtual machine that gives freed memory back to
 * its host: run it with the size of the next load just before timing it.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct part {
	unsigned char *p;
	size_t len;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *touch(void *arg)
{
	struct part *pt = arg;

	for (size_t i = 0; i < pt->len; i += 4096)
		pt->p[i] = 1;
	return NULL;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	switch (*end) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	}
	return (size_t)v;
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? parse_size(argv[1]) : 0, per;
	long nt = argc > 2 ? atol(argv[2]) : sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t th[256];
	struct part parts[256];
	double t0, c0;
	unsigned char *p;

	if (!size || nt < 1 || nt > 256) {
		fprintf(stderr, "usage: bench_fill SIZE [THREADS]\n");
		return 2;
	}
	c0 = cpu_s();
	t0 = now_s();
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("bench_fill: mmap");
		return 1;
	}
	madvise(p, size, MADV_HUGEPAGE);
	/* parts on 2 MiB boundaries: no huge page is shared by two threads */
	per = (size / (size_t)nt + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	for (long i = 0; i < nt; i++) {
		size_t off = (size_t)i * per;

		parts[i].p = p + (off < size ? off : size);
		parts[i].len = off < size ? (size - off < per ? size - off : per) : 0;
		if (pthread_create(th + i, NULL, touch, parts + i)) {
			perror("bench_fill: pthread_create");
			return 1;
		}
	}
	for (long i = 0; i < nt; i++)
		pthread_join(th[i], NULL);
	printf("%.3f %.3f %zu %ld\n", size / (now_s() - t0) / 1e9, cpu_s() - c0, size, nt);
	munmap(p, size);
	return 0;
}
