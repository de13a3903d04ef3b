/*
 * fakecuda.c - a stand-in for libcuda.so.1 on machines without a GPU:
 * the driver API entry points ringload's CUDA sink uses, behaving as the
 * driver documents them. Device memory is host memory, every copy is
 * checked against its allocation, and async copies run in stream order
 * on a thread per stream after a delay, reading their source only then
 * (so a window reused too early shows as wrong device bytes). Faults
 * come from the environment (fakecuda.h).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fakecuda.h"

#define EXPORT __attribute__((visibility("default")))
#define CM_MIN_(a, b) ((a) < (b) ? (a) : (b))

enum {
	OK = 0, E_INVALID_VALUE = 1, E_OOM = 2, E_NOT_INITIALIZED = 3, E_NO_DEVICE = 100,
	E_INVALID_DEVICE = 101, E_INVALID_CONTEXT = 201, E_INVALID_HANDLE = 400,
	E_NOT_READY = 600, E_ILLEGAL_ADDRESS = 700, E_ALREADY_REGISTERED = 712,
	E_NOT_REGISTERED = 713, E_LAUNCH_FAILED = 719, E_NOT_SUPPORTED = 801,
};

#define MAX_DEVS 64
#define CTX_STACK 16
#define ATTR_MAX_PITCH 11 /* CU_DEVICE_ATTRIBUTE_MAX_PITCH */

struct mem2d {
	size_t srcXInBytes, srcY;
	int srcMemoryType;
	const void *srcHost;
	unsigned long long srcDevice;
	void *srcArray;
	size_t srcPitch;
	size_t dstXInBytes, dstY;
	int dstMemoryType;
	void *dstHost;
	unsigned long long dstDevice;
	void *dstArray;
	size_t dstPitch;
	size_t WidthInBytes;
	size_t Height;
};

struct CUevent_st {
	uint64_t want, done;    /* records made; records run */
	long queued;            /* ops queued that name it (records, waits) */
	int err, dev;
};

/* One queued operation: a copy of height rows, an event record, or a
 * wait for an event (cuStreamWaitEvent: wait set). */
struct op {
	struct op *next;
	struct CUevent_st *ev;
	uint64_t gen;
	int wait;
	uint8_t *dst;
	const uint8_t *src;
	size_t width, height, spitch, dpitch;
	int fail;
};

struct CUstream_st {
	pthread_t tid;
	struct op *head, *tail;
	int stop, err, dev;
};

/* dev: an allocation's device; for host memory, 0 registered, 1 from
 * cuMemHostAlloc. */
struct region { uintptr_t base; size_t len; int dev, mapped; };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* everything below */
static pthread_cond_t moved = PTHREAD_COND_INITIALIZER;  /* an op ran or was queued */
static struct region *allocs, *pins;
static size_t nallocs, npins, cap_allocs, cap_pins;
static struct fakecuda_stats st;
static long alloc_calls, copy_calls, record_calls, push_calls, oom_at, fail_copy_at;
static long fail_record_at, push_fail_at, max_pitch, mem_free;
static long delay_us = 300;
static int ndevices = 2, no_device, ctx_fail, no_data, initialized, fail_copy_err;
static int register_fail, hostalloc_fail;
static long ctx_refs[MAX_DEVS];
static int sticky[MAX_DEVS];           /* a context's sticky error, as the driver's */
static long inflight_dev[MAX_DEVS];    /* ops queued on the device's streams */
static uint64_t used_dev[MAX_DEVS];    /* bytes allocated on the device */
static char call_log[1 << 16];          /* FAKECUDA's log of stream calls */
static size_t log_len;
static struct CUstream_st *legacy;     /* the NULL stream's, made at first use */
/*
 * This thread's context stack: devices, innermost last. Initial-exec TLS
 * (from the static TLS surplus glibc keeps for libraries loaded with
 * dlopen, as this one is): a dynamic block (__tls_get_addr) is what
 * LeakSanitizer's end-of-run scan walks, and with GCC 12's sanitizer on
 * glibc 2.36 it read a bogus range there now and then ("Tracer caught
 * signal 11", test_transport under make asan: 3 of 16 loaded runs).
 */
