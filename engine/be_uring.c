/*
 * be_uring.c - the io_uring backend: setup flags tried newest first (each
 * dropped on -EINVAL), registered files, the buffer pool registered for
 * read_fixed (fewer buffers, or none, when RLIMIT_MEMLOCK refuses), SQEs
 * submitted and CQEs reaped in batches, and an eventfd read posted in the
 * ring so that a worker giving limiter bytes back can wake another
 * worker asleep in the kernel.
 */
#include <errno.h>
#include <liburing.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "eng_int.h"

#define WAKE_TAG 0   /* user_data of the eventfd read; requests are pointers */
#define CANCEL_TAG 1 /* user_data of the teardown's cancel (never a pointer) */
#define DRAIN_WAIT_S 30 /* one CQE's wait in the teardown drain, at most */

struct ur {
	struct io_uring ring;
	int ring_ok;
	int efd;
	int wake_armed;
	uint64_t wake_val;
	int reg_files;
	unsigned reg_bufs;      /* bounce buffers registered: indexes 0..reg_bufs-1 */
	unsigned reg_fixed;     /* fixed regions registered: reg_bufs.. */
	unsigned queued;        /* SQEs not yet taken by the kernel */
	unsigned in_kernel;     /* SQEs taken whose CQE is not reaped yet */
	uint32_t refused;       /* consecutive EAGAIN/EBUSY waits */
};

/*
 * Newest first. SINGLE_ISSUER + DEFER_TASKRUN run completion work only
 * when the owner enters the kernel to reap, in its own context, which
 * suits one thread that submits and reaps; COOP_TASKRUN avoids IPIs;
 * SUBMIT_ALL keeps submitting past a bad SQE (its error comes as a CQE).
 */
static const unsigned setup_flags[] = {
	IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
	IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER,
	IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN,
	0,
};

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>

/*
 * liburing maps and unmaps the rings with raw system calls, which
 * ThreadSanitizer does not see: when one thread's ring is unmapped and
 * another thread's is mapped at the same address, it takes the new ring's
 * first writes for races with the old one's. A release at teardown and an
 * acquire at setup, keyed by the rings' addresses, order the two for it
 * (they are ordered in fact: the kernel unmapped one before mapping the
 * other). ThreadSanitizer builds only.
 */
static void rings_sync(const struct io_uring *ring, int release)
{
	void *at[3] = { ring->sq.ring_ptr, ring->cq.ring_ptr, ring->sq.sqes };

	for (int i = 0; i < 3; i++) {
		if (release)
			__tsan_release(at[i]);
		else
			__tsan_acquire(at[i]);
	}
}
#else
static void rings_sync(const struct io_uring *ring, int release)
{
	(void)ring;
	(void)release;
}
#endif

static int arm_wake(struct ur *u)
{
	struct io_uring_sqe *sqe;

	if (u->wake_armed)
		return 0;
	sqe = io_uring_get_sqe(&u->ring);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_read(sqe, u->efd, &u->wake_val, sizeof(u->wake_val), 0);
	io_uring_sqe_set_data64(sqe, WAKE_TAG);
	u->wake_armed = 1;
	u->queued++;
	return 0;
}

static void register_files(struct be *be, struct ur *u)
{
	struct eng_run *rc = be->run;
	int *fds, ret;

	if (!rc->cx.o->register_files || !rc->cx.nfiles)
		return;
	fds = cm_mallocarray(2 * rc->cx.nfiles, sizeof(int));
	if (!fds)
		return;
	for (size_t i = 0; i < rc->cx.nfiles; i++) {
		fds[2 * i] = rc->cx.files[i].fd;
		fds[2 * i + 1] = rc->cx.files[i].dfd;  /* -1: a sparse slot */
	}
	ret = io_uring_register_files(&u->ring, fds, (unsigned)(2 * rc->cx.nfiles));
	cm_free(fds);
	if (ret == 0)
		u->reg_files = 1;
	else
		eng_note(&rc->b, ENG_FALLBACK_FILES_UNREGISTERED, "io_uring file registration refused (%s)", strerror(-ret));
}

/* The iovecs of the first n pool buffers, then of the run's fixed
 * regions when fixed != 0; NULL when out of memory. */
static struct iovec *buffer_iovs(const struct eng_run *rc, const struct eng_pool *pool,
				 unsigned n, int fixed)
{
	struct iovec *iov = cm_mallocarray((size_t)n + rc->cx.nfixed + 1, sizeof(*iov));

	for (unsigned i = 0; iov && i < n; i++) {
		iov[i].iov_base = eng_pool_buf(pool, (int)i);
		iov[i].iov_len = pool->bytes;
	}
	for (unsigned i = 0; iov && fixed && i < rc->cx.nfixed; i++) {
		iov[n + i].iov_base = rc->cx.fixed[i].base;
		iov[n + i].iov_len = rc->cx.fixed[i].len;
	}
	return iov;
}

