/*
 * test_mpi.c - loading across MPI ranks (libringload_mpi), through the
 * rank program build/tests/mpi_driver under `mpirun --allow-run-as-root
 * --oversubscribe`: shards byte-identical to independent single-process
 * loads of each process, on every backend, for np = 2, 3, 4 and random
 * shardings; bytes read equal to the plan's prediction and within 1.01x
 * of the tensors' bytes (plus alignment); node-local files; failures
 * (a truncated file, a rank that never comes, MPI without threads, a
 * mesh of another size, ranks that see different checkpoints) ending on
 * every rank with the failing rank named. Skips when mpirun or the
 * driver is missing.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "ringload.h"
#include "mpi/dump.h"

#define OUT_CAP (1 << 16)
static char out[OUT_CAP];       /* mpirun's output, for the checks and their messages */

#ifdef RL_SANITIZER
/* Open MPI keeps memory until exit in components it has unloaded by then
 * (their frames cannot even be named for a suppression): leak checks of
 * the ranks would report only those. ThreadSanitizer reads
 * tests/tsan.supp: Open MPI's own locks taken in both orders. The
 * sanitizers' other checks stay. */
static const char *san_env(void)
{
	static char env[PATH_MAX + 96];
	char supp[PATH_MAX];

	if (!env[0] && realpath("tests/tsan.supp", supp))
		snprintf(env, sizeof(env), "-x ASAN_OPTIONS=detect_leaks=0 "
			 "-x TSAN_OPTIONS=suppressions=%s", supp);
	else if (!env[0])
		snprintf(env, sizeof(env), "-x ASAN_OPTIONS=detect_leaks=0");
	return env;
}
#else
static const char *san_env(void)
{
	return "";
}
#endif

static const char *bdir(void)
{
	return getenv("RL_BUILD") ? getenv("RL_BUILD") : "build";
}

/* Why MPI tests cannot run here, or NULL. */
static const char *no_mpi(void)
{
	static char why[4200];
	char path[4096];

	if (system("command -v mpirun >/dev/null 2>&1"))
		return "mpirun not found (make deps installs openmpi-bin)";
	snprintf(path, sizeof(path), "%s/tests/mpi_driver", bdir());
	if (access(path, X_OK)) {
		snprintf(why, sizeof(why), "%s not built (mpicc missing when make ran)", path);
		return why;
	}
	return NULL;
}

/* Skips the test with the reason when MPI tests cannot run here. */
#define NEED_MPI() \
	do { \
		const char *why_ = no_mpi(); \
		if (why_) \
			SKIP(why_); \
	} while (0)

/* mpirun -np n mpi_driver ARGS; output in out. Returns the exit status. */
static int mpirun(int n, const char *args, char *buf)
{
	char cmd[16384];

	snprintf(cmd, sizeof(cmd),
		 "timeout 120 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader %s "
		 "-np %d %s/tests/mpi_driver %s", san_env(), n, bdir(), args);
	return th_capture(cmd, buf, OUT_CAP);
}

static int sh(const char *fmt, const char *a, const char *b)
{
	char cmd[16384];

	snprintf(cmd, sizeof(cmd), fmt, a, b);
	return system(cmd);
}

/* Paths the tests keep (several at once): a ring of buffers. */
static char *path_slot(void)
{
	static char ring[8][4096];
	static unsigned next;

	return ring[next++ % 8];
}

/* A checkpoint by mkckpt under the test directory. */
static const char *make_ckpt(const char *name, const char *size, int files, int seed)
{
	char *dir = path_slot(), cmd[8192];

	snprintf(dir, 4096, "%s/%s", th_tmpdir(), name);
	snprintf(cmd, sizeof(cmd), "%s/mkckpt %s --size %s --files %d --layers 2 --seed %d >/dev/null",
		 bdir(), dir, size, files, seed);
	return system(cmd) ? NULL : dir;
}

static const char *write_spec(const char *name, const char *json)
{
	char *path = path_slot();
	FILE *f;

	snprintf(path, 4096, "%s/%s", th_tmpdir(), name);
	if (!(f = fopen(path, "w")))
		return NULL;
	fputs(json, f);
	fclose(f);
	return path;
}

/* ---------------------------------------------------------------- */
/* The reference: each process loaded alone, in this program         */
/* ---------------------------------------------------------------- */

/* Every process of spec loaded on its own (no MPI), dumped under dir. */
static int reference(const char *ckpt, const char *spec_path, int np, const char *dir)
{
	rl_ckpt *ck = rl_ckpt_create();
	rl_spec *spec = rl_spec_create();
	int ret = rl_ckpt_open(ck, ckpt) || rl_spec_load(spec, spec_path);

	for (int p = 0; p < np && !ret; p++) {
		rl_loader *ld = rl_loader_create();
		rl_plan *plan = NULL;

		ret = rl_loader_load(ld, ck, spec, p, &plan);
		if (!ret)
			ret = dump_plan(dir, plan, ld);
		rl_plan_destroy(plan);
		rl_loader_destroy(ld);
	}
	rl_spec_destroy(spec);
	rl_ckpt_destroy(ck);
	return ret;
}

static uint64_t ckpt_bytes(const char *ckpt)
{
	rl_ckpt *ck = rl_ckpt_create();
	uint64_t n = 0;

	if (!rl_ckpt_open(ck, ckpt))
		for (size_t i = 0; i < rl_ckpt_num_tensors(ck); i++) {
			rl_tensor_info t;

			rl_ckpt_tensor(ck, i, &t);
			n += t.nbytes;
		}
	rl_ckpt_destroy(ck);
	return n;
}

/* ---------------------------------------------------------------- */
/* Shardings                                                         */
/* ---------------------------------------------------------------- */

/* A spec for np processes of two devices each (mesh [np, 2] or [2, np]):
 * kind 0 replicated, 1 rows/columns inside each process (replicated
 * across), 2 partly replicated (a split axis spanning processes), 3
 * partitioned across processes. */
static void spec_json(char *dst, size_t cap, int np, int kind)
{
	static const char *const rules[] = {
		"[]",
		"[{\"match\":\".*(q|k|v|gate|up)_proj.*\",\"spec\":[\"m\"]},"
		"{\"match\":\".*(o|down)_proj.*|.*embed.*\",\"spec\":[null,\"m\"]}]",
		"[{\"match\":\".*(q|k|v|gate|up)_proj.*\",\"spec\":[\"a\"]},"
		"{\"match\":\".*(o|down)_proj.*\",\"spec\":[null,\"a\"]}]",
		"[{\"match\":\".*\",\"spec\":[\"p\"]}]",
	};
	int len;

	if (kind == 2 && np % 2 == 0) {
		/* axes a (2) and b (np/2) over processes, m inside each */
		len = snprintf(dst, cap, "{\"mesh\":{\"shape\":[2,%d,2],\"axes\":[\"a\",\"b\",\"m\"],"
			       "\"process_of_device\":[", np / 2);
	} else {
		kind = kind == 2 ? 1 : kind;
		len = snprintf(dst, cap, "{\"mesh\":{\"shape\":[%d,2],\"axes\":[\"p\",\"m\"],"
			       "\"process_of_device\":[", np);
	}
	for (int d = 0; d < 2 * np; d++)
		len += snprintf(dst + len, cap - len, "%s%d", d ? "," : "", d / 2);
	snprintf(dst + len, cap - len, "]},\"rules\":%s}", rules[kind]);
}