#define FC_TLS __thread __attribute__((tls_model("initial-exec")))
static FC_TLS int ctx_stack[CTX_STACK];
static FC_TLS int ctx_depth;
#define current (ctx_depth ? ctx_stack[ctx_depth - 1] : -1)
/* The current device as an index, once a context is known to be current. */
#define CUR ((unsigned)current % MAX_DEVS)

static long env_long(const char *name, long dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 10) : dflt;
}

EXPORT void fakecuda_reset(void)
{
	pthread_mutex_lock(&lock);
	ndevices = (int)env_long("FAKECUDA_DEVICES", 2);
	no_device = (int)env_long("FAKECUDA_NO_DEVICE", 0);
	ctx_fail = (int)env_long("FAKECUDA_CTX_FAIL", 0);
	oom_at = env_long("FAKECUDA_OOM_AT", 0);
	fail_copy_at = env_long("FAKECUDA_FAIL_COPY_AT", 0);
	delay_us = env_long("FAKECUDA_DELAY_US", 300);
	fail_record_at = env_long("FAKECUDA_FAIL_RECORD_AT", 0);
	no_data = (int)env_long("FAKECUDA_NO_DATA", 0);
	fail_copy_err = (int)env_long("FAKECUDA_FAIL_COPY_ERR", E_LAUNCH_FAILED);
	push_fail_at = env_long("FAKECUDA_PUSH_FAIL_AT", 0);
	max_pitch = env_long("FAKECUDA_MAX_PITCH", 2147483647);
	register_fail = (int)env_long("FAKECUDA_REGISTER_FAIL", 0);
	hostalloc_fail = (int)env_long("FAKECUDA_HOSTALLOC_FAIL", 0);
	mem_free = env_long("FAKECUDA_MEM_FREE", 64L << 30);
	alloc_calls = copy_calls = record_calls = push_calls = 0;
	st.copies = st.copies_2d = st.out_of_bounds = st.unpinned = st.no_context = 0;
	st.unbalanced = 0;
	st.bytes_copied = 0;
	memset(sticky, 0, sizeof(sticky)); /* a new process, as far as tests go */
	log_len = 0;
	call_log[0] = '\0';
	pthread_mutex_unlock(&lock);
}

EXPORT void fakecuda_stats(struct fakecuda_stats *out)
{
	pthread_mutex_lock(&lock);
	*out = st;
	pthread_mutex_unlock(&lock);
}

EXPORT void *fakecuda_host(unsigned long long p)
{
	return (void *)(uintptr_t)p;
}

EXPORT size_t fakecuda_log(char *buf, size_t cap)
{
	pthread_mutex_lock(&lock);
	if (cap)
		snprintf(buf, cap, "%s", call_log);
	pthread_mutex_unlock(&lock);
	return log_len;
}

/* One line of the call log. Under lock. */
__attribute__((format(printf, 1, 2))) static void log_call(const char *fmt, ...)
{
	va_list ap;
	int n;

	if (log_len + 1 >= sizeof(call_log))
		return;
	va_start(ap, fmt);
	n = vsnprintf(call_log + log_len, sizeof(call_log) - log_len, fmt, ap);
	va_end(ap);
	if (n > 0)
		log_len = CM_MIN_(log_len + (size_t)n, sizeof(call_log) - 1);
}

__attribute__((constructor)) static void fake_init(void)
{
	fakecuda_reset();
}

/* FAKECUDA_REPORT: what the process left behind, once it exits. */
__attribute__((destructor)) static void fake_report(void)
{
	const char *path = getenv("FAKECUDA_REPORT");
	FILE *f = path && *path ? fopen(path, "w") : NULL;

	if (!f)
		return;
	fprintf(f, "allocs %ld streams %ld events %ld ctx %ld pinned %ld inflight %ld\n",
		st.allocs, st.streams, st.events, st.ctx_refs, st.registered + st.host_allocs,
		st.inflight);
	fclose(f);
}

/* ------------------------------------------------------------------ */
/* Regions: allocations and registered host memory. Under lock. */

static int push_region(struct region **v, size_t *n, size_t *cap, struct region r)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 16;
		struct region *nv = realloc(*v, c * sizeof(*nv));

		if (!nv)
			return -1;
		*v = nv;
		*cap = c;
	}
	(*v)[(*n)++] = r;
	return 0;
}

