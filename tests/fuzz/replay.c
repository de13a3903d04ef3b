/*
 * replay.c - runs a libFuzzer target over its committed corpus without
 * libFuzzer, so that `make test` replays every input with the normal build.
 * The corpus is tests/fuzz/corpus/<target>/ (argv[1] overrides).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern const char *fuzz_target_name;

static const char *corpus_dir;
static int inputs;

static void replay_corpus(void)
{
	DIR *d = opendir(corpus_dir);
	struct dirent *de;

	CHECKF(d, "cannot open corpus %s", corpus_dir);
	while ((de = readdir(d))) {
		char path[4096];
		FILE *f;
		uint8_t *buf;
		long n;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", corpus_dir, de->d_name);
		f = fopen(path, "rb");
		if (!f)
			continue;
		fseek(f, 0, SEEK_END);
		n = ftell(f);
		fseek(f, 0, SEEK_SET);
		buf = malloc(n ? n : 1);
		if (buf && fread(buf, 1, n, f) == (size_t)n) {
			LLVMFuzzerTestOneInput(buf, n);
			inputs++;
		}
		free(buf);
		fclose(f);
	}
	closedir(d);
	CHECKF(inputs > 0, "empty corpus %s", corpus_dir);
}

int main(int argc, char **argv)
{
	static char dir[4096];
	char name[256];

	snprintf(dir, sizeof(dir), "tests/fuzz/corpus/%s", fuzz_target_name);
	corpus_dir = argc > 1 ? argv[1] : dir;
	snprintf(name, sizeof(name), "replay_%s", fuzz_target_name);
	th_run(name, replay_corpus);
	printf("    %d inputs\n", inputs);
	return th_done();
}
