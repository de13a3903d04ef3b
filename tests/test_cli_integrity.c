/*
 * test_cli_integrity.c - `ringload load`'s integrity options through the
 * real binary (RL_BUILD/ringload), on every backend: --sha256 right and
 * wrong (exit 1 naming the file and both values), its syntax (exit 2) and
 * a name that is no file of the checkpoint, --sha256-file (good, a bad line
 * named by number, an escaped name as sha256sum writes it, a file naming
 * none of the checkpoint's files), a sharding that reads part of the file (exit 1), a Hugging Face
 * cache file read in part (a warning, exit 0), streaming (--staging-budget)
 * with --sha256-file (exit 0; 1 naming a file with a flipped byte), and a
 * file rewritten or
 * touched while the load holds in its read phase (RINGLOAD_TEST_HOLD with
 * RINGLOAD_TEST_RESUME): "file changed during load", exit 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ckpt_util.h"
#include "harness.h"
#include "common.h"

static const char *const backends[] = { "io_uring", "libaio", "pread" };
static const char *cur = "io_uring";
static char out[16384];

static const char *build(void)
{
	const char *b = getenv("RL_BUILD");

	return b && *b ? b : "build";
}

/* Runs `ringload load ARGS` on the current backend in the test's
 * directory; output (stdout and stderr) in out; returns the exit status. */