/* Every rank's line says ok, with read == predicted (exact; else at
 * least: streaming reads a request at a window's edge for both windows);
 * *read: their sum. */
static int ranks_ok(const char *text, int np, int exact, uint64_t *read)
{
	*read = 0;
	for (int r = 0; r < np; r++) {
		char key[32];
		const char *l;
		unsigned long long rd, pr;

		snprintf(key, sizeof(key), "rank %d ok read ", r);
		if (!(l = strstr(text, key)) ||
		    sscanf(l + strlen(key), "%llu predicted %llu", &rd, &pr) != 2 || rd < pr ||
		    (exact && rd != pr))
			return -1;
		*read += rd;
	}
	return 0;
}

/* NULL when the two dump trees are byte-identical. */
static const char *same_dumps(const char *a, const char *b)
{
	return sh("diff -r -q %s %s >/dev/null", a, b) ? "dumps differ" : NULL;
}

/* ---------------------------------------------------------------- */
/* Tests                                                             */
/* ---------------------------------------------------------------- */

/*
 * A checkpoint (name, size, files) loaded by np ranks under sharding kind
 * with the driver's extra arguments: every rank ok, reads as predicted
 * (their sum in *read), dumps equal to single-process loads. Returns NULL
 * or what went wrong; out holds mpirun's output.
 */
static const char *load_and_compare(const char *name, const char *size, int files, int np,
				    int kind, const char *extra, uint64_t *read,
				    uint64_t *tensor_bytes)
{
	char json[1024], args[8192], ref[4096], got[4096], sname[64];
	const char *ck = make_ckpt(name, size, files, (int)(th_rand() % 1000)), *spec;

	spec_json(json, sizeof(json), np, kind);
	snprintf(sname, sizeof(sname), "%s.json", name);
	spec = write_spec(sname, json);
	snprintf(ref, sizeof(ref), "%s/%s.ref", th_tmpdir(), name);
	snprintf(got, sizeof(got), "%s/%s.got", th_tmpdir(), name);
	if (!ck || !spec || reference(ck, spec, np, ref))
		return "no checkpoint, spec or reference";
	*tensor_bytes = ckpt_bytes(ck);
	snprintf(args, sizeof(args), "%s --spec %s --dump %s %s", ck, spec, got, extra);
	if (mpirun(np, args, out))
		return "mpirun failed";
	if (ranks_ok(out, np, !strstr(extra, "--budget"), read))
		return "a rank failed or read other than its plan predicted";
	return same_dumps(ref, got);
}

/*
 * np = 2, 3, 4, every backend, random checkpoints (1-3 files) and
 * shardings: --read-once dumps equal each process loaded alone; each
 * rank reads what its plan predicts; the cluster reads the tensors once
 * (replicated shardings: within 1.01x plus a few alignment blocks).
 */
static void read_once_equals_single_process_loads(void)
{
	static const char *const backends[] = { "io_uring", "libaio", "pread" };
	const char *why;
	char extra[256], name[64];

	NEED_MPI();
	for (int np = 2; np <= 4; np++)
		for (int b = 0; b < 3; b++) {
			/* every sharding kind (replicated, inside processes, partly
			 * replicated: payloads received whole into the shards, or
			 * in part through a buffer; partitioned) over the runs */
			int kind = (np + b) % 4, files = 1 + (int)(th_rand() % 3);
			uint64_t read = 0, unique = 0;

			snprintf(name, sizeof(name), "ro%d%d", np, b);
			snprintf(extra, sizeof(extra), "--read-once --backend %s --batch %d "
				 "--timeout-ms 60000", backends[b], 200000 + (int)(th_rand() % 2000000));
			why = load_and_compare(name, "3M", files, np, kind, extra, &read, &unique);
			CHECKF(!why, "np %d %s kind %d: %s: %s", np, backends[b], kind, why, out);
			if (kind < 3)
				CHECKF(read <= unique + unique / 100 + 2 * 4096ull * np * files,
				       "np %d kind %d: read %llu, tensors %llu", np, kind,
				       (unsigned long long)read, (unsigned long long)unique);
		}
}

/* Without --read-once, --mpi is independent loads: same dumps, N x reads. */
static void plain_mpi_load_reads_per_process(void)
{
	const char *why;
	uint64_t read = 0, bytes = 0;

	NEED_MPI();
	why = load_and_compare("plain", "2M", 2, 2, 1, "", &read, &bytes);
	CHECKF(!why, "%s: %s", why, out);
	CHECK(read >= 2 * bytes);
	CHECKF(strstr(out, "sent 0 received 0"), "%s", out);
}

/*
 * Streaming loaders (--budget: each rank its own, from 64 KiB, a window
 * smaller than most tensors, to 1 MiB; odd sizes), read once, np 2 and 3,
 * every backend, one and three workers, every sharding kind: every byte
 * of every shard arrives in exactly one piece and the assembled dumps
 * equal each process loaded alone.
 */
static void streaming_read_once_equals_single_process_loads(void)
{
	static const char *const backends[] = { "io_uring", "libaio", "pread" };
	static const char *const budgets[] = { "65536", "65536,139264,1048576",
					       "1048576,70000", "300000,65536,65536" };
	const char *why;
	char extra[512], name[64];

	NEED_MPI();
	for (int np = 2; np <= 3; np++)
		for (int b = 0; b < 3; b++) {
			int kind = (np + b) % 4, files = 1 + (int)(th_rand() % 3);
			const char *budget = budgets[(np * 3 + b) % 4];
			uint64_t read = 0, unique = 0;

			snprintf(name, sizeof(name), "st%d%d", np, b);
			snprintf(extra, sizeof(extra), "--read-once --backend %s --workers %d --budget %s "
				 "--timeout-ms 60000", backends[b], b % 2 ? 3 : 1, budget);
			why = load_and_compare(name, "3M", files, np, kind, extra, &read, &unique);
			CHECKF(!why, "np %d %s kind %d budgets %s: %s: %s", np, backends[b], kind,
			       budget, why, out);
		}
}

/*
 * Issue 32's mutant (a packed piece placed at i * src_stride instead of
 * i * len): strided copies of more than one pack. With 8 MiB budgets the
 * packing buffer is 1 MiB and transfers reach 8 MiB, so the column halves
 * of the 8 MB embedding (sharding kind 1: columns split inside each
 * process) are copies of several packs; every backend, 1 and 3 workers.
 */