/* The run's fixed regions with the n pool buffers, when this worker's
 * share of RLIMIT_MEMLOCK holds them all; else nothing registered. */
static int register_with_fixed(struct be *be, struct ur *u, unsigned n)
{
	struct eng_run *rc = be->run;
	uint64_t bytes = (uint64_t)n * be->w->pool.bytes;
	struct iovec *iov;
	int ret;

	for (unsigned i = 0; i < rc->cx.nfixed; i++)
		bytes += rc->cx.fixed[i].len;
	if (!rc->cx.nfixed || bytes > rc->cx.memlock_share)
		return -ENOMEM;
	iov = buffer_iovs(rc, &be->w->pool, n, 1);
	if (!iov)
		return -ENOMEM;
	ret = io_uring_register_buffers(&u->ring, iov, n + rc->cx.nfixed);
	cm_free(iov);
	if (ret == 0) {
		u->reg_bufs = n;
		u->reg_fixed = rc->cx.nfixed;
	}
	return ret;
}

/* Registers the pool's buffers and the run's fixed regions (a session's
 * windows) when this worker's share of RLIMIT_MEMLOCK allows them all;
 * else as many pool buffers as it allows, halving while the kernel
 * refuses (other users of the budget). */
static void register_buffers(struct be *be, struct ur *u)
{
	struct eng_run *rc = be->run;
	const struct eng_pool *pool = &be->w->pool;
	struct iovec *iov;
	unsigned n = pool->nbuf;
	int ret = 0, why = 0;

	if (!rc->cx.o->register_buffers || (!n && !rc->cx.nfixed))
		return;
	if (register_with_fixed(be, u, n) == 0 || !n)
		return;
	if (rc->cx.memlock_share / pool->bytes < n)
		n = (unsigned)(rc->cx.memlock_share / pool->bytes);
	iov = buffer_iovs(rc, pool, pool->nbuf, 0);
	if (!iov)
		return;
	while (n) {
		ret = io_uring_register_buffers(&u->ring, iov, n);
		if (ret == 0)
			break;
		why = ret;
		if (ret != -ENOMEM && ret != -EPERM && ret != -EFAULT) {
			n = 0;
			break;
		}
		n /= 2;
	}
	cm_free(iov);
	u->reg_bufs = n;
	if (n < pool->nbuf)
		eng_note(&rc->b, ENG_FALLBACK_BUFFERS_UNREGISTERED, "io_uring registered %u of %u buffers (%s)", n, pool->nbuf,
			 why ? strerror(-why) : "the worker's share of RLIMIT_MEMLOCK");
}

/* The registered fixed region holding [dst, dst + len), as a buffer
 * index, or -1. */
static int fixed_index(const struct eng_run *rc, const struct ur *u, const uint8_t *dst,
		       uint32_t len)
{
	for (unsigned i = 0; i < u->reg_fixed; i++) {
		const struct eng_fixed *f = rc->cx.fixed + i;

		if (dst >= f->base && (size_t)(dst - f->base) <= f->len &&
		    len <= f->len - (size_t)(dst - f->base))
			return (int)(u->reg_bufs + i);
	}
	return -1;
}

/* n SQEs were taken by the kernel (a submit's return value). */
static void taken(struct ur *u, int n)
{
	if (n <= 0)
		return;
	u->in_kernel += (unsigned)n;
	u->queued -= CM_MIN(u->queued, (unsigned)n);
}

/*
 * Before the ring goes: the owner's eventfd read is usually still posted,
 * and a hard submit or reap error can leave reads in the kernel. Ring
 * teardown is no barrier: io_uring_queue_exit(3) only
 * unmaps the rings and closes the descriptor, the kernel cancels what is
 * left in a work item that can outlive that close, and liburing's rule
 * (axboe/liburing#733) is that a buffer lives until its CQE is seen. A
 * read still in flight could then land in a bounce buffer or staging area
 * the engine frees or unmaps right after. So: cancel everything
 * (IORING_ASYNC_CANCEL_ANY, 5.19+; older kernels answer -EINVAL and the
 * reads simply finish), complete our own eventfd read, and reap a CQE for
 * every request the kernel took. Returns what could not be reaped.
 */
