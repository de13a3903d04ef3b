/*
 * fuzz_ckpt.c - multi-file checkpoints: an index and shard files.
 *
 * The input is split at each line "--" into parts: the first part is
 * written as model.safetensors.index.json, the others as s0.safetensors,
 * s1.safetensors, ... (at most 8) in a private directory. The checkpoint is
 * then opened through the index and as a directory. Whatever the bytes, an
 * open either fails with a message or yields a consistent checkpoint:
 * tensors ordered by file then offset, inside their files, each name found
 * by rl_ckpt_find() and unique, metadata sorted by key.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ringload.h"

const char *fuzz_target_name = "ckpt";

static char dir[256];

static void cleanup(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[512];

	if (!d)
		return;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
			unlink(p);
		}
	closedir(d);
	rmdir(dir);
}

static int put(const char *name, const uint8_t *b, size_t n)
{
	char p[512];
	int fd, ok;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	ok = write(fd, b, n) == (ssize_t)n;
	close(fd);
	return ok ? 0 : -1;
}

static void check(const char *path)
{
	rl_ckpt *ck = rl_ckpt_create();
	size_t n;

	if (!ck)
		return;
	if (rl_ckpt_open(ck, path) < 0) {
		if (!rl_ckpt_errmsg(ck)[0])
			__builtin_trap();
		rl_ckpt_destroy(ck);
		return;
	}
	/* An index cannot reach files outside its directory. */
	for (size_t i = 0; i < rl_ckpt_num_files(ck); i++) {
		const char *f = rl_ckpt_file_path(ck, i);

		if (strncmp(f, dir, strlen(dir)) || f[strlen(dir)] != '/' || strstr(f, "/../"))
			__builtin_trap();
	}
	n = rl_ckpt_num_tensors(ck);
	for (size_t i = 0; i < n; i++) {
		rl_tensor_info t, p;

		if (rl_ckpt_tensor(ck, i, &t) || rl_ckpt_find(ck, t.name) != (long)i)
			__builtin_trap();
		if (t.file >= rl_ckpt_num_files(ck) ||
		    t.offset + t.nbytes > rl_ckpt_file_size(ck, t.file))
			__builtin_trap();
		if (i && (rl_ckpt_tensor(ck, i - 1, &p) || p.file > t.file ||
			  (p.file == t.file && p.offset + p.nbytes > t.offset)))
			__builtin_trap();
	}
	for (size_t i = 1; i < rl_ckpt_num_metadata(ck); i++) {
		const char *a, *b;

		rl_ckpt_metadata(ck, i - 1, &a, NULL);
		rl_ckpt_metadata(ck, i, &b, NULL);
		if (strcmp(a, b) >= 0)
			__builtin_trap();
	}
	rl_ckpt_destroy(ck);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *end = data + size;
	char name[64], path[512];
	int part = 0;

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "%s/rl-fuzz-ckpt-XXXXXX",
			 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (!mkdtemp(dir)) {
			dir[0] = '\0';
			return 0;
		}
		atexit(cleanup);
	}
	for (int i = 0; i < 8; i++) {
		snprintf(path, sizeof(path), "%s/s%d.safetensors", dir, i);
		unlink(path);
	}
	while (part < 9) {
		const uint8_t *sep = memmem(p, (size_t)(end - p), "\n--\n", 4);
		const uint8_t *stop = sep ? sep : end;

		if (part == 0)
			snprintf(name, sizeof(name), "model.safetensors.index.json");
		else
			snprintf(name, sizeof(name), "s%d.safetensors", part - 1);
		if (put(name, p, (size_t)(stop - p)))
			return 0;
		part++;
		if (!sep)
			break;
		p = sep + 4;
	}
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	check(path);
	check(dir);
	return 0;
}