static void streaming_strided_copies_of_several_packs(void)
{
	static const char *const backends[] = { "io_uring", "libaio", "pread" };
	const char *why;
	char extra[512], name[64];

	NEED_MPI();
	for (int b = 0; b < 3; b++) {
		uint64_t read = 0, unique = 0;

		snprintf(name, sizeof(name), "sp%d", b);
		snprintf(extra, sizeof(extra), "--read-once --backend %s --workers %d "
			 "--budget 8388608 --timeout-ms 60000", backends[b], b % 2 ? 3 : 1);
		why = load_and_compare(name, "24M", 1, 2, 1, extra, &read, &unique);
		CHECKF(!why, "%s: %s: %s", backends[b], why, out);
		CHECK(unique > (8u << 20));
	}
}

/* Payloads over RL_MPI_MESSAGE_BYTES travel in pieces; many batches. */
static void messages_split_in_pieces_many_batches(void)
{
	const char *why;
	uint64_t read = 0, bytes = 0;

	NEED_MPI();
	why = load_and_compare("split", "2M", 3, 3, 0, "--read-once --msg 4099 --batch 65536",
			       &read, &bytes);
	CHECKF(!why, "%s: %s", why, out);
	CHECKF(strstr(out, "batches ") && !strstr(out, "batches 1 "), "%s", out);
}

/*
 * A rank that needs whole tensors receives each large one (here 2 MB) as
 * plain bytes straight into its shard, which Open MPI moves with one copy
 * (CMA), never into a datatype of several runs: that went through 32 KiB
 * fragments, copied twice (issue 14's 2-rank read-once slower than the
 * independent loads).
 */
static void whole_tensors_received_as_plain_bytes(void)
{
	const char *ck, *spec;
	char args[8192];
	uint64_t read;

	NEED_MPI();
	ck = make_ckpt("plainrecv", "8M", 2, 7);
	spec = write_spec("plainrecv.json",
			  "{\"mesh\":{\"shape\":[2],\"axes\":[\"p\"],\"process_of_device\":[0,1]}}");
	CHECK(ck && spec);
	snprintf(args, sizeof(args), "%s --spec %s --read-once", ck, spec);
	CHECKF(mpirun(2, args, out) == 0, "%s", out);
	CHECKF(!ranks_ok(out, 2, 1, &read), "%s", out);
	for (int r = 0; r < 2; r++) {
		char key[64];
		const char *l;
		unsigned long plain = 0, derived = 1;

		snprintf(key, sizeof(key), "rank %d receives of 1 MiB or more: ", r);
		CHECKF((l = strstr(out, key)) &&
		       sscanf(l + strlen(key), "%lu as bytes, %lu", &plain, &derived) == 2, "%s", out);
		CHECKF(plain > 0 && derived == 0, "rank %d: %lu as bytes, %lu into datatypes", r,
		       plain, derived);
	}
}

/* Two groups of two ranks, each on its communicator (split from the
 * world), load at once: each group's shards equal the 2-process loads. */
static void groups_load_at_once_on_their_communicators(void)
{
	const char *ck, *spec;
	char json[1024], args[8192], ref[4096], got[4096], g[4200];
	uint64_t read;

	NEED_MPI();
	ck = make_ckpt("grp", "2M", 2, 31);
	spec_json(json, sizeof(json), 2, 1);
	spec = write_spec("grp.json", json);
	snprintf(ref, sizeof(ref), "%s/grp.ref", th_tmpdir());
	snprintf(got, sizeof(got), "%s/grp.got", th_tmpdir());
	CHECK(ck && spec && reference(ck, spec, 2, ref) == 0);
	snprintf(args, sizeof(args), "%s --spec %s --read-once --groups 2 --dump %s", ck, spec, got);
	CHECKF(mpirun(4, args, out) == 0, "%s", out);
	CHECKF(!ranks_ok(out, 4, 1, &read), "%s", out);
	for (int k = 0; k < 2; k++) {
		snprintf(g, sizeof(g), "%s/g%d", got, k);
		CHECKF(!same_dumps(ref, g), "group %d: %s differs from %s", k, g, ref);
	}
}

/* Rank r's own directory: the index and symlinks to the files named. */
static void rank_dir(const char *ck, const char *dir, const char *files)
{
	char cmd[16384];

	snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp %s/model.safetensors.index.json %s/ && "
		 "for f in %s; do ln -sf %s/$f %s/$f; done", dir, ck, dir, files, ck, dir);
	if (system(cmd))
		fprintf(stderr, "rank_dir: %s failed\n", cmd);
}

/*
 * Node-local files: each rank's directory holds only its files (others'
 * do not exist there, so a rank that tried to open one would fail). The
 * load succeeds with the right bytes; a file no rank has fails every rank
 * naming it.
 */
static void local_files_disjoint_sets(void)
{
	const char *why, *ck, *spec;
	char json[1024], args[8192], ref[4096], got[4096], d[3][4096];
	static const char *const sets[] = { "model-00001-of-00003.safetensors",
					    "model-00002-of-00003.safetensors",
					    "model-00003-of-00003.safetensors" };
	uint64_t read;

	NEED_MPI();
	ck = make_ckpt("local", "3M", 3, 11);
	CHECK(ck);
	for (int r = 0; r < 3; r++) {
		snprintf(d[r], sizeof(d[r]), "%s/node%d", th_tmpdir(), r);
		rank_dir(ck, d[r], sets[r]);
	}
	spec_json(json, sizeof(json), 3, 1);
	spec = write_spec("local.json", json);
	snprintf(ref, sizeof(ref), "%s/localref", th_tmpdir());
	snprintf(got, sizeof(got), "%s/localgot", th_tmpdir());
	CHECK(spec && reference(ck, spec, 3, ref) == 0);
	snprintf(args, sizeof(args), "%s/node%%d/model.safetensors.index.json --local '*' --spec %s "
		 "--dump %s", th_tmpdir(), spec, got);
	CHECKF(mpirun(3, args, out) == 0, "%s", out);
	CHECKF(!ranks_ok(out, 3, 1, &read), "%s", out);
	why = same_dumps(ref, got);
	CHECKF(!why, "%s", why);
	/* Two ranks, files 1 and 2: file 3 is nobody's. */
	CHECKF(mpirun(2, args, out) != 0, "%s", out);
	for (int r = 0; r < 2; r++) {
		char key[64];

		snprintf(key, sizeof(key), "rank %d error %d", r, RL_E_FILE_UNAVAILABLE);
		CHECKF(strstr(out, key) && strstr(out, "model-00003-of-00003.safetensors: no rank has"),
		       "%s", out);
	}
}

/* A fresh copy of ck as tmp/NAME<r>. */
static int copy_as(const char *ck, const char *name, int r)
{
	char cmd[16384];

	snprintf(cmd, sizeof(cmd), "rm -rf %s/%s%d && cp -r %s %s/%s%d", th_tmpdir(), name, r, ck,
		 th_tmpdir(), name, r);
	return system(cmd);
}

/* Copies of ck, one per rank: tmp/NAME0, NAME1, ... */
static int per_rank_copies(const char *ck, const char *name, int np)
{
	int ret = 0;

	for (int r = 0; r < np && !ret; r++)
		ret = copy_as(ck, name, r);
	return ret;
}