static unsigned ur_drain(struct ur *u)
{
	struct __kernel_timespec ts = { .tv_sec = DRAIN_WAIT_S, .tv_nsec = 0 };
	struct io_uring_sqe *sqe;
	uint64_t one = 1;
	int ret;

	if (!u->in_kernel)
		return 0;
	if (u->wake_armed && write(u->efd, &one, sizeof(one)) < 0) {
		/* counter overflow: already readable */
	}
	sqe = io_uring_get_sqe(&u->ring);
	if (sqe) {
		io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
		io_uring_sqe_set_data64(sqe, CANCEL_TAG);
		u->queued++;
		taken(u, io_uring_submit(&u->ring));
	}
	while (u->in_kernel) {
		struct io_uring_cqe *cqe;

		ret = io_uring_wait_cqe_timeout(&u->ring, &cqe, &ts);
		if (ret == -EINTR)
			continue;
		if (ret < 0)
			break; /* nothing more can be done: the ring exit cancels */
		u->in_kernel--;
		io_uring_cqe_seen(&u->ring, cqe);
	}
	return u->in_kernel;
}

static void ur_teardown(struct be *be)
{
	struct ur *u = be->priv;

	if (!u)
		return;
	if (u->ring_ok && be->w)
		be->w->st.abandoned += ur_drain(u);
	else if (u->ring_ok)
		ur_drain(u);
	if (u->ring_ok) {
		rings_sync(&u->ring, 1);
		/* The ring's own references to the files go when the kernel's
		 * deferred ring teardown runs, after the close: unregistered
		 * here, they are gone when the load returns, so that a
		 * umount right after it does not find the file system busy. */
		if (u->reg_files)
			io_uring_unregister_files(&u->ring);
		io_uring_queue_exit(&u->ring);
	}
	if (u->efd >= 0)
		close(u->efd);
	cm_free(u);
	be->priv = NULL;
}

/* Sets up the ring with the newest flag set the kernel takes, from the
 * hook's first (rc->uring_first), each with extra added. Returns 0 or
 * the last refusal. */
static int ring_init(struct be *be, struct ur *u, unsigned extra)
{
	struct eng_run *rc = be->run;
	size_t first = CM_MIN(rc->cx.o->uring_flags_first, CM_ARRAY_SIZE(setup_flags) - 1), i;
	int ret = -EINVAL;

	for (i = first; i < CM_ARRAY_SIZE(setup_flags); i++) {
		struct io_uring_params p;

		memset(&p, 0, sizeof(p));
		p.flags = setup_flags[i] | extra;
		ret = eng_hook_uring_setup_err(rc) ? -eng_hook_uring_setup_err(rc) :
		      io_uring_queue_init_params(be->w->qd + 1, &u->ring, &p);
		if (ret != -EINVAL)
			break;
	}
	if (ret == 0 && i > first)
		eng_note(&rc->b, ENG_FALLBACK_URING_FLAGS, "io_uring setup flags 0x%x refused, using 0x%x", setup_flags[first],
			 setup_flags[i]);
	return ret;
}

/* IOPOLL and SQPOLL as asked (rlperf's hipri and sqthread_poll); a
 * kernel that refuses them gets a ring without them and a note. */
static int ring_setup(struct be *be, struct ur *u)
{
	const struct eng_opts *o = be->run->cx.o;
	unsigned extra = (o->uring_iopoll ? IORING_SETUP_IOPOLL : 0) |
			 (o->uring_sqpoll ? IORING_SETUP_SQPOLL : 0);
	int ret = ring_init(be, u, extra);

	if (ret < 0 && extra && ret != -ENOMEM) {
		eng_note(&be->run->b, ENG_FALLBACK_URING_FLAGS, "io_uring %s refused (%s), set up without it",
			 !o->uring_sqpoll ? "IOPOLL" : !o->uring_iopoll ? "SQPOLL" :
			 "IOPOLL|SQPOLL", strerror(-ret));
		ret = ring_init(be, u, 0);
	}
	return ret;
}

static int ur_setup(struct be *be)
{
	struct ur *u = cm_calloc(1, sizeof(*u));
	int ret;

	if (!u)
		return -ENOMEM;
	u->efd = -1;
	be->priv = u;
	ret = ring_setup(be, u);
	/* ENOMEM here is the kernel's refusal (ring memory: RLIMIT_MEMLOCK
	 * before 5.12, the memory cgroup since), not our allocation failing. */
	if (ret == -ENOMEM)
		be->w->setup_kernel_nomem = 1;
	if (ret < 0) {
		/* -EPERM / -ENOSYS: io_uring disabled (sysctl, seccomp). */
		ur_teardown(be);
		return ret;
	}
	u->ring_ok = 1;
	rings_sync(&u->ring, 0);
	u->efd = eventfd(0, EFD_CLOEXEC);
	if (u->efd < 0) {
		ret = -errno;
		ur_teardown(be);
		return ret;
	}
	register_files(be, u);
	register_buffers(be, u);
	be->w->st.registered_files = u->reg_files;
	be->w->st.registered_buffers = u->reg_bufs;
	be->w->reg_fixed = u->reg_fixed;
	return 0;
}

