/*
 * test_examples.c - runs the programs of examples/ as their readers would
 * (build/examples/NAME): stream_load on a generated checkpoint with a budget
 * of 64 KiB (windows recycled hundreds of times, releases from its second
 * thread) and of 8 MiB, every tensor compared with the file by the
 * example itself; a missing file fails with one line naming it. And the
 * README's C program, built as its build line says and run.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char *build(void)
{
	const char *b = getenv("RL_BUILD");

	return b && *b ? b : "build";
}

static void stream_load(void)
{
	static const char *const budgets[] = { "65536", "8388608" };
	char cmd[1024], out[4096];

	snprintf(cmd, sizeof(cmd), "%s/mkckpt %s/e.safetensors --size 6M", build(), th_tmpdir());
	CHECK(th_capture(cmd, out, sizeof(out)) == 0);
	for (int i = 0; i < 2; i++) {
		snprintf(cmd, sizeof(cmd), "%s/examples/stream_load %s/e.safetensors %s", build(),
			 th_tmpdir(), budgets[i]);
		CHECKF(th_capture(cmd, out, sizeof(out)) == 0, "%s: %s", cmd, out);
		CHECKF(strstr(out, " 0 differ") && strstr(out, "pieces"), "%s", out);
	}
	snprintf(cmd, sizeof(cmd), "%s/examples/stream_load %s/missing.safetensors", build(),
		 th_tmpdir());
	CHECKF(th_capture(cmd, out, sizeof(out)) == 1 && strstr(out, "missing.safetensors"), "%s",
	       out);
}

/* The C flags a program needs to link this build's library (a sanitizer's). */
static const char *san_flags(void)
{
	const char *san = getenv("RL_SAN");

	if (san && !strcmp(san, "asan"))
		return "-fsanitize=address,undefined";
	return san && !strcmp(san, "tsan") ? "-fsanitize=thread" : "";
}

/*
 * README's C example is a whole program with its build line (it had no
 * main and none): built from the build tree as README says, it loads a
 * sample for the sample sharding, printing a line per shard of both
 * devices, and says how to call it when given nothing.
 */
static void readme_c_example(void)
{
	char *readme, *at, *end, cmd[3 * PATH_MAX], out[1 << 16], lib[PATH_MAX];
	const char *dir = th_tmpdir();
	size_t n;
	FILE *f;

	readme = th_slurp("README.md", &n);
	if (!readme)
		SKIP("needs README.md in the current directory (make test runs there)");
	at = strstr(readme, "```c\n");
	end = at ? strstr(at, "\n```\n") : NULL;
	CHECKF(at && end && strstr(readme, "cc load.c -o load -Iapi -Lbuild -lringload"),
	       "README.md: no C example with its build line");
	*end = '\0';
	CHECKF(strstr(at, "int main("), "README.md's C example has no main");
	snprintf(cmd, sizeof(cmd), "%s/load.c", dir);
	f = fopen(cmd, "w");
	CHECK(f && fprintf(f, "%s\n", at + 5) > 0 && fclose(f) == 0);
	free(readme);
	CHECK(realpath(build(), lib));
	snprintf(cmd, sizeof(cmd), "cc %s %s/load.c -o %s/load -Iapi -L%s -lringload "
		 "-Wl,-rpath,%s 2>&1", san_flags(), dir, dir, lib, lib);
	CHECKF(th_capture(cmd, out, sizeof(out)) == 0, "%s: %s", cmd, out);
	snprintf(cmd, sizeof(cmd), "%s/mkckpt %s/r.safetensors --size 6M", build(), dir);
	CHECK(th_capture(cmd, out, sizeof(out)) == 0);
	snprintf(cmd, sizeof(cmd), "%s/load %s/r.safetensors tools/sample-sharding.json", dir, dir);
	CHECKF(th_capture(cmd, out, sizeof(out)) == 0 && strstr(out, ": device 0, ") &&
	       strstr(out, ": device 1, "), "%s: %s", cmd, out);
	snprintf(cmd, sizeof(cmd), "%s/load", dir);
	CHECKF(th_capture(cmd, out, sizeof(out)) == 1 && strstr(out, "usage:"), "%s", out);
}

int main(void)
{
	RUN(stream_load);
	RUN(readme_c_example);
	return th_done();
}