/*
 * RL_MPI_EXECUTOR 0 (--old-loop) asked for libringload_mpi's own batch
 * loop, now removed: rl_mpi_set refuses it with RL_E_INVALID_ARG and a
 * line saying so, on every rank (before, the loop ran).
 */
static void old_loop_refused(void)
{
	const char *ck;
	char args[4096], key[64];

	NEED_MPI();
	ck = make_ckpt("olr", "1M", 1, 23);
	CHECK(ck);
	snprintf(args, sizeof(args), "%s --read-once --old-loop", ck);
	CHECKF(mpirun(2, args, out) != 0, "%s", out);
	for (int r = 0; r < 2; r++) {
		snprintf(key, sizeof(key), "rank %d error %d: RL_MPI_EXECUTOR 0", r, RL_E_INVALID_ARG);
		CHECKF(strstr(out, key) && strstr(out, "batch loop was removed"), "%s", out);
	}
}

/*
 * RL_MPI_EXECUTOR: whole loads' transfers in the library's executor over
 * the MPI transport (transport_mpi.c). np = 2, 3, every backend, every
 * sharding kind, payloads split in messages now and then: dumps equal
 * single-process loads, reads as predicted; a truncated file and a short
 * message fail every rank, naming the rank and the reason.
 */
static void executor_equals_single_process_loads_and_fails_alike(void)
{
	static const char *const backends[] = { "io_uring", "libaio", "pread" };
	const char *why, *ck, *spec;
	char extra[256], name[64], json[1024], args[8192];

	NEED_MPI();
	for (int np = 2; np <= 3; np++)
		for (int b = 0; b < 3; b++) {
			int kind = (np + b) % 4, files = 1 + (int)(th_rand() % 3);
			uint64_t read = 0, unique = 0;

			snprintf(name, sizeof(name), "ex%d%d", np, b);
			snprintf(extra, sizeof(extra), "--read-once --executor --backend %s --batch %d "
				 "--msg %d --timeout-ms 60000", backends[b],
				 200000 + (int)(th_rand() % 2000000), b ? 4099 : 1 << 30);
			why = load_and_compare(name, "3M", files, np, kind, extra, &read, &unique);
			CHECKF(!why, "np %d %s kind %d: %s: %s", np, backends[b], kind, why, out);
		}
	ck = make_ckpt("extrunc", "2M", 2, 13);
	spec_json(json, sizeof(json), 3, 1);
	spec = write_spec("extrunc.json", json);
	CHECK(ck && spec && per_rank_copies(ck, "extr", 3) == 0);
	snprintf(args, sizeof(args), "%s/extr%%d --spec %s --read-once --executor --truncate-rank 1 "
		 "--timeout-ms 60000", th_tmpdir(), spec);
	CHECKF(mpirun(3, args, out) != 0, "%s", out);
	CHECKF(strstr(out, "rank 0 error -5092 failed 1: rank 1 failed:") &&
	       strstr(out, "rank 2 error -5092 failed 1: rank 1 failed:"), "%s", out);
	snprintf(args, sizeof(args), "%s --spec %s --read-once --executor --short-send-rank 1 "
		 "--timeout-ms 60000", ck, spec);
	CHECKF(mpirun(3, args, out) != 0, "%s", out);
	for (int r = 0; r < 3; r++) {
		char key[64];

		snprintf(key, sizeof(key), "rank %d error ", r);
		CHECKF(strstr(out, key), "rank %d: %s", r, out);
	}
	CHECKF(strstr(out, "from rank 1: a message of ") && strstr(out, " expected"), "%s", out);
}

/* One rank's file is cut short after it opened it: every rank fails
 * within seconds, naming that rank; read once or not. */
static void truncated_file_fails_every_rank(void)
{
	const char *ck, *spec;
	char json[1024], args[8192];

	NEED_MPI();
	ck = make_ckpt("trunc", "2M", 2, 13);
	spec_json(json, sizeof(json), 3, 1);
	spec = write_spec("trunc.json", json);
	CHECK(ck && spec);
	for (int once = 0; once < 2; once++) {
		time_t t0 = time(NULL);

		CHECK(per_rank_copies(ck, "tr", 3) == 0);
		snprintf(args, sizeof(args), "%s/tr%%d --spec %s %s --truncate-rank 1 --timeout-ms 60000",
			 th_tmpdir(), spec, once ? "--read-once" : "");
		CHECKF(mpirun(3, args, out) != 0, "%s", out);
		CHECKF(time(NULL) - t0 < 30, "took %ld s", (long)(time(NULL) - t0));
		for (int r = 0; r < 3; r++) {
			char key[64];

			snprintf(key, sizeof(key), "rank %d error ", r);
			CHECKF(strstr(out, key), "rank %d: %s", r, out);
		}
		CHECKF(strstr(out, "rank 0 error -5092 failed 1: rank 1 failed:") &&
		       strstr(out, "rank 2 error -5092 failed 1: rank 1 failed:"), "%s", out);
	}
}

/* A rank that fails while streaming (its files cut short after it opened
 * them) ends every rank with an error naming it, within seconds. */
static void streaming_failing_rank_ends_every_rank(void)
{
	const char *ck, *spec;
	char json[1024], args[8192];
	time_t t0 = time(NULL);

	NEED_MPI();
	ck = make_ckpt("sttrunc", "2M", 2, 37);
	spec_json(json, sizeof(json), 3, 3);
	spec = write_spec("sttrunc.json", json);
	CHECK(ck && spec && per_rank_copies(ck, "stt", 3) == 0);
	snprintf(args, sizeof(args), "%s/stt%%d --spec %s --read-once --budget 65536,131072 "
		 "--truncate-rank 1 --timeout-ms 60000", th_tmpdir(), spec);
	CHECKF(mpirun(3, args, out) != 0, "%s", out);
	CHECKF(time(NULL) - t0 < 30, "took %ld s", (long)(time(NULL) - t0));
	CHECKF(strstr(out, "rank 0 error -5092 failed 1: rank 1 failed:") &&
	       strstr(out, "rank 2 error -5092 failed 1: rank 1 failed:") &&
	       strstr(out, "rank 1 error "), "%s", out);
}

/* A rank whose piece callback cancels (at its first piece, from its own
 * reads' windows, or at its first piece of a transfer) ends every rank
 * with an error naming it; budgets 64 KiB and 128 KiB. A streaming rank
 * without a piece callback too. */
