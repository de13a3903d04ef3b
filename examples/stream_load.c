/*
 * stream_load.c - a runtime-shaped use of ringload's streaming staging,
 * with nothing but api/ringload.h:
 *
 *   stream_load CHECKPOINT [BUDGET_BYTES]
 *
 * The loader reads the checkpoint (every tensor whole on one device)
 * through a window pool of BUDGET_BYTES (default: 64 MiB). This thread
 * pulls the pieces (rl_loader_next_piece) and "uploads" each into the
 * tensor's device buffer (here host memory; a GPU runtime would queue an
 * asynchronous host-to-device copy); a second thread, standing in for the
 * device's copy-completion callback, releases each piece once its copy
 * is done (rl_loader_release, any thread). At the end every tensor is
 * compared with a plain pread of the file, and one line says what was
 * loaded. Exit status 0 when every tensor matches.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ringload.h"

/* Copies "in flight": done by the uploader, released by the completer. */
struct completions {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	rl_piece q[64];
	size_t head, tail;
	int closed;
	rl_loader *ld;
	size_t released;
};

static void *completer(void *arg)
{
	struct completions *c = arg;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (c->head == c->tail && !c->closed)
			pthread_cond_wait(&c->cond, &c->lock);
		if (c->head == c->tail)
			break;
		rl_piece p = c->q[c->head++ % 64];

		pthread_mutex_unlock(&c->lock);
		if (rl_loader_release(c->ld, &p) == 0) /* the window may be refilled */
			c->released++;
		pthread_mutex_lock(&c->lock);
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static void copy_done(struct completions *c, const rl_piece *p)
{
	pthread_mutex_lock(&c->lock);
	while (c->tail - c->head == 64)
		pthread_cond_wait(&c->cond, &c->lock);
	c->q[c->tail++ % 64] = *p;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* Every shard against a pread of its tensor; returns how many differ. */
static size_t check(const rl_ckpt *ck, const rl_plan *plan, uint8_t **dev)
{
	size_t bad = 0;

	for (size_t s = 0; s < rl_plan_num_shards(plan); s++) {
		rl_shard_info si;
		rl_tensor_info ti;
		uint8_t *want;
		int fd;

		rl_plan_shard(plan, s, &si);
		if (rl_ckpt_tensor(ck, (size_t)rl_ckpt_find(ck, si.name), &ti) < 0)
			return bad + 1;
		want = malloc(si.nbytes + 1);
		fd = open(rl_ckpt_file_path(ck, ti.file), O_RDONLY);
		if (!want || fd < 0 || pread(fd, want, si.nbytes, (off_t)ti.offset) != (ssize_t)si.nbytes ||
		    memcmp(want, dev[s], si.nbytes))
			bad++;
		if (fd >= 0)
			close(fd);
		free(want);
	}
	return bad;
}

/* Pulls every piece into the device buffers; returns finish's result. */
static int upload(rl_loader *ld, const rl_plan *plan, uint8_t **dev, struct completions *c,
		  size_t *npieces)
{
	rl_piece p;
	int ret = rl_loader_start(ld, plan);

	while (ret == 0 && (ret = rl_loader_next_piece(ld, &p, -1)) == 1) {
		memcpy(dev[p.shard] + p.offset, p.data, p.length); /* the "device copy" */
		copy_done(c, &p);
		(*npieces)++;
		ret = 0;
	}
	return ret < 0 ? (rl_loader_finish(ld), ret) : rl_loader_finish(ld);
}

static int run(const char *path, int64_t budget)
{
	rl_ckpt *ck = rl_ckpt_create();
	rl_plan *plan = rl_plan_create();
	rl_loader *ld = rl_loader_create();
	struct completions c = { .ld = ld };
	uint8_t **dev = NULL;
	size_t n = 0, npieces = 0, bad = 0;
	pthread_t tid;
	int ret = ck && plan && ld ? rl_ckpt_open(ck, path) : -1;

	if (ret == 0)
		ret = rl_plan_set(plan, RL_PLAN_CHUNK_BYTES, rl_loader_request_bytes(ld, ck));
	if (ret == 0)
		ret = rl_plan_build(plan, ck, NULL);
	if (ret == 0)
		ret = rl_loader_set(ld, RL_OPT_STAGING, RL_STAGING_STREAM);
	if (ret == 0)
		ret = rl_loader_set(ld, RL_OPT_STAGING_BUDGET, budget);
	n = ret == 0 ? rl_plan_num_shards(plan) : 0;
	dev = calloc(n + 1, sizeof(*dev));
	for (size_t s = 0; s < n && dev; s++) {
		rl_shard_info si;

		rl_plan_shard(plan, s, &si);
		dev[s] = malloc(si.nbytes + 1); /* the tensor's "device" memory */
	}
	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.cond, NULL);
	pthread_create(&tid, NULL, completer, &c);
	if (ret == 0)
		ret = upload(ld, plan, dev, &c, &npieces);
	pthread_mutex_lock(&c.lock);
	c.closed = 1;
	pthread_cond_broadcast(&c.cond);
	pthread_mutex_unlock(&c.lock);
	pthread_join(tid, NULL);
	if (ret < 0)
		fprintf(stderr, "stream_load: %s: %s%s%s\n", path, rl_strerror(ret),
			ld ? ": " : "", ld ? rl_loader_errmsg(ld) : "");
	else
		bad = check(ck, plan, dev);
	if (ret == 0)
		printf("%zu tensors in %zu pieces through a %" PRId64 "-byte budget, %zu released, %zu differ\n",
		       n, npieces, budget, c.released, bad);
	for (size_t s = 0; dev && s < n; s++)
		free(dev[s]);
	free(dev);
	rl_loader_destroy(ld);
	rl_plan_destroy(plan);
	rl_ckpt_destroy(ck);
	return ret < 0 || bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: stream_load CHECKPOINT [BUDGET_BYTES]\n");
		return 2;
	}
	return run(argv[1], argc == 3 ? strtoll(argv[2], NULL, 0) : 64ll << 20);
}
