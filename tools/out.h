/*
 * out.h - writes the dump of `ringload load --out DIR` so that nothing
 * incomplete can be mistaken for a dump: every file goes into
 * DIR.partial-<tag> beside DIR, which out_publish() syncs once (syncfs) and
 * renames to DIR; out_abort() removes it. An existing DIR is refused
 * unless OUT_FORCE, which replaces it in one step (renameat2
 * RENAME_EXCHANGE) and then removes the old tree; OUT_FORCE replaces only
 * an earlier dump or an empty directory, never other data.
 *
 * Layout (docs/cli.md): DIR/<device id>/<tensor>.bin for every device and
 * every tensor of the plan (the shard's bytes in C order; empty where the
 * device holds none of the tensor; '/' and '%' in names as %2F and %25),
 * and DIR/<device id>/manifest.json describing each shard.
 *
 * Several processes writing one dump (MPI): one process calls out_begin()
 * (it creates the partial directory), the others out_begin() with OUT_JOIN
 * and the same tag after it exists; each writes the folders of its own
 * devices; after every process succeeded exactly one calls out_publish(),
 * and after any failure exactly one calls out_abort() on the directory it
 * created (the others' out_abort() only frees memory).
 *
 * Functions return 0 or a negative code (-errno, RL_E_CANCELED when the
 * progress callback asked to stop, RL_E_INVALID_ARG for a name that cannot
 * be a file or a DIR that may not be replaced), with one line naming the
 * path in o->err. Not thread-safe: one thread at a time per out_dir.
 */
#ifndef TOOLS_OUT_H
#define TOOLS_OUT_H

#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ringload.h"

enum { OUT_FORCE = 1, OUT_JOIN = 2 };

/* Called between files and every 8 MiB written; non-zero stops the write. */
typedef int (*out_progress_fn)(void *user, uint64_t done, uint64_t total);

struct out_dir {
	char dir[PATH_MAX];      /* DIR, without trailing '/' */
	char partial[PATH_MAX];  /* DIR.partial-<tag> */
	int flags;
	atomic_int created;      /* the partial directory is ours to remove (the
				  * signal thread's cleanup may ask too) */
	const char **names;      /* every tensor of the plan, sorted, once */
	size_t nnames;
	char **sources;          /* absolute path of each checkpoint file */
	size_t nsources;
	uint64_t total, done;    /* bytes of this process's shards; written so far */
	unsigned char *writes;   /* streaming: per shard, 1 when its .bin is written from it */
	size_t nwrites;
	char err[2 * PATH_MAX + 512];  /* as long as the library's messages */
	char warn[2 * PATH_MAX + 256]; /* out_publish(): the old DIR is not removed (yet) */
	int (*stop)(void);       /* OUT_FORCE: non-zero stops removing the old DIR (may be NULL) */
};

/*
 * Checks every tensor name of plan can be a file name, that DIR may be
 * written (absent, or OUT_FORCE and an earlier dump), creates DIR's parent
 * directories and DIR.partial-<tag> (OUT_JOIN: uses it), before anything is
 * read. On failure nothing is left on disk.
 */
int out_begin(struct out_dir *o, const char *dir, long tag, int flags, const rl_ckpt *ck,
	      const rl_plan *plan);

/* Writes the folder of device dev (index of rl_plan_device()) from its
 * staging area into the partial directory. */
int out_write_device(struct out_dir *o, const rl_ckpt *ck, const rl_plan *plan, unsigned dev,
		     const uint8_t *staging, out_progress_fn fn, void *user);

/*
 * Streaming (--staging-budget): the folder of device dev with every .bin
 * created empty and its manifest, before the read; the pieces then land
 * with out_write_piece(), each at its offset in its shard's file. fn (may
 * be NULL) is asked before each file; non-zero stops (RL_E_CANCELED).
 */
int out_stream_device(struct out_dir *o, const rl_ckpt *ck, const rl_plan *plan, unsigned dev,
		      out_progress_fn fn, void *user);
/* Writes piece p into its shard's .bin (nothing for a shard whose name
 * another shard of the device writes). */
int out_write_piece(struct out_dir *o, const rl_plan *plan, const rl_piece *p);

/* Syncs the partial directory's file system once and renames it to DIR
 * (OUT_FORCE: exchanges it with DIR, then removes the old tree, renamed
 * DIR.old-<pid>; when o->stop says stop, a child process of its own
 * removes the rest and o->warn says so). fn (may be NULL) is asked once
 * more between the sync and the rename. */
int out_publish(struct out_dir *o, out_progress_fn fn, void *user);

/* Removes the partial directory if this process created it and it was not
 * published; frees o's memory. Safe after out_publish() and twice. */
void out_abort(struct out_dir *o);

/*
 * out_abort()'s removal alone; frees nothing. The directory is renamed
 * DIR.removing-<pid> first, so that a thread still writing into it (by
 * path: the main thread, while the signal watchdog removes it) cannot
 * refill it. When stop (may be NULL) says stop midway, a child process of
 * its own session removes the rest: a signal's exit waits for no 100k files.
 */
void out_remove_partial(struct out_dir *o, int (*stop)(void));

#endif