static void streaming_cancel_ends_every_rank(void)
{
	const char *ck, *spec;
	char json[1024], args[8192];

	NEED_MPI();
	ck = make_ckpt("stcancel", "2M", 2, 43);
	CHECK(ck);
	for (int at = 0; at < 2; at++) {
		/* partitioned: own reads only; replicated across: transfers only */
		spec_json(json, sizeof(json), 3, at ? 1 : 3);
		spec = write_spec(at ? "stcancel1.json" : "stcancel0.json", json);
		CHECK(spec);
		snprintf(args, sizeof(args), "%s --spec %s --read-once --budget 65536,131072 "
			 "--cancel-rank 2 %s --timeout-ms 60000", ck, spec,
			 at ? "--cancel-transfer" : "");
		CHECKF(mpirun(3, args, out) != 0, "%s", out);
		CHECKF(strstr(out, "rank 0 error -5092 failed 2: rank 2 failed:") &&
		       strstr(out, "rank 1 error -5092 failed 2: rank 2 failed:") &&
		       strstr(out, at ? "rank 2 failed: the piece callback canceled the load" :
			      "rank 2 failed: streaming: the piece callback canceled the load"),
		       "at %d: %s", at, out);
	}
	/* a streaming rank without a piece callback: refused before planning */
	snprintf(args, sizeof(args), "%s --spec %s --read-once --budget 65536 --no-callback-rank 1 "
		 "--timeout-ms 60000", ck, spec);
	CHECKF(mpirun(3, args, out) != 0, "%s", out);
	CHECKF(strstr(out, "rank 1 error -5041 failed 1: ") &&
	       strstr(out, "rank 0 error -5092 failed 1: rank 1 failed: a streaming loader "
		      "(RL_STAGING_STREAM) needs rl_mpi_set_piece_callback()"), "%s", out);
}

/* A message a byte short of its payload fails the load on every rank,
 * the receiver naming the sender and both lengths (a short message taken
 * as whole would leave its last byte missing without a word). */
static void short_message_fails_every_rank(void)
{
	const char *ck, *spec;
	char json[1024], args[8192];

	NEED_MPI();
	ck = make_ckpt("short", "2M", 2, 23);
	spec_json(json, sizeof(json), 3, 1);
	spec = write_spec("short.json", json);
	CHECK(ck && spec);
	snprintf(args, sizeof(args), "%s --spec %s --read-once --short-send-rank 1 "
		 "--timeout-ms 60000", ck, spec);
	CHECKF(mpirun(3, args, out) != 0, "%s", out);
	for (int r = 0; r < 3; r++) {
		char key[64];

		snprintf(key, sizeof(key), "rank %d error ", r);
		CHECKF(strstr(out, key), "rank %d: %s", r, out);
	}
	CHECKF(strstr(out, "from rank 1: a message of ") && strstr(out, " expected"), "%s", out);
}

/* A rank that never comes: the others give up after the timeout with a
 * message and MPI_Abort, not a hang. */
static void absent_rank_ends_in_abort(void)
{
	const char *ck;
	char args[8192];
	time_t t0 = time(NULL);

	NEED_MPI();
	ck = make_ckpt("hang", "1M", 1, 17);
	CHECK(ck);
	snprintf(args, sizeof(args), "%s --sleep-rank 1 --timeout-ms 1500", ck);
	CHECKF(mpirun(2, args, out) != 0, "%s", out);
	CHECKF(time(NULL) - t0 < 60, "took %ld s", (long)(time(NULL) - t0));
	CHECKF(strstr(out, "rank 0: no progress for 1.5 s waiting for"), "%s", out);
}

/* Misuse every rank reports alike: MPI without thread support, a mesh
 * of another size than the communicator, ranks that see different
 * checkpoints. */
static void misuse_reported_on_every_rank(void)
{
	const char *ck, *ck2, *spec;
	char json[1024], args[8192];

	NEED_MPI();
	ck = make_ckpt("mis", "1M", 1, 19);
	CHECK(ck);
	snprintf(args, sizeof(args), "%s --thread-single", ck);
	CHECKF(mpirun(2, args, out) != 0, "%s", out);
	CHECKF(strstr(out, "rank 0 error -5091") && strstr(out, "rank 1 error -5091") &&
	       strstr(out, "MPI_THREAD_FUNNELED"), "%s", out);
	spec_json(json, sizeof(json), 2, 0);
	spec = write_spec("mis.json", json);
	snprintf(args, sizeof(args), "%s --spec %s", ck, spec);
	CHECKF(mpirun(3, args, out) != 0, "%s", out);
	for (int r = 0; r < 3; r++) {
		char key[64];

		snprintf(key, sizeof(key), "rank %d error %d", r, RL_E_SPEC_MESH);
		CHECKF(strstr(out, key) &&
		       strstr(out, "the mesh has 2 processes but the communicator 3 ranks"), "%s", out);
	}
	ck2 = make_ckpt("mis2", "2M", 1, 19);
	CHECK(ck2 && copy_as(ck, "mm", 0) == 0 && copy_as(ck2, "mm", 1) == 0);
	snprintf(args, sizeof(args), "%s/mm%%d", th_tmpdir());
	CHECKF(mpirun(2, args, out) != 0, "%s", out);
	CHECKF(strstr(out, "rank 0 error -5093") && strstr(out, "rank 1 error -5093") &&
	       strstr(out, "rank 1 sees a different checkpoint than rank 0"), "%s", out);
}


/* ---------------------------------------------------------------- */
/* ringload load --mpi                                               */
/* ---------------------------------------------------------------- */

/* mpirun -np n ringload load ARGS (output in out); the exit status. */
static int mpirun_cli(int n, const char *args)
{
	char cmd[16384];

	snprintf(cmd, sizeof(cmd),
		 "timeout 120 mpirun --allow-run-as-root --oversubscribe --mca btl self,vader %s "
		 "-np %d %s/ringload load %s", san_env(), n, bdir(), args);
	return th_capture(cmd, out, OUT_CAP);
}

/* The same, each rank with its own arguments: fmt with %d for the rank
 * (a node-local path; MPMD: -np 1 ... : -np 1 ...). */
static int mpirun_cli_each(int n, const char *fmt)
{
	char cmd[32768], one[8192];
	int len = snprintf(cmd, sizeof(cmd), "timeout 120 mpirun --allow-run-as-root --oversubscribe "
			   "--mca btl self,vader");

	for (int r = 0; r < n; r++) {       /* -x is per context in an MPMD line */
		snprintf(one, sizeof(one), fmt, r);
		len += snprintf(cmd + len, sizeof(cmd) - len, "%s %s -np 1 %s/ringload load %s",
				r ? " :" : "", san_env(), bdir(), one);
	}
	return th_capture(cmd, out, OUT_CAP);
}

/* Each process loaded alone by `ringload load --process p --out` (and
 * the options more), the device folders gathered under dir: what one
 * --mpi dump must equal. */
static int cli_reference_with(const char *ck, const char *spec, int np, const char *dir,
			      const char *more)
{
	char cmd[32768];

	for (int p = 0; p < np; p++) {
		snprintf(cmd, sizeof(cmd), "%s/ringload load %s --sharding %s --process %d --quiet "
			 "%s --out %s.p%d >/dev/null && mkdir -p %s && cp -r %s.p%d/* %s/", bdir(),
			 ck, spec, p, more, dir, p, dir, dir, p, dir);
		if (system(cmd))
			return -1;
	}
	return 0;
}

static int cli_reference(const char *ck, const char *spec, int np, const char *dir)
{
	return cli_reference_with(ck, spec, np, dir, "");
}

/* `mpirun ringload load --mpi --read-once --out DIR --json`: rank 0's JSON
 * summary; DIR (every device's shards and manifest) equals the devices of
 * each process loaded alone; without --read-once too; --local-files. */
