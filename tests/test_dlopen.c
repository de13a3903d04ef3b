/*
 * test_dlopen.c - libringload.so loads with dlopen as runtimes load native
 * code (Python's ctypes, PyTorch/JAX extensions, JNI), with no LD_PRELOAD
 * and no glibc tunable, and a checkpoint loads through it.
 *
 * This program links nothing of ringload and no jemalloc (see the Makefile):
 * Debian's libjemalloc is built with initial-exec TLS, and a library that
 * needs it fails to dlopen with "cannot allocate memory in static TLS
 * block". RL_BUILD names the build directory holding the library.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ringload.h"

static char so_path[512];

static const char *so(void)
{
	const char *b = getenv("RL_BUILD");

	if (!so_path[0])
		snprintf(so_path, sizeof(so_path), "%s/libringload.so.0", b ? b : "build");
	return so_path;
}

/* A small checkpoint: "w" F32 (4,8) holding 0..31, "b" U8 (3,) = 7,8,9. */
static const char *write_sample(void)
{
	static char path[512];
	const char *hdr = "{\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[128,131]},"
			  "\"w\":{\"dtype\":\"F32\",\"shape\":[4,8],\"data_offsets\":[0,128]}}";
	uint64_t n = strlen(hdr);
	float w[32];
	uint8_t b[3] = { 7, 8, 9 };
	FILE *f;

	for (int i = 0; i < 32; i++)
		w[i] = (float)i;
	snprintf(path, sizeof(path), "%s/sample.safetensors", th_tmpdir());
	f = fopen(path, "wb");
	if (!f || fwrite(&n, 8, 1, f) != 1 || fwrite(hdr, 1, n, f) != n ||
	    fwrite(w, 4, 32, f) != 32 || fwrite(b, 1, 3, f) != 3 || fclose(f) != 0)
		return NULL;
	return path;
}

/* The library's dynamic section: no jemalloc among its NEEDED entries and
 * no STATIC_TLS flag (readelf, from binutils, comes with gcc). */
static void shared_library_needs_no_static_tls(void)
{
	char cmd[600], line[512];
	int needed = 0;
	FILE *p;

	if (access(so(), R_OK) != 0)
		SKIP("the shared library is not built (RL_BUILD)");
	snprintf(cmd, sizeof(cmd), "readelf -d '%s' 2>&1", so());
	p = popen(cmd, "r");
	CHECK(p);
	while (fgets(line, sizeof(line), p)) {
		if (strstr(line, "(NEEDED)")) {
			needed++;
			if (strstr(line, "jemalloc"))
				th_fail(__FILE__, __LINE__, "needs jemalloc: %s", line);
		}
		if (strstr(line, "FLAGS") && strstr(line, "STATIC_TLS"))
			th_fail(__FILE__, __LINE__, "STATIC_TLS: %s", line);
	}
	CHECK(pclose(p) == 0);
	CHECK(needed > 0); /* readelf really read the dynamic section */
}

/* Function names declared in api/ringload.h: "rl_x(" after a type, outside
 * comments and typedefs. */
static size_t declared_names(char names[][64], size_t max)
{
	const char *src = getenv("RL_SRCDIR");
	char path[512], line[512];
	size_t n = 0;
	int in_comment = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/api/ringload.h", src ? src : ".");
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f) && n < max) {
		char *p = line, *q;

		if (in_comment || strstr(line, "/*"))
			in_comment = !strstr(line, "*/");
		if (in_comment || line[0] == ' ' || line[0] == '\t' || line[0] == '#' ||
		    !strncmp(line, "/*", 2) || !strncmp(line, "typedef", 7))
			continue;
		while ((q = strstr(p, "rl_"))) {
			size_t k = strspn(q, "abcdefghijklmnopqrstuvwxyz0123456789_");

			if (q > line && (q[-1] == ' ' || q[-1] == '*') && q[k] == '(' && k < 64) {
				memcpy(names[n], q, k);
				names[n++][k] = '\0';
				break;
			}
			p = q + k;
		}
	}
	fclose(f);
	return n;
}

/* nm -D lists exactly the functions of the public header (the version
 * script lists them by name; nothing internal leaks out). */
static void exports_exactly_the_public_api(void)
{
	static char decl[256][64];
	char cmd[600], line[512];
	size_t ndecl = declared_names(decl, 256), nexp = 0;
	FILE *p;

	if (access(so(), R_OK) != 0)
		SKIP("the shared library is not built (RL_BUILD)");
	CHECKF(ndecl > 40, "found %zu declarations in api/ringload.h (RL_SRCDIR)", ndecl);
	snprintf(cmd, sizeof(cmd), "nm -D --defined-only '%s' 2>&1", so());
	p = popen(cmd, "r");
	CHECK(p);
	while (fgets(line, sizeof(line), p)) {
		char type, name[256];
		size_t i;

		if (sscanf(line, "%*s %c %255[^@\n]", &type, name) != 2 || type == 'A')
			continue; /* the version node's own symbol */
		for (i = 0; i < ndecl && strcmp(decl[i], name); i++)
			;
		if (i == ndecl)
			th_fail(__FILE__, __LINE__, "exported but not in ringload.h: %s", name);
		nexp++;
	}
	CHECK(pclose(p) == 0);
	CHECKF(nexp == ndecl, "%zu exported, %zu declared", nexp, ndecl);
}

