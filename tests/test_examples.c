/*
 * test_examples.c - runs the programs of examples/ as their readers would
 * (build/examples/NAME): stream_load on a generated checkpoint with a budget
 * of 64 KiB (windows recycled hundreds of times, releases from its second
 * thread) and of 8 MiB, every tensor compared with the file by the
 * example itself; a missing file fails with one line naming it.
 */
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

int main(void)
{
	RUN(stream_load);
	return th_done();
}