static void cli_mpi_dump_equals_single_process_dumps(void)
{
	const char *ck, *spec;
	char json[1024], args[8192], ref[4096], got[4096];

	NEED_MPI();
	ck = make_ckpt("cli", "3M", 3, 23);
	spec_json(json, sizeof(json), 3, 1);
	spec = write_spec("cli.json", json);
	snprintf(ref, sizeof(ref), "%s/cli.ref", th_tmpdir());
	CHECK(ck && spec && cli_reference(ck, spec, 3, ref) == 0);
	for (int once = 0; once < 2; once++) {
		snprintf(got, sizeof(got), "%s/cli.got%d", th_tmpdir(), once);
		snprintf(args, sizeof(args), "%s --sharding %s --mpi %s --out %s --json", ck, spec,
			 once ? "--read-once" : "", got);
		CHECKF(mpirun_cli(3, args) == 0, "%s", out);
		CHECKF(strstr(out, "{\"ranks\":3,\"read_once\":") && strstr(out, "\"per_rank\":[") &&
		       strstr(out, "\"total\":{\"bytes_read\":"), "%s", out);
		CHECKF(!same_dumps(ref, got), "read once %d: %s differs from %s", once, got, ref);
	}
	for (int r = 0; r < 3; r++) {
		char d[4096], f[64];

		snprintf(d, sizeof(d), "%s/clinode%d", th_tmpdir(), r);
		snprintf(f, sizeof(f), "model-0000%d-of-00003.safetensors", r + 1);
		rank_dir(ck, d, f);
	}
	snprintf(got, sizeof(got), "%s/cli.local", th_tmpdir());
	snprintf(args, sizeof(args), "--mpi --local-files '*' --sharding %s --out %s "
		 "%s/clinode%%d/model.safetensors.index.json", spec, got, th_tmpdir());
	CHECKF(mpirun_cli_each(3, args) == 0, "%s", out);
	CHECKF(strstr(out, "bytes read in the cluster") && strstr(out, "rank 2: read"), "%s", out);
	/* the manifests name each rank's own copy of the files: compare the shards */
	CHECKF(!sh("diff -r -q -x manifest.json %s %s >/dev/null", ref, got),
	       "--local-files: %s differs from %s", got, ref);
}

/*
 * `mpirun -np 3 ringload load CKPT --mpi --read-once --staging-budget B
 * --out DIR` (issue 21; refused before as "not with --mpi"): DIR equals
 * each process loaded alone (whole staging), at 64M, at 64K (windows
 * smaller than most tensors) and with budgets that differ per rank
 * (100K, 110K, 120K: not whole pages), over two shardings, every
 * backend, one and three workers.
 */
static void cli_mpi_streaming_dump_equals_whole_loads(void)
{
	static const char *const backends[] = { "io_uring", "libaio", "pread" };
	const char *ck, *spec;
	char json[1024], args[8192], ref[4096], got[4096], sname[64];

	NEED_MPI();
	ck = make_ckpt("clist", "3M", 3, 41);
	CHECK(ck);
	for (int kind = 1; kind <= 3; kind += 2) {
		spec_json(json, sizeof(json), 3, kind);
		snprintf(sname, sizeof(sname), "clist%d.json", kind);
		spec = write_spec(sname, json);
		snprintf(ref, sizeof(ref), "%s/clist%d.ref", th_tmpdir(), kind);
		CHECK(spec && cli_reference(ck, spec, 3, ref) == 0);
		for (int b = 0; b < 3; b++) {
			const char *budget = b == 0 ? "64M" : b == 1 ? "64K" : "1%d0K";

			snprintf(got, sizeof(got), "%s/clist%d.got%d", th_tmpdir(), kind, b);
			snprintf(args, sizeof(args), "%s --sharding %s --mpi --read-once --quiet "
				 "--staging-budget %s --backend %s --workers %d --out %s", ck, spec,
				 budget, backends[b], b == 1 ? 3 : 1, got);
			CHECKF(mpirun_cli_each(3, args) == 0, "budget %s: %s", budget, out);
			CHECKF(!same_dumps(ref, got), "kind %d budget %s: %s differs from %s", kind,
			       budget, got, ref);
		}
	}
}

/* A rank that fails (its copy of a file cut short; a DIR that is not an
 * earlier dump): every rank exits non-zero, one naming the failed rank,
 * and no dump, partial or whole, is left. */
static void cli_mpi_failure_leaves_no_dump(void)
{
	const char *ck, *spec;
	char args[8192], got[4096], cmd[8192], json[1024];

	NEED_MPI();
	ck = make_ckpt("clifail", "2M", 2, 29);
	CHECK(ck && copy_as(ck, "cf", 0) == 0 && copy_as(ck, "cf", 1) == 0);
	snprintf(cmd, sizeof(cmd), "truncate -s 4096 %s/cf1/model-00002-of-00002.safetensors",
		 th_tmpdir());
	CHECK(system(cmd) == 0);
	snprintf(got, sizeof(got), "%s/cf.out", th_tmpdir());
	snprintf(args, sizeof(args), "--mpi --read-once --out %s %s/cf%%d", got, th_tmpdir());
	CHECKF(mpirun_cli_each(2, args) != 0, "%s", out);
	CHECKF(strstr(out, "ringload load: rank 0: rank 1 failed to open the checkpoint") &&
	       strstr(out, "cf1/model-00002-of-00002.safetensors: file truncated"), "%s", out);
	snprintf(cmd, sizeof(cmd), "ls -d %s/cf.out* 2>/dev/null | grep -q .", th_tmpdir());
	CHECKF(system(cmd) != 0, "a dump or partial dump was left: %s", out);
	/* DIR holds other data: rank 0 cannot begin the dump, every rank stops */
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/cf.out && touch %s/cf.out/keep", th_tmpdir(),
		 th_tmpdir());
	CHECK(system(cmd) == 0);
	spec_json(json, sizeof(json), 2, 0);
	spec = write_spec("clifail.json", json);
	snprintf(args, sizeof(args), "%s --sharding %s --mpi --read-once --out %s/cf.out --force",
		 ck, spec, th_tmpdir());
	CHECKF(mpirun_cli(2, args) != 0, "%s", out);
	CHECKF(strstr(out, "ringload load: rank 0:") && strstr(out, "cf.out"), "%s", out);
	snprintf(cmd, sizeof(cmd), "test -e %s/cf.out/keep && ! ls -d %s/cf.out.partial* 2>/dev/null",
		 th_tmpdir(), th_tmpdir());
	CHECKF(system(cmd) == 0, "DIR changed or a partial dump was left: %s", out);
}

/* A Hugging Face cache file whose blob is not what its name says: each
 * rank reads only part of it, so none can check it, and each says so on
 * a line naming itself and the file (regression: nothing was said): split
 * between the ranks, and replicated --read-once (where the transfer
 * loader reads each half for both). */