static int ringload_load(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int ringload_load(const char *fmt, ...)
{
	char args[4096], cmd[8192], bin[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	if (!realpath(build(), bin))
		return -1;
	snprintf(cmd, sizeof(cmd), "cd %s || exit 99; timeout 60 %s/ringload load --backend %s --workers 2 "
		 "--request-bytes 16K %s", th_tmpdir(), bin, cur, args);
	return th_capture(cmd, out, sizeof(out));
}

/* m.safetensors in the test's directory: 4 tensors of 64 KiB. */
static int ckpt(char hex[65])
{
	return write_hashed_ckpt(tmp_path("m.safetensors"), 4, 64 << 10, hex);
}

static void skip_unavailable(void)
{
	if (strstr(out, "unavailable"))
		SKIP("backend unavailable");
}

static void sha256_option(void)
{
	char hex[65], bad[65];
	int rc;

	CHECK(ckpt(hex) == 0);
	rc = ringload_load("m.safetensors --sha256 m.safetensors=%s", hex);
	skip_unavailable();
	CHECKF(rc == 0 && strstr(out, "sha256: 1 file matches"), "%d %s", rc, out);
	memcpy(bad, hex, sizeof(bad));
	bad[63] = bad[63] == 'f' ? 'e' : 'f';
	rc = ringload_load("m.safetensors --sha256 m.safetensors=%s", bad);
	CHECKF(rc == 1 && strstr(out, "ringload load: m.safetensors: SHA-256 mismatch: expected ") &&
	       strstr(out, bad) && strstr(out, hex), "%d %s", rc, out);
	rc = ringload_load("m.safetensors --sha256 m.safetensors=%.63s", hex);
	CHECKF(rc == 2 && strstr(out, "--sha256 'm.safetensors=") &&
	       strstr(out, "expected FILE=HEX with 64 hex digits"), "%d %s", rc, out);
	rc = ringload_load("m.safetensors --sha256 other.safetensors=%s", hex);
	CHECKF(rc == 1 && strstr(out, "--sha256 other.safetensors: not a file of the checkpoint"),
	       "%d %s", rc, out);
}

/* A checkpoint directory esc/ of "n\nl.safetensors", its SUMS line escaped
 * as sha256sum writes it, loads checked: 0, or -1 with the reason in out. */
static int sha256_escaped_newline(void)
{
	char hex[65], line[128], cmd[4200];
	int rc;

	snprintf(cmd, sizeof(cmd), "rm -rf %s/esc && mkdir %s/esc", th_tmpdir(), th_tmpdir());
	if (system(cmd) || write_hashed_ckpt(tmp_path("esc/n\nl.safetensors"), 2, 4096, hex))
		return -1;
	snprintf(line, sizeof(line), "\\%s  n\\nl.safetensors\n", hex);
	if (write_bytes(tmp_path("esc/SUMS"), line, strlen(line)))
		return -1;
	rc = ringload_load("esc --sha256-file esc/SUMS");
	return rc == 0 && strstr(out, "sha256: 1 file matches") ? 0 : -1;
}

static void sha256_file_parsing(void)
{
	char hex[65], esc_hex[65], line[256];
	int rc;

	CHECK(ckpt(hex) == 0);
	/* a comment line, as sha256sum -c allows */
	snprintf(line, sizeof(line), "# weights\n%s  config.json\n%s *./m.safetensors\n\n", hex,
		 hex);
	CHECK(write_bytes(tmp_path("SUMS"), line, strlen(line)) == 0);
	rc = ringload_load("m.safetensors --sha256-file SUMS");
	skip_unavailable();
	CHECKF(rc == 0 && strstr(out, "sha256: 1 file matches"), "%d %s", rc, out);
	snprintf(line, sizeof(line), "%s  m.safetensors\n%.60s  x\n", hex, hex);
	CHECK(write_bytes(tmp_path("SUMS"), line, strlen(line)) == 0);
	rc = ringload_load("m.safetensors --sha256-file SUMS");
	CHECKF(rc == 1 && strstr(out, "SUMS:2: not '<64 hex digits>  <file name>'"), "%d %s", rc,
	       out);
	/* sha256sum escapes a name with a backslash, newline or CR (a leading
	 * '\\'): unescaped (regression: one such line refused the file) */
	CHECK(write_hashed_ckpt(tmp_path("m\\x.safetensors"), 2, 4096, esc_hex) == 0);
	snprintf(line, sizeof(line), "\\%s  m\\\\x.safetensors\n%s  m.safetensors\n", esc_hex,
		 hex);
	CHECK(write_bytes(tmp_path("SUMS"), line, strlen(line)) == 0);
	rc = ringload_load("'m\\x.safetensors' --sha256-file SUMS");
	CHECKF(rc == 0 && strstr(out, "sha256: 1 file matches"), "%d %s", rc, out);
	rc = ringload_load("m.safetensors --sha256-file SUMS");
	CHECKF(rc == 0 && strstr(out, "sha256: 1 file matches"), "%d %s", rc, out);
	CHECKF(sha256_escaped_newline() == 0, "%s", out);
	snprintf(line, sizeof(line), "\\%s  m\\x\n", hex);
	CHECK(write_bytes(tmp_path("SUMS"), line, strlen(line)) == 0);
	rc = ringload_load("m.safetensors --sha256-file SUMS");
	CHECKF(rc == 1 && strstr(out, "SUMS:1: a bad escape in the name"), "%d %s", rc, out);
	/* a NUL inside a line is an error naming it, in C and Python alike
	 * (regression: C cut the name there); one CR goes, not two */
	snprintf(line, sizeof(line), "%s  m.safetensors\n%s  m.safetensors", hex, hex);
	line[strlen(line) - 5] = '\0';
	CHECK(write_bytes(tmp_path("SUMS"), line, strlen(hex) * 2 + 31) == 0);
	rc = ringload_load("m.safetensors --sha256-file SUMS");
	CHECKF(rc == 1 && strstr(out, "SUMS:2: a NUL byte in the line"), "%d %s", rc, out);
	snprintf(line, sizeof(line), "%s  m.safetensors\r\r\n", hex);
	CHECK(write_bytes(tmp_path("SUMS"), line, strlen(line)) == 0);
	rc = ringload_load("m.safetensors --sha256-file SUMS");
	CHECKF(rc == 1 && strstr(out, "--sha256-file SUMS names none"), "%d %s", rc, out);
	snprintf(line, sizeof(line), "%s  other.safetensors\n", hex);
	CHECK(write_bytes(tmp_path("SUMS"), line, strlen(line)) == 0);
	rc = ringload_load("m.safetensors --sha256-file SUMS");
	CHECKF(rc == 1 && strstr(out, "--sha256-file SUMS names none of the checkpoint's files"),
	       "%d %s", rc, out);
	/* a FIFO is refused at once, not waited on (the open would block) */
	unlink(tmp_path("FIFO"));
	CHECK(mkfifo(tmp_path("FIFO"), 0600) == 0);
	rc = ringload_load("m.safetensors --sha256-file FIFO");
	CHECKF(rc == 1 && strstr(out, "--sha256-file FIFO: not a regular file"), "%d %s", rc, out);
	rc = ringload_load("m.safetensors --sha256-file NOSUCH");
	CHECKF(rc == 1 && strstr(out, "--sha256-file NOSUCH: No such file"), "%d %s", rc, out);
}

/* path: a safetensors file of one tensor "u" of 4 zero bytes. */
static int write_u_tensor(const char *path)
{
	static const char hdr[] = "{\"u\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}";
	char b[8 + sizeof(hdr) + 4] = { sizeof(hdr) - 1 };

	memcpy(b + 8, hdr, sizeof(hdr) - 1);
	return write_bytes(path, b, sizeof(b) - 1);
}

/*
 * d/a.safetensors (d/SUMS: "hex  a.safetensors") given a second, different
 * value, however spelled, from --sha256 or SUMS: exit 1 naming both
 * (regression: the last value won, so a wrong --sha256 before a SUMS, or
 * two --sha256 spellings of one file, loaded); the same value twice is no
 * conflict.
 */
static void sha256_second_value(const char *hex)
{
	char bad[65];
	int rc;

	memcpy(bad, hex, sizeof(bad));
	bad[0] = bad[0] == '0' ? '1' : '0';
	rc = ringload_load("d --sha256 a.safetensors=%s --sha256-file d/SUMS", bad);
	CHECKF(rc == 1 && strstr(out, "--sha256-file d/SUMS:1: a.safetensors has another value "
				 "from the one given for a.safetensors"), "%d %s", rc, out);
	rc = ringload_load("d --sha256 a.safetensors=%s --sha256 ./d/a.safetensors=%s", hex, bad);
	CHECKF(rc == 1 && strstr(out, "--sha256 ./d/a.safetensors has another value from "
				 "the one given for a.safetensors"), "%d %s", rc, out);
	rc = ringload_load("d --sha256 ./d/a.safetensors=%s --sha256-file d/SUMS", hex);
	CHECKF(rc == 0 && strstr(out, "sha256: 1 file matches"), "%d %s", rc, out);
}

/*
 * SUMS names are matched exactly, relative to the SUMS file's directory
 * (regression: matched by their end and the last match won, so a valid
 * SUMS listing sub/a.safetensors, then a.safetensors, failed a correct
 * load of sub/a.safetensors; absolute names were skipped).
 */
static void sha256_file_exact_names(void)
{
	static const char ONLY_A[] = "{\"mesh\":{\"shape\":[1],\"axes\":[\"x\"]},\"rules\":[],"
				     "\"tensors\":[\"t0\",\"t1\"]}";
	char hex[65], sub_hex[65], sums[1024], abs[4096];
	int rc;

	CHECK(ckpt(hex) == 0);
	snprintf(abs, sizeof(abs), "mkdir -p %s/ck/sub", th_tmpdir());
	CHECK(system(abs) == 0);
	CHECK(write_hashed_ckpt(tmp_path("ck/a.safetensors"), 2, 4096, hex) == 0);
	CHECK(write_hashed_ckpt(tmp_path("ck/sub/a.safetensors"), 3, 4096, sub_hex) == 0);
	snprintf(sums, sizeof(sums), "%s  sub/a.safetensors\n%s  a.safetensors\n", sub_hex, hex);
	CHECK(write_bytes(tmp_path("ck/SUMS"), sums, strlen(sums)) == 0);
	rc = ringload_load("ck/sub/a.safetensors --sha256-file ck/SUMS");
	skip_unavailable();
	CHECKF(rc == 0 && strstr(out, "sha256: 1 file matches") &&
	       strstr(out, "warning: ck/SUMS:2: a.safetensors is no file of the checkpoint"),
	       "%d %s", rc, out);
	/* An absolute name, and a checkpoint spelled with ./ and .. */
	CHECK(ckpt(hex) == 0);
	snprintf(sums, sizeof(sums), "%s  %s\n", hex, tmp_path("m.safetensors"));
	CHECK(write_bytes(tmp_path("ck/SUMS"), sums, strlen(sums)) == 0);
	rc = ringload_load("./ck/../m.safetensors --sha256-file ck/SUMS");
	CHECKF(rc == 0 && strstr(out, "sha256: 1 file matches"), "%d %s", rc, out);
	/* Two values for one file; a file with none. */
	snprintf(sums, sizeof(sums), "%s  a.safetensors\n%s  ./a.safetensors\n", hex, sub_hex);
	CHECK(write_bytes(tmp_path("ck/SUMS"), sums, strlen(sums)) == 0);
	rc = ringload_load("ck/a.safetensors --sha256-file ck/SUMS");
	CHECKF(rc == 1 && strstr(out, "ck/SUMS:2: ./a.safetensors has another value on line 1"),
	       "%d %s", rc, out);
	/* A file of the checkpoint with no line: a warning naming it. */
	mkdir(tmp_path("d"), 0755); /* the last backend's may be there */
	CHECK(write_u_tensor(tmp_path("d/b.safetensors")) == 0);
	CHECK(write_hashed_ckpt(tmp_path("d/a.safetensors"), 2, 4096, hex) == 0);
	snprintf(sums, sizeof(sums), "%s  a.safetensors\n", hex);
	CHECK(write_bytes(tmp_path("d/SUMS"), sums, strlen(sums)) == 0);
	rc = ringload_load("d --sha256-file d/SUMS");
	CHECKF(rc == 0 && strstr(out, "warning: d/b.safetensors: no line in d/SUMS: its "
				 "SHA-256 is not checked") && strstr(out, "sha256: 1 file matches"),
	       "%d %s", rc, out);
	/* not of a file this process does not read (regression: of every file) */
	CHECK(write_bytes(tmp_path("only_a.json"), ONLY_A, strlen(ONLY_A)) == 0);
	rc = ringload_load("d --sha256-file d/SUMS --sharding only_a.json");
	CHECKF(rc == 0 && !strstr(out, "b.safetensors") && strstr(out, "sha256: 1 file matches"),
	       "%d %s", rc, out);
	/* --sha256 FILE: a path, or a name relative to the checkpoint's directory */
	rc = ringload_load("d --sha256 a.safetensors=%s", hex);
	CHECKF(rc == 0 && strstr(out, "sha256: 1 file matches"), "%d %s", rc, out);
	rc = ringload_load("d --sha256 ./d/a.safetensors=%s", hex);
	CHECKF(rc == 0 && strstr(out, "sha256: 1 file matches"), "%d %s", rc, out);
	sha256_second_value(hex);
}

/*
 * A checkpoint reached through a symlinked directory matches the SUMS that
 * names it by the real one (regression: names were compared as lexical
 * absolute paths, so a correct SUMS was "no file of the checkpoint"); a
 * SUMS kept outside the checkpoint's directory names files relative to the
 * checkpoint's when nothing of that name is beside it, but a dangling
 * symlink beside it is something: its line is skipped (as in Python).
 */
static void sha256_sums_symlinked_and_elsewhere(void)
{
	char hex[65], sums[256], cmd[4200];
	int rc;

	snprintf(cmd, sizeof(cmd), "cd %s && rm -rf e && mkdir -p e/ck e/other && ln -s ck e/link",
		 th_tmpdir());
	CHECK(system(cmd) == 0);
	CHECK(write_hashed_ckpt(tmp_path("e/ck/a.safetensors"), 2, 4096, hex) == 0);
	snprintf(sums, sizeof(sums), "%s  a.safetensors\n", hex);
	CHECK(write_bytes(tmp_path("e/ck/SUMS"), sums, strlen(sums)) == 0);
	CHECK(write_bytes(tmp_path("e/other/SUMS"), sums, strlen(sums)) == 0);
	rc = ringload_load("e/link --sha256-file e/ck/SUMS");
	skip_unavailable();
	CHECKF(rc == 0 && strstr(out, "sha256: 1 file matches"), "%d %s", rc, out);
	rc = ringload_load("e/link/a.safetensors --sha256 e/ck/a.safetensors=%s", hex);
	CHECKF(rc == 0 && strstr(out, "sha256: 1 file matches"), "%d %s", rc, out);
	rc = ringload_load("e/ck --sha256-file e/other/SUMS");
	CHECKF(rc == 0 && strstr(out, "sha256: 1 file matches"), "%d %s", rc, out);
	CHECK(symlink("gone", tmp_path("e/other/a.safetensors")) == 0);
	rc = ringload_load("e/ck --sha256-file e/other/SUMS");
	CHECKF(rc == 1 && strstr(out, "warning: e/other/SUMS:1: a.safetensors is no file of the "
				 "checkpoint") && strstr(out, "names none of the checkpoint's files"),
	       "%d %s", rc, out);
}

static void sha256_partial_read(void)
{
	char hex[65], wrong[65];
	const char *spec = "{\"tensors\": [\"t2\"]}";
	int rc;

	CHECK(ckpt(hex) == 0);
	CHECK(write_bytes(tmp_path("part.json"), spec, strlen(spec)) == 0);
	rc = ringload_load("m.safetensors --sharding part.json --sha256 m.safetensors=%s", hex);
	skip_unavailable();
	CHECKF(rc == 1 && strstr(out, "m.safetensors: whole-file SHA-256 cannot be checked: "
				 "this load reads only part of the file"), "%d %s", rc, out);
	/* The Hugging Face layout names a value nobody asked for: a warning. */
	memcpy(wrong, hex, sizeof(wrong));
	wrong[0] = wrong[0] == '0' ? '1' : '0';
	snprintf(out, sizeof(out), "cd %s && rm -rf hf && mkdir -p hf/blobs hf/snapshots/r && "
		 "cp m.safetensors hf/blobs/%s && ln -s ../../blobs/%s hf/snapshots/r/m.safetensors",
		 th_tmpdir(), wrong, wrong);
	CHECK(system(out) == 0);
	rc = ringload_load("hf/snapshots/r/m.safetensors --sharding part.json");
	CHECKF(rc == 0 && strstr(out, "warning: hf/snapshots/r/m.safetensors: expected SHA-256 "
				 "(Hugging Face cache) not checked: this load reads only part "
				 "of the file"), "%d %s", rc, out);
	rc = ringload_load("hf/snapshots/r/m.safetensors");
	CHECKF(rc == 1 && strstr(out, "SHA-256 mismatch") && strstr(out, wrong), "%d %s", rc, out);
	rc = ringload_load("hf/snapshots/r/m.safetensors --no-hf-sha256");
	CHECKF(rc == 0, "%d %s", rc, out);
}

/*
 * A streaming load hashes: a Hugging Face cache file whose blob is not
 * what its name says fails the load naming it (it loaded with a warning
 * when streaming did not hash).
 */
static void sha256_hf_streaming_checks(void)
{
	char hex[65], wrong[65];
	int rc;

	CHECK(ckpt(hex) == 0);
	memcpy(wrong, hex, sizeof(wrong));
	wrong[0] = wrong[0] == '0' ? '1' : '0';
	snprintf(out, sizeof(out), "cd %s && rm -rf hf && mkdir -p hf/blobs hf/snapshots/r && "
		 "cp m.safetensors hf/blobs/%s && ln -s ../../blobs/%s hf/snapshots/r/m.safetensors",
		 th_tmpdir(), wrong, wrong);
	CHECK(system(out) == 0);
	rc = ringload_load("hf/snapshots/r/m.safetensors --staging-budget 64K");
	skip_unavailable();
	CHECKF(rc == 1 && strstr(out, "hf/snapshots/r/m.safetensors: SHA-256 mismatch") &&
	       strstr(out, wrong) && strstr(out, hex), "%d %s", rc, out);
	rc = ringload_load("hf/snapshots/r/m.safetensors --staging-budget 64K --no-hf-sha256");
	CHECKF(rc == 0 && !strstr(out, "warning"), "%d %s", rc, out);
}

/*
 * --staging-budget with --sha256-file (refused with exit 2 before the
 * execution layer hashed across windows): a good checkpoint passes, with
 * the smallest budget (many windows) and 8M (one); a byte flipped in its
 * data fails the load with exit 1 naming the file.
 */
static void sha256_streaming(void)
{
	char hex[65], line[128];
	uint8_t b;
	FILE *f;
	int rc;

	CHECK(ckpt(hex) == 0);
	snprintf(line, sizeof(line), "%s  m.safetensors\n", hex);
	CHECK(write_bytes(tmp_path("SUMS"), line, strlen(line)) == 0);
	rc = ringload_load("m.safetensors --staging-budget 64K --sha256-file SUMS");
	skip_unavailable();
	CHECKF(rc == 0 && strstr(out, "sha256: 1 file matches"), "%d %s", rc, out);
	rc = ringload_load("m.safetensors --staging-budget 8M --sha256-file SUMS");
	CHECKF(rc == 0 && strstr(out, "sha256: 1 file matches"), "%d %s", rc, out);
	f = fopen(tmp_path("m.safetensors"), "r+b");
	CHECK(f && fseek(f, 150000, SEEK_SET) == 0 && fread(&b, 1, 1, f) == 1);
	b ^= 0x40;
	CHECK(fseek(f, 150000, SEEK_SET) == 0 && fwrite(&b, 1, 1, f) == 1 && fclose(f) == 0);
	rc = ringload_load("m.safetensors --staging-budget 64K --sha256-file SUMS");
	CHECKF(rc == 1 && strstr(out, "ringload load: m.safetensors: SHA-256 mismatch: expected ") &&
	       strstr(out, hex), "%d %s", rc, out);
}

/* Holds the load in its read phase, runs change (a shell line) on the
 * file, lets the load go on. */
static int load_while(const char *change)
{
	char args[2048];

	/* err is removed first: the loop below would otherwise find the
	 * "holding" line of the last call's load and change the file before
	 * this load has opened it. */
	unlink(tmp_path("go"));
	unlink(tmp_path("err"));
	snprintf(args, sizeof(args), "m.safetensors 2>err & p=$!; "
		 "n=0; while ! grep -q holding err 2>/dev/null && [ $n -lt 1000 ]; "
		 "do sleep 0.01; n=$((n+1)); done; %s; touch go; "
		 "wait $p; rc=$?; cat err; exit $rc", change);
	setenv("RINGLOAD_TEST_HOLD", "read", 1);
	setenv("RINGLOAD_TEST_RESUME", tmp_path("go"), 1);
	return ringload_load("%s", args);
}

static void file_changed_during_load(void)
{
	char hex[65];
	int rc;

	CHECK(ckpt(hex) == 0);
	rc = load_while("dd if=/dev/zero of=m.safetensors bs=4096 count=4 seek=10 "
			"conv=notrunc status=none");
	unsetenv("RINGLOAD_TEST_HOLD");
	unsetenv("RINGLOAD_TEST_RESUME");
	skip_unavailable();
	CHECKF(rc == 1 && strstr(out, "ringload load: m.safetensors: file changed during load"),
	       "%d %s", rc, out);
	CHECK(ckpt(hex) == 0);
	rc = load_while("touch -m m.safetensors");
	unsetenv("RINGLOAD_TEST_HOLD");
	unsetenv("RINGLOAD_TEST_RESUME");
	CHECKF(rc == 1 && strstr(out, "m.safetensors: file changed during load (modification "
				 "time differs)"), "%d %s", rc, out);
}

int main(void)
{
	static const struct {
		const char *name;
		th_fn fn;
	} tests[] = {
		{ "sha256_option", sha256_option },
		{ "sha256_file_parsing", sha256_file_parsing },
		{ "sha256_file_exact_names", sha256_file_exact_names },
		{ "sha256_sums_symlinked_and_elsewhere", sha256_sums_symlinked_and_elsewhere },
		{ "sha256_partial_read", sha256_partial_read },
		{ "sha256_hf_streaming_checks", sha256_hf_streaming_checks },
		{ "sha256_streaming", sha256_streaming },
		{ "file_changed_during_load", file_changed_during_load },
	};
	char name[128];

	th_seed();
	for (size_t b = 0; b < CM_ARRAY_SIZE(backends); b++) {
		cur = backends[b];
		for (size_t t = 0; t < CM_ARRAY_SIZE(tests); t++) {
			snprintf(name, sizeof(name), "%s/%s", cur, tests[t].name);
			th_run(name, tests[t].fn);
		}
	}
	return th_done();
}