/* The region holding [p, p + len), or -1. */
static long find_region(const struct region *v, size_t n, uintptr_t p, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (p >= v[i].base && len <= v[i].len && p - v[i].base <= v[i].len - len)
			return (long)i;
	return -1;
}

static void drop_region(struct region *v, size_t *n, size_t i)
{
	v[i] = v[--*n];
}

static int no_ctx(void)
{
	if (current >= 0)
		return 0;
	st.no_context++;
	return 1;
}

/* The result of a call in the current context: no context, or its
 * sticky error, which every later call reports, as the driver's do
 * after a launch failure or an illegal address. Under lock. */
static int ctx_check(void)
{
	if (no_ctx())
		return E_INVALID_CONTEXT;
	return sticky[CUR];
}

/* ------------------------------------------------------------------ */
/* Initialization, devices, contexts */

EXPORT int cuInit(unsigned flags)
{
	int r;

	pthread_mutex_lock(&lock);
	r = flags ? E_INVALID_VALUE : no_device ? E_NO_DEVICE : OK;
	initialized = r == OK;
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT int cuDeviceGetCount(int *n)
{
	*n = initialized ? ndevices : 0;
	return initialized ? OK : E_NOT_INITIALIZED;
}

EXPORT int cuDeviceGet(int *dev, int ordinal)
{
	if (!initialized)
		return E_NOT_INITIALIZED;
	if (ordinal < 0 || ordinal >= ndevices || ordinal >= MAX_DEVS)
		return E_INVALID_DEVICE;
	*dev = ordinal;
	return OK;
}

EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
	int r = OK;

	pthread_mutex_lock(&lock);
	if (dev < 0 || dev >= ndevices || dev >= MAX_DEVS)
		r = E_INVALID_DEVICE;
	else if (ctx_fail)
		r = E_INVALID_CONTEXT;
	else {
		ctx_refs[dev]++;
		st.ctx_refs++;
		*ctx = (void *)(uintptr_t)(dev + 1);
	}
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT int cuDevicePrimaryCtxRelease_v2(int dev)
{
	int r = OK;

	pthread_mutex_lock(&lock);
	if (dev < 0 || dev >= MAX_DEVS || ctx_refs[dev] <= 0)
		r = E_INVALID_CONTEXT;
	else {
		ctx_refs[dev]--;
		st.ctx_refs--;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

/* A stack per thread, as the driver's: a pop makes the context below
 * current again (a caller's, such as torch's); a pop of an empty stack
 * is refused and counted (unbalanced). FAKECUDA_PUSH_FAIL_AT fails the
 * Nth push, leaving the stack as it was. */
EXPORT int cuCtxPushCurrent_v2(void *ctx)
{
	int r = OK;

	pthread_mutex_lock(&lock);
	if (!ctx || ++push_calls == push_fail_at)
		r = E_INVALID_CONTEXT;
	else if (ctx_depth == CTX_STACK)
		r = E_OOM;
	else
		ctx_stack[ctx_depth++] = (int)(uintptr_t)ctx - 1;
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT int cuCtxPopCurrent_v2(void **ctx)
{
	if (!ctx_depth) {
		pthread_mutex_lock(&lock);
		st.unbalanced++;
		pthread_mutex_unlock(&lock);
		return E_INVALID_CONTEXT;
	}
	ctx_depth--;
	if (ctx)
		*ctx = (void *)(uintptr_t)(ctx_stack[ctx_depth] + 1);
	return OK;
}

EXPORT int cuCtxGetCurrent(void **ctx)
{
	*ctx = ctx_depth ? (void *)(uintptr_t)(current + 1) : NULL;
	return OK;
}

/* Waits for every stream of the current context; its sticky error. */
EXPORT int cuCtxSynchronize(void)
{
	int r;

	pthread_mutex_lock(&lock);
	if (no_ctx()) {
		pthread_mutex_unlock(&lock);
		return E_INVALID_CONTEXT;
	}
	while (inflight_dev[CUR])
		pthread_cond_wait(&moved, &lock);
	r = sticky[CUR];
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT int cuDeviceGetAttribute(int *v, int attr, int dev)
{
	if (!initialized)
		return E_NOT_INITIALIZED;
	if (dev < 0 || dev >= ndevices || dev >= MAX_DEVS)
		return E_INVALID_DEVICE;
	if (attr != ATTR_MAX_PITCH)
		return E_INVALID_VALUE; /* the only one the fake knows */
	*v = (int)max_pitch;
	return OK;
}

/* ------------------------------------------------------------------ */
/* Memory */

/* Device memory: host memory, or (no_data) an untouched reservation,
 * freed as it was made (mapped). */
static void *dev_alloc(size_t bytes)
{
	void *m;

	if (!no_data) /* aligned as the driver's (at least 256 bytes) */
		return posix_memalign(&m, 512, bytes) ? NULL : m;
	m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		 -1, 0);
	return m == MAP_FAILED ? NULL : m;
}

static void dev_free(void *m, size_t bytes, int mapped)
{
	if (mapped)
		munmap(m, bytes);
	else
		free(m);
}

EXPORT int cuMemAlloc_v2(unsigned long long *p, size_t bytes)
{
	void *m;
	int r = OK;

	pthread_mutex_lock(&lock);
	if ((r = ctx_check()) != OK)
		;
	else if (!bytes)
		r = E_INVALID_VALUE;
	else if (++alloc_calls == oom_at || bytes > (uint64_t)mem_free - used_dev[CUR] ||
		 !(m = dev_alloc(bytes)))
		r = E_OOM;
	else if (push_region(&allocs, &nallocs, &cap_allocs,
			     (struct region){ (uintptr_t)m, bytes, current, no_data }) < 0) {
		dev_free(m, bytes, no_data);
		r = E_OOM;
	} else {
		if (!no_data) /* never what a checkpoint holds by chance */
			memset(m, 0xdb, bytes);
		st.allocs++;
		used_dev[CUR] += bytes;
		*p = (uintptr_t)m;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT int cuMemFree_v2(unsigned long long p)
{
	long i;
	int found;

	pthread_mutex_lock(&lock);
	for (i = 0; i < (long)nallocs && allocs[i].base != p; i++)
		;
	found = i < (long)nallocs;
	if (found) {
		dev_free((void *)(uintptr_t)p, allocs[i].len, allocs[i].mapped);
		used_dev[allocs[i].dev] -= allocs[i].len;
		drop_region(allocs, &nallocs, (size_t)i);
		st.allocs--;
	}
	pthread_mutex_unlock(&lock);
	return found ? OK : E_INVALID_VALUE;
}

/* Free memory of the current device: FAKECUDA_MEM_FREE less what is
 * allocated; the total is the same. */
EXPORT int cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
	int r;

	pthread_mutex_lock(&lock);
	r = ctx_check();
	if (r == OK) {
		*free_b = (size_t)mem_free - used_dev[CUR];
		*total = (size_t)mem_free;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

/* FAKECUDA_REGISTER_FAIL=code refuses every registration with that code
 * (some virtualised and confidential-computing GPUs refuse it). */
EXPORT int cuMemHostRegister_v2(void *p, size_t bytes, unsigned flags)
{
	int r = OK;

	pthread_mutex_lock(&lock);
	if ((r = ctx_check()) != OK)
		;
	else if (register_fail)
		r = register_fail;
	else if (!p || !bytes)
		r = E_INVALID_VALUE;
	else if (find_region(pins, npins, (uintptr_t)p, 1) >= 0 ||
		 find_region(pins, npins, (uintptr_t)p + bytes - 1, 1) >= 0)
		r = E_ALREADY_REGISTERED;
	else if (push_region(&pins, &npins, &cap_pins, (struct region){ (uintptr_t)p, bytes, 0, 0 }) < 0)
		r = E_OOM;
	else {
		st.registered++;
		st.pinned_bytes += bytes;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT int cuMemHostUnregister(void *p)
{
	long i;
	int found;

	pthread_mutex_lock(&lock);
	for (i = 0; i < (long)npins && (pins[i].base != (uintptr_t)p || pins[i].dev); i++)
		;
	found = i < (long)npins;
	if (found) {
		st.pinned_bytes -= pins[i].len;
		drop_region(pins, &npins, (size_t)i);
		st.registered--;
	}
	pthread_mutex_unlock(&lock);
	return found ? OK : E_NOT_REGISTERED;
}

/* Page-locked host memory of the driver's (FAKECUDA_HOSTALLOC_FAIL=1:
 * out of memory, as when the driver cannot lock more). */
EXPORT int cuMemHostAlloc(void **pp, size_t bytes, unsigned flags)
{
	void *m = NULL;
	int r;

	pthread_mutex_lock(&lock);
	r = ctx_check();
	if (r == OK && (hostalloc_fail || !bytes))
		r = bytes ? E_OOM : E_INVALID_VALUE;
	if (r == OK && (posix_memalign(&m, 4096, bytes) != 0 ||
			push_region(&pins, &npins, &cap_pins,
				    (struct region){ (uintptr_t)m, bytes, 1, 0 }) < 0)) {
		free(m);
		r = E_OOM;
	}
	if (r == OK) {
		st.host_allocs++;
		*pp = m;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT int cuMemFreeHost(void *p)
{
	long i;
	int found;

	pthread_mutex_lock(&lock);
	for (i = 0; i < (long)npins && (pins[i].base != (uintptr_t)p || !pins[i].dev); i++)
		;
	found = i < (long)npins;
	if (found) {
		drop_region(pins, &npins, (size_t)i);
		st.host_allocs--;
		free(p);
	}
	pthread_mutex_unlock(&lock);
	return found ? OK : E_INVALID_VALUE;
}

/* ------------------------------------------------------------------ */
/* Streams: a thread each, running queued ops in order */

static void run_op(struct CUstream_st *s, struct op *o)
{
	if (o->wait) { /* until the event's record (at the call) has run */
		while (o->ev->done < o->gen)
			pthread_cond_wait(&moved, &lock);
		return;
	}
	if (o->ev) {
		if (o->gen > o->ev->done)
			o->ev->done = o->gen;
		o->ev->err = s->err;
		return;
	}
	if (o->fail) {
		s->err = fail_copy_err;
		sticky[s->dev] = fail_copy_err;
		return;
	}
	pthread_mutex_unlock(&lock);
	if (delay_us)
		usleep((useconds_t)delay_us);
	for (size_t k = 0; k < o->height; k++)
		memcpy(o->dst + k * o->dpitch, o->src + k * o->spitch, o->width);
	pthread_mutex_lock(&lock);
}

static void *stream_main(void *arg)
{
	struct CUstream_st *s = arg;

	pthread_mutex_lock(&lock);
	for (;;) {
		struct op *o = s->head;

		if (!o) {
			if (s->stop)
				break;
			pthread_cond_wait(&moved, &lock);
			continue;
		}
		run_op(s, o);
		s->head = o->next;
		if (!s->head)
			s->tail = NULL;
		st.inflight--;
		inflight_dev[s->dev]--;
		if (o->ev)
			o->ev->queued--;
		free(o);
		pthread_cond_broadcast(&moved);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

EXPORT int cuStreamCreate(struct CUstream_st **out, unsigned flags)
{
	struct CUstream_st *s;

	int r, dev;

	pthread_mutex_lock(&lock);
	r = ctx_check();
	dev = current;
	pthread_mutex_unlock(&lock);
	if (r != OK)
		return r;
	s = calloc(1, sizeof(*s));
	if (!s)
		return E_OOM;
	s->dev = dev;
	if (pthread_create(&s->tid, NULL, stream_main, s) != 0) {
		free(s);
		return E_OOM;
	}
	pthread_mutex_lock(&lock);
	st.streams++;
	pthread_mutex_unlock(&lock);
	*out = s;
	return OK;
}

/* The driver lets queued work finish after a destroy; so does this. */
EXPORT int cuStreamDestroy_v2(struct CUstream_st *s)
{
	if (!s)
		return E_INVALID_HANDLE;
	pthread_mutex_lock(&lock);
	s->stop = 1;
	pthread_cond_broadcast(&moved);
	pthread_mutex_unlock(&lock);
	pthread_join(s->tid, NULL);
	pthread_mutex_lock(&lock);
	st.streams--;
	pthread_mutex_unlock(&lock);
	free(s);
	return OK;
}

EXPORT int cuStreamSynchronize(struct CUstream_st *s)
{
	int r;

	pthread_mutex_lock(&lock);
	log_call("sync %p\n", (void *)s);
	while (s->head)
		pthread_cond_wait(&moved, &lock);
	r = s->err ? s->err : sticky[s->dev];
	pthread_mutex_unlock(&lock);
	return r;
}

/* The NULL stream (the legacy default stream: torch's default one) of
 * the current device. Under lock. */
static struct CUstream_st *legacy_stream(void)
{
	if (legacy)
		return legacy;
	legacy = calloc(1, sizeof(*legacy));
	if (legacy && pthread_create(&legacy->tid, NULL, stream_main, legacy) != 0) {
		free(legacy);
		legacy = NULL;
	}
	if (legacy)
		legacy->dev = current < 0 ? 0 : current;
	return legacy;
}

static int enqueue(struct CUstream_st *s, struct op *o)
{
	if (!s)
		s = legacy_stream();
	if (!s) {
		free(o);
		return E_OOM;
	}
	st.inflight++;
	inflight_dev[s->dev]++;
	if (o->ev)
		o->ev->queued++;
	if (s->tail)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	pthread_cond_broadcast(&moved);
	return OK;
}

/* Checks and queues a copy of height rows of width bytes. Under lock. */
static int queue_copy(struct CUstream_st *s, struct op *o)
{
	size_t span = (o->height - 1) * o->dpitch + o->width;
	size_t sspan = (o->height - 1) * o->spitch + o->width;
	int r = ctx_check();

	if (r != OK)
		return r;
	if (find_region(allocs, nallocs, (uintptr_t)o->dst, span) < 0) {
		st.out_of_bounds++;
		return E_INVALID_VALUE;
	}
	if (find_region(pins, npins, (uintptr_t)o->src, sspan) < 0)
		st.unpinned++;
	o->fail = ++copy_calls == fail_copy_at;
	st.copies++;
	st.bytes_copied += (unsigned long long)o->width * o->height;
	log_call("copy %p\n", (void *)s);
	if (no_data) /* counted, moves nothing */
		o->height = 0;
	return enqueue(s, o);
}

EXPORT int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src, size_t bytes,
				struct CUstream_st *s)
{
	struct op *o = calloc(1, sizeof(*o));
	int r;

	if (!o)
		return E_OOM;
	*o = (struct op){ .dst = (uint8_t *)(uintptr_t)dst, .src = src, .width = bytes,
			  .height = 1 };
	if (!bytes) {
		free(o);
		return OK;
	}
	pthread_mutex_lock(&lock);
	r = queue_copy(s, o);
	pthread_mutex_unlock(&lock);
	if (r != OK)
		free(o);
	return r;
}

EXPORT int cuMemcpy2DAsync_v2(const struct mem2d *c, struct CUstream_st *s)
{
	struct op *o;
	int r;

	if (c->srcMemoryType != 1 || c->dstMemoryType != 2 || !c->WidthInBytes || !c->Height ||
	    c->srcPitch < c->WidthInBytes || c->dstPitch < c->WidthInBytes ||
	    c->srcPitch > (size_t)max_pitch || c->dstPitch > (size_t)max_pitch)
		return E_INVALID_VALUE; /* pitches over CU_DEVICE_ATTRIBUTE_MAX_PITCH too */
	o = calloc(1, sizeof(*o));
	if (!o)
		return E_OOM;
	*o = (struct op){ .dst = (uint8_t *)(uintptr_t)c->dstDevice + c->dstY * c->dstPitch +
				 c->dstXInBytes,
			  .src = (const uint8_t *)c->srcHost + c->srcY * c->srcPitch + c->srcXInBytes,
			  .width = c->WidthInBytes, .height = c->Height, .spitch = c->srcPitch,
			  .dpitch = c->dstPitch };
	pthread_mutex_lock(&lock);
	r = queue_copy(s, o);
	if (r == OK)
		st.copies_2d++;
	pthread_mutex_unlock(&lock);
	if (r != OK)
		free(o);
	return r;
}

EXPORT int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t bytes)
{
	int r = OK;

	pthread_mutex_lock(&lock);
	if ((r = ctx_check()) != OK)
		;
	else if (find_region(allocs, nallocs, (uintptr_t)src, bytes) < 0) {
		st.out_of_bounds++;
		r = E_INVALID_VALUE;
	}
	pthread_mutex_unlock(&lock);
	if (r == OK)
		memcpy(dst, (const void *)(uintptr_t)src, bytes);
	return r;
}

/* ------------------------------------------------------------------ */
/* Events */

EXPORT int cuEventCreate(struct CUevent_st **out, unsigned flags)
{
	struct CUevent_st *e;

	int r;

	pthread_mutex_lock(&lock);
	if ((r = ctx_check()) != OK) {
		pthread_mutex_unlock(&lock);
		return r;
	}
	e = calloc(1, sizeof(*e));
	if (e) {
		st.events++;
		e->dev = current;
	}
	pthread_mutex_unlock(&lock);
	if (!e)
		return E_OOM;
	*out = e;
	return OK;
}

EXPORT int cuEventDestroy_v2(struct CUevent_st *e)
{
	if (!e)
		return E_INVALID_HANDLE;
	pthread_mutex_lock(&lock);
	/* A record or a wait still queued runs later: wait for it rather
	 * than let it touch freed memory (the driver defers the release
	 * likewise; a caller's stream may wait on the library's event after
	 * the library destroyed it). */
	while (e->done < e->want || e->queued)
		pthread_cond_wait(&moved, &lock);
	st.events--;
	pthread_mutex_unlock(&lock);
	free(e);
	return OK;
}

EXPORT int cuEventRecord(struct CUevent_st *e, struct CUstream_st *s)
{
	struct op *o = calloc(1, sizeof(*o));
	int r;

	if (!o)
		return E_OOM;
	if (!e) {
		free(o);
		return E_INVALID_HANDLE;
	}
	pthread_mutex_lock(&lock);
	r = ++record_calls == fail_record_at ? E_INVALID_HANDLE : ctx_check();
	if (r != OK) {
		pthread_mutex_unlock(&lock);
		free(o);
		return r;
	}
	o->ev = e;
	o->gen = ++e->want;
	log_call("record %p %p\n", (void *)e, (void *)s);
	r = enqueue(s, o);
	if (r != OK)
		e->want--;
	pthread_mutex_unlock(&lock);
	return r;
}

/* Later work of s waits for e's latest record (at the time of the call);
 * an event never recorded is complete. */
EXPORT int cuStreamWaitEvent(struct CUstream_st *s, struct CUevent_st *e, unsigned flags)
{
	struct op *o;
	int r;

	if (!e || flags)
		return !e ? E_INVALID_HANDLE : E_INVALID_VALUE;
	o = calloc(1, sizeof(*o));
	if (!o)
		return E_OOM;
	pthread_mutex_lock(&lock);
	r = ctx_check();
	if (r == OK) {
		*o = (struct op){ .ev = e, .gen = e->want, .wait = 1 };
		log_call("wait %p %p\n", (void *)s, (void *)e);
		r = enqueue(s, o);
	} else {
		free(o);
	}
	pthread_mutex_unlock(&lock);
	return r;
}

/* An event never recorded is complete, as in the driver. */
EXPORT int cuEventQuery(struct CUevent_st *e)
{
	int r;

	pthread_mutex_lock(&lock);
	r = e->done < e->want ? E_NOT_READY : e->err;
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT int cuEventSynchronize(struct CUevent_st *e)
{
	int r;

	pthread_mutex_lock(&lock);
	while (e->done < e->want)
		pthread_cond_wait(&moved, &lock);
	r = e->err ? e->err : sticky[e->dev];
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT int cuGetErrorName(int r, const char **name)
{
	static const struct { int r; const char *name; } names[] = {
		{ OK, "CUDA_SUCCESS" }, { E_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE" },
		{ E_OOM, "CUDA_ERROR_OUT_OF_MEMORY" }, { E_NO_DEVICE, "CUDA_ERROR_NO_DEVICE" },
		{ E_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE" },
		{ E_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT" },
		{ E_NOT_READY, "CUDA_ERROR_NOT_READY" },
		{ E_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE" },
		{ E_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED" },
		{ E_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS" },
		{ E_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED" },
		{ E_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED" },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].r == r) {
			*name = names[i].name;
			return OK;
		}
	*name = NULL;
	return E_INVALID_VALUE;
}