static void cli_mpi_hf_unchecked_warned_per_rank(void)
{
	static const char *const wrong = "0123456789abcdef0123456789abcdef"
					 "0123456789abcdef0123456789abcdef";
	static const struct { int kind; const char *once; } runs[] = {
		{ 3, "" }, { 3, "--read-once" }, { 0, "--read-once" },
	};
	const char *ck, *spec;
	char json[1024], cmd[8192], args[8192];

	NEED_MPI();
	ck = make_ckpt("mpihf", "2M", 1, 37);
	snprintf(cmd, sizeof(cmd), "cd %s && mkdir -p blobs snapshots/r && mv model.safetensors "
		 "blobs/%s && ln -s ../../blobs/%s snapshots/r/model.safetensors", ck, wrong, wrong);
	CHECK(ck && system(cmd) == 0);
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		spec_json(json, sizeof(json), 2, runs[i].kind);
		spec = write_spec("mpihf.json", json);
		snprintf(args, sizeof(args), "%s/snapshots/r --sharding %s --mpi %s", ck, spec,
			 runs[i].once);
		CHECKF(spec && mpirun_cli(2, args) == 0, "%s", out);
		for (int r = 0; r < 2; r++) {
			char want[64];

			snprintf(want, sizeof(want), "ringload load: rank %d: warning: ", r);
			CHECKF(strstr(out, want) && strstr(out, "snapshots/r/model.safetensors: "
			       "expected SHA-256 (Hugging Face cache) not checked"),
			       "spec %d %s: rank %d: %s", runs[i].kind, runs[i].once, r, out);
		}
	}
}

/*
 * --mpi --sha256-file: each file hashed whole by one rank after the load
 * (rl_mpi_expect). The good checkpoint passes, independent loads and read
 * once, every value checked; a byte flipped in one file's tensor data
 * fails every rank with that file named as a SHA-256 mismatch, read once
 * or not (before: refused as "not with --mpi yet").
 */
static void cli_mpi_sha256_checked_fails_every_rank(void)
{
	static const char *const once[] = { "", "--read-once" };
	const char *ck, *spec;
	char json[1024], args[16384], bad[4096];

	NEED_MPI();
	ck = make_ckpt("mpisha", "3M", 2, 41);
	CHECK(ck && sh("cd %s && sha256sum *.safetensors >SHA256SUMS%s", ck, "") == 0);
	spec_json(json, sizeof(json), 3, 1);
	spec = write_spec("mpisha.json", json);
	CHECK(spec);
	for (int i = 0; i < 2; i++) {
		snprintf(args, sizeof(args), "%s --sharding %s --mpi %s --sha256-file %s/SHA256SUMS",
			 ck, spec, once[i], ck);
		CHECKF(mpirun_cli(3, args) == 0, "%s: %s", once[i], out);
		CHECKF(strstr(out, "sha256: 2 files match (each hashed whole by one rank)"), "%s: %s",
		       once[i], out);
	}
	snprintf(bad, sizeof(bad), "%s.bad", ck);
	CHECK(sh("rm -rf %s%s", bad, "") == 0 && sh("cp -r %s %s", ck, bad) == 0);
	CHECK(sh("python3 -c \"import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); "
		 "b[-100]^=1; open(p,'wb').write(b)\" %s/model-00002-of-00002.safetensors%s", bad,
		 "") == 0);
	for (int i = 0; i < 2; i++) {
		snprintf(args, sizeof(args), "%s --sharding %s --mpi %s --sha256-file %s/SHA256SUMS",
			 bad, spec, once[i], bad);
		CHECKF(mpirun_cli(3, args) != 0, "%s: %s", once[i], out);
		for (int r = 0; r < 3; r++) {
			char want[64];

			snprintf(want, sizeof(want), "ringload load: rank %d: ", r);
			CHECKF(strstr(out, want), "%s: rank %d: %s", once[i], r, out);
		}
		CHECKF(strstr(out, "model-00002-of-00002.safetensors: SHA-256 mismatch: expected "),
		       "%s: %s", once[i], out);
	}
}

/*
 * Ranks given different specs (replicated on rank 0, split on rank 1)
 * loading independently: nothing is transferred, so no plan was compared
 * and the load succeeded, each rank's shards fitting a different mesh.
 * Now every rank fails, rank 0 naming rank 1; one spec for both loads.
 */
static void cli_mpi_ranks_need_one_spec(void)
{
	const char *ck;
	char json[1024], args[8192];

	NEED_MPI();
	ck = make_ckpt("onespec", "2M", 1, 31);
	CHECK(ck);
	spec_json(json, sizeof(json), 2, 0);
	CHECK(write_spec("onespec0.json", json));
	spec_json(json, sizeof(json), 2, 1);
	CHECK(write_spec("onespec1.json", json));
	snprintf(args, sizeof(args), "%s --mpi --sharding %s/onespec%%d.json", ck, th_tmpdir());
	CHECKF(mpirun_cli_each(2, args) != 0, "%s", out);
	CHECKF(strstr(out, "rank 0: rank 1 was given another sharding spec than rank 0's"), "%s",
	       out);
	snprintf(args, sizeof(args), "%s --mpi --sharding %s/onespec1.json", ck, th_tmpdir());
	CHECKF(mpirun_cli(2, args) == 0 && *out, "%s", out);
	/* --quiet: no summary, as without --mpi (rank 0 printed it before) */
	snprintf(args, sizeof(args), "%s --mpi --quiet --sharding %s/onespec1.json", ck,
		 th_tmpdir());
	CHECKF(mpirun_cli(2, args) == 0 && !*out, "--quiet: %s", out);
}

/*
 * `mpirun -np 3 ringload load CKPT --mpi [--read-once] --device cuda
 * --device-map 0,1,0,1,0,1 --verify` through the fake CUDA driver (each
 * rank its own, 2 GPUs; refused before as "--device ... not with --mpi"):
 * every rank's shards, read back from its GPUs, equal the file; read
 * once, the ranks sent each other bytes. Rows and columns, and tensors
 * whole on every device; every backend, 1 and 3 workers.
 */
static void cli_mpi_device_cuda_verified(void)
{
	static const char *const backends[] = { "io_uring", "libaio", "pread" };
	static const char *const once[] = { "", "--read-once" };
	char json[1024], cmd[16384], fake[PATH_MAX], sname[64];
	const char *ck, *spec;

	NEED_MPI();
	snprintf(cmd, sizeof(cmd), "%s/tests/fakecuda/libcuda.so.1", bdir());
	CHECK(realpath(cmd, fake));
	ck = make_ckpt("mpicuda", "3M", 2, 43);
	CHECK(ck);
	for (int kind = 0; kind <= 1; kind++) {
		spec_json(json, sizeof(json), 3, kind);
		snprintf(sname, sizeof(sname), "mpicuda%d.json", kind);
		spec = write_spec(sname, json);
		CHECK(spec);
		for (int i = 0; i < 6; i++) {
			snprintf(cmd, sizeof(cmd), "timeout 120 mpirun --allow-run-as-root --oversubscribe "
				 "--mca btl self,vader %s -x RL_LIBCUDA=%s -x FAKECUDA_DEVICES=2 "
				 "-x FAKECUDA_DELAY_US=20 -np 3 %s/ringload load %s --sharding %s "
				 "--mpi %s --device cuda --device-map 0,1,0,1,0,1 --verify "
				 "--backend %s --workers %d", san_env(), fake, bdir(), ck, spec,
				 once[i % 2], backends[i / 2], i % 3 ? 1 : 3);
			CHECKF(th_capture(cmd, out, OUT_CAP) == 0, "spec %d, %s: %s", kind, cmd, out);
			for (int r = 0; r < 3; r++) {
				char want[64];

				snprintf(want, sizeof(want), "rank %d: verify: ", r);
				CHECKF(strstr(out, want) && !strstr(out, "verify: 0 shards") &&
				       strstr(out, "match the file, 0 differ"), "spec %d, %s: rank %d: %s",
				       kind, once[i % 2], r, out);
			}
			CHECKF(!(i % 2) || !strstr(out, " 0 bytes sent between ranks"),
			       "read once sent nothing: %s", out);
		}
	}
}