#define SYM(h, name) ((__typeof__(&name))dlsym(h, #name))

/* A C program without jemalloc: dlopen, load the sample, check its bytes. */
static void c_program_loads_through_dlopen(void)
{
	const char *path = write_sample();
	rl_ckpt *ck = NULL;
	rl_loader *ld = NULL;
	rl_plan *plan = NULL;
	rl_shard_info si;
	size_t len = 0;
	uint8_t *area;
	void *h;
	int ret;

	CHECK(path);
	CHECK(dlsym(RTLD_DEFAULT, "mallocx") == NULL); /* no jemalloc here */
	h = dlopen(so(), RTLD_NOW | RTLD_LOCAL);
	CHECKF(h, "dlopen: %s", dlerror());
	ck = SYM(h, rl_ckpt_create)();
	ld = SYM(h, rl_loader_create)();
	CHECK(ck && ld);
	ret = SYM(h, rl_ckpt_open)(ck, path);
	CHECKF(ret == 0, "open: %s", SYM(h, rl_ckpt_errmsg)(ck));
	ret = SYM(h, rl_loader_load)(ld, ck, NULL, 0, &plan);
	CHECKF(ret == 0, "load: %s", SYM(h, rl_loader_errmsg)(ld));
	CHECK_EQ(SYM(h, rl_plan_num_shards)(plan), 2);
	area = SYM(h, rl_loader_staging)(ld, 0, &len);
	CHECK(area);
	for (size_t s = 0; s < 2; s++) {
		CHECK_EQ(SYM(h, rl_plan_shard)(plan, s, &si), 0);
		if (!strcmp(si.name, "w")) {
			float w[32];

			CHECK_EQ(si.nbytes, 128);
			memcpy(w, area + si.offset, 128);
			for (int i = 0; i < 32; i++)
				CHECK(w[i] == (float)i);
		} else {
			CHECK_STR(si.name, "b");
			CHECK(!memcmp(area + si.offset, "\x07\x08\x09", 3));
		}
	}
	SYM(h, rl_plan_destroy)(plan);
	SYM(h, rl_loader_destroy)(ld);
	SYM(h, rl_ckpt_destroy)(ck);
	CHECK(dlclose(h) == 0);
}

/* Debian's Python, after numpy (a typical runtime's first import), loads
 * the library with ctypes and the sample through it. */
static void python_loads_through_ctypes(void)
{
	static const char script[] =
		"import ctypes, sys\n"
		"import numpy as np\n"
		"L = ctypes.CDLL(sys.argv[1])\n"
		"V = ctypes.c_void_p\n"
		"for f, r in (('rl_ckpt_create', V), ('rl_loader_create', V),\n"
		"             ('rl_loader_staging', V), ('rl_loader_errmsg', ctypes.c_char_p)):\n"
		"    getattr(L, f).restype = r\n"
		"L.rl_ckpt_open.argtypes = [V, ctypes.c_char_p]\n"
		"L.rl_loader_load.argtypes = [V, V, V, ctypes.c_int, ctypes.POINTER(V)]\n"
		"L.rl_loader_staging.argtypes = [V, ctypes.c_uint, ctypes.POINTER(ctypes.c_size_t)]\n"
		"L.rl_loader_errmsg.argtypes = [V]\n"
		"for f in ('rl_plan_destroy', 'rl_loader_destroy', 'rl_ckpt_destroy'):\n"
		"    getattr(L, f).argtypes = [V]\n"
		"ck, ld, plan = L.rl_ckpt_create(), L.rl_loader_create(), V()\n"
		"assert L.rl_ckpt_open(ck, sys.argv[2].encode()) == 0\n"
		"r = L.rl_loader_load(ld, ck, None, 0, ctypes.byref(plan))\n"
		"assert r == 0, L.rl_loader_errmsg(ld)\n"
		"n = ctypes.c_size_t()\n"
		"p = L.rl_loader_staging(ld, 0, ctypes.byref(n))\n"
		"a = np.ctypeslib.as_array((ctypes.c_uint8 * n.value).from_address(p))\n"
		"w = a[:128].view(np.float32)\n"
		"assert (w == np.arange(32, dtype=np.float32)).all(), w\n"
		"L.rl_plan_destroy(plan); L.rl_loader_destroy(ld); L.rl_ckpt_destroy(ck)\n";
	const char *path = write_sample();
	char cmd[2048];
	int st;

#ifdef RL_SANITIZER
	SKIP("a sanitizer build's library needs its runtime preloaded in Python");
#endif
	CHECK(path);
	if (access("/usr/bin/python3", X_OK) != 0)
		SKIP("needs /usr/bin/python3 (make deps installs it)");
	if (system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
		SKIP("needs python3-numpy (make deps installs it)");
	/* Staging offsets: "w" is the first shard at offset 0 (ordered by
	 * tensor within the device), as the C test above checks by name. */
	snprintf(cmd, sizeof(cmd), "env -u LD_PRELOAD /usr/bin/python3 - '%s' '%s' <<'EOF'\n%sEOF\n",
		 so(), path, script);
	st = system(cmd);
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "python3 exited with status %d", st);
}

int main(void)
{
	RUN(shared_library_needs_no_static_tls);
	RUN(exports_exactly_the_public_api);
	RUN(c_program_loads_through_dlopen);
	RUN(python_loads_through_ctypes);
	return th_done();
}