static int ur_queue(struct be *be, struct eng_req *q)
{
	struct ur *u = be->priv;
	const struct eng_file *f = be->run->cx.files + q->r.file;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	uint64_t off = q->r.off + q->io_pos;
	uint8_t *dst = q->dst + q->io_pos;
	int fd = eng_req_fd(q, f), fixed;

	if (!sqe)
		return -EBUSY; /* cannot happen: the ring has qd + 1 entries */
	if (u->reg_files)
		fd = (int)(2 * q->r.file + (q->direct ? 1 : 0));
	if (q->buf >= 0 && (unsigned)q->buf < u->reg_bufs) {
		io_uring_prep_read_fixed(sqe, fd, dst, q->io_len, off, q->buf);
	} else if (q->buf < 0 && (fixed = fixed_index(be->run, u, dst, q->io_len)) >= 0) {
		io_uring_prep_read_fixed(sqe, fd, dst, q->io_len, off, fixed);
		be->w->st.reads_fixed += q->io_pos == 0; /* a read, not its retries */
	} else {
		io_uring_prep_read(sqe, fd, dst, q->io_len, off);
	}
	if (u->reg_files)
		sqe->flags |= IOSQE_FIXED_FILE;
	sqe->ioprio = (uint16_t)q->r.ioprio;
	io_uring_sqe_set_data(sqe, q);
	u->queued++;
	return 0;
}

static int ur_commit(struct be *be)
{
	struct ur *u = be->priv;
	int ret;

	if (!u->queued)
		return 0;
	ret = eng_hook_uring_eagain(be->run) ? -EAGAIN : io_uring_submit(&u->ring);
	if (ret >= 0) {
		taken(u, ret);
		return 0;
	}
	/* Out of kernel resources for now: the SQEs stay in the ring and the
	 * next reap (io_uring_submit_and_wait) submits them. */
	if (ret == -EAGAIN || ret == -EBUSY || ret == -EINTR)
		return 0;
	return ret;
}

static int ur_reap(struct be *be, struct eng_req **out, unsigned max, int wait)
{
	struct ur *u = be->priv;
	struct io_uring_cqe *cqes[64];
	unsigned n, got = 0, seen;
	int ret;

	if (wait) {
		/* the ring has room: qd + 1 entries; a polled ring reads no
		 * eventfd (one worker: nothing to wake it) */
		if (!(u->ring.flags & IORING_SETUP_IOPOLL))
			arm_wake(u);
		ret = eng_hook_uring_eagain(be->run) ? -EAGAIN :
		      io_uring_submit_and_wait(&u->ring, 1);
		if (ret >= 0) {
			taken(u, ret);
			u->refused = 0;
		} else if (ret != -EINTR && ret != -EAGAIN && ret != -EBUSY && ret != -ETIME) {
			return ret;
		} else if (ret != -EINTR && ret != -ETIME) {
			/* Out of kernel resources: no busy spin while they
			 * stay short. */
			eng_backoff(++u->refused);
		}
	} else if (u->ring.flags & IORING_SETUP_DEFER_TASKRUN) {
		/* Deferred completions are posted only when we ask. */
		ret = io_uring_get_events(&u->ring);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
			return ret;
	}
	if (max > CM_ARRAY_SIZE(cqes))
		max = CM_ARRAY_SIZE(cqes);
	n = io_uring_peek_batch_cqe(&u->ring, cqes, max);
	for (seen = 0; seen < n; seen++) {
		struct io_uring_cqe *cqe = cqes[seen];
		struct eng_req *q = io_uring_cqe_get_data(cqe);

		u->in_kernel--;
		if (cqe->user_data == WAKE_TAG) {
			u->wake_armed = 0;
			continue;
		}
		q->res = cqe->res;
		out[got++] = q;
	}
	io_uring_cq_advance(&u->ring, n);
	return (int)got;
}

/* Any thread: completes the posted eventfd read. */
static void ur_wake(struct be *be)
{
	struct ur *u = be->priv;
	uint64_t one = 1;

	if (write(u->efd, &one, sizeof(one)) < 0) {
		/* eventfd writes fail only on counter overflow: it is
		 * already signalled. */
	}
}

const struct be_ops eng_uring_ops = {
	.version = ENG_BE_OPS_VERSION,
	.id = ENG_IO_URING,
	.name = "io_uring",
	.caps = ENG_CAP_FIXED_BUFFERS | ENG_CAP_FIXED_FILES | ENG_CAP_POLL | ENG_CAP_SQ_THREAD |
		ENG_CAP_IOPRIO | ENG_CAP_KERNEL_QUEUE,
	.setup = ur_setup,
	.queue = ur_queue,
	.commit = ur_commit,
	.reap = ur_reap,
	.wake = ur_wake,
	.teardown = ur_teardown,
};