/*
 * `mpirun -np 3 ringload load CKPT --mpi --read-once --dtype F32|F16
 * --verify`, into host staging and onto the fake driver's GPUs (refused
 * before: "--dtype: not with --mpi yet"): the transfers move the file's
 * bytes and their copies convert; every rank's shards equal the file
 * converted (verify converts as torch's .to() does: test_dtype). With
 * --staging-budget (no device; refused before: "the ranks' pieces move as
 * stored") the dump equals each process loaded alone with --dtype: the
 * transfers' pieces are converted too.
 */
static void cli_mpi_dtype_verified(void)
{
	static const char *const to[] = { "F32", "F16" };
	static const char *const dev[] = { "", "--device cuda --device-map 0,1,0,1,0,1" };
	char json[1024], cmd[16384], fake[PATH_MAX];
	const char *ck, *spec;

	NEED_MPI();
	snprintf(cmd, sizeof(cmd), "%s/tests/fakecuda/libcuda.so.1", bdir());
	CHECK(realpath(cmd, fake));
	ck = make_ckpt("mpidtype", "3M", 2, 47);
	spec_json(json, sizeof(json), 3, 1);
	spec = write_spec("mpidtype.json", json);
	CHECK(ck && spec);
	for (int i = 0; i < 4; i++) {
		snprintf(cmd, sizeof(cmd), "timeout 120 mpirun --allow-run-as-root --oversubscribe "
			 "--mca btl self,vader %s -x RL_LIBCUDA=%s -x FAKECUDA_DEVICES=2 -np 3 "
			 "%s/ringload load %s --sharding %s --mpi --read-once --dtype %s %s --verify",
			 san_env(), fake, bdir(), ck, spec, to[i % 2], dev[i / 2]);
		CHECKF(th_capture(cmd, out, OUT_CAP) == 0, "%s: %s", cmd, out);
		for (int r = 0; r < 3; r++) {
			char want[64];

			snprintf(want, sizeof(want), "rank %d: verify: ", r);
			CHECKF(strstr(out, want) && !strstr(out, "verify: 0 shards") &&
			       strstr(out, "match the file, 0 differ"), "%s: rank %d: %s", cmd, r, out);
		}
	}
	for (int i = 0; i < 2; i++) {
		char ref[4096], got[4096], more[64];

		snprintf(more, sizeof(more), "--dtype %s", to[i]);
		snprintf(ref, sizeof(ref), "%s/mpidtype.ref%d", th_tmpdir(), i);
		snprintf(got, sizeof(got), "%s/mpidtype.got%d", th_tmpdir(), i);
		CHECK(cli_reference_with(ck, spec, 3, ref, more) == 0);
		snprintf(cmd, sizeof(cmd), "%s --sharding %s --mpi --read-once --quiet %s "
			 "--staging-budget 64K --out %s", ck, spec, more, got);
		CHECKF(mpirun_cli(3, cmd) == 0, "%s: %s", cmd, out);
		CHECKF(!same_dumps(ref, got), "--dtype %s streaming: %s differs from %s", to[i],
		       got, ref);
	}
}

/* --mpi's options: misuse is a usage error; a ringload without
 * ringload-mpi.so beside it says so. */
static void cli_mpi_options_and_missing_plugin(void)
{
	char cmd[32768];

	snprintf(cmd, sizeof(cmd), "%s/ringload load x --read-once", bdir());
	CHECK_EQ(th_capture(cmd, out, OUT_CAP), 2);
	CHECKF(strstr(out, "--read-once needs --mpi"), "%s", out);
	snprintf(cmd, sizeof(cmd), "%s/ringload load x --mpi --process 1", bdir());
	CHECK_EQ(th_capture(cmd, out, OUT_CAP), 2);
	CHECKF(strstr(out, "each rank loads its own process"), "%s", out);
	snprintf(cmd, sizeof(cmd), "%s/ringload load x --mpi --verify --local-files '*'", bdir());
	CHECK_EQ(th_capture(cmd, out, OUT_CAP), 2);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/lone && cp %s/ringload %s/libringload.so.0 %s/lone/ "
		 "&& %s/lone/ringload load x --mpi", th_tmpdir(), bdir(), bdir(), th_tmpdir(),
		 th_tmpdir());
	CHECK_EQ(th_capture(cmd, out, OUT_CAP), 1);
	CHECKF(strstr(out, "--mpi: no ringload-mpi.so"), "%s", out);
	snprintf(cmd, sizeof(cmd), "ldd %s/ringload | grep -q libmpi", bdir());
	CHECKF(system(cmd) != 0, "ringload links MPI itself");
}

int main(void)
{
	th_seed();
	RUN(read_once_equals_single_process_loads);
	RUN(executor_equals_single_process_loads_and_fails_alike);
	RUN(old_loop_refused);
	RUN(plain_mpi_load_reads_per_process);
	RUN(streaming_read_once_equals_single_process_loads);
	RUN(streaming_strided_copies_of_several_packs);
	RUN(messages_split_in_pieces_many_batches);
	RUN(whole_tensors_received_as_plain_bytes);
	RUN(groups_load_at_once_on_their_communicators);
	RUN(local_files_disjoint_sets);
	RUN(truncated_file_fails_every_rank);
	RUN(streaming_failing_rank_ends_every_rank);
	RUN(streaming_cancel_ends_every_rank);
	RUN(short_message_fails_every_rank);
	RUN(absent_rank_ends_in_abort);
	RUN(misuse_reported_on_every_rank);
	RUN(cli_mpi_dump_equals_single_process_dumps);
	RUN(cli_mpi_streaming_dump_equals_whole_loads);
	RUN(cli_mpi_failure_leaves_no_dump);
	RUN(cli_mpi_hf_unchecked_warned_per_rank);
	RUN(cli_mpi_sha256_checked_fails_every_rank);
	RUN(cli_mpi_ranks_need_one_spec);
	RUN(cli_mpi_device_cuda_verified);
	RUN(cli_mpi_dtype_verified);
	RUN(cli_mpi_options_and_missing_plugin);
	return th_done();
}
