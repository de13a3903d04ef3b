#!/usr/bin/env bash
# gpu_check.sh --quick - the one command for a lent GPU machine (issue 31;
# docs/cuda.md, "Running the GPU check"). From a copy of the tree with
# build/ carried (else it builds with make -j), with nothing from a
# package registry, within 5 minutes on 16 cores:
#
#  build     the carried build runs, or make -j builds one
#  cli-*     ringload load --device cuda:0 of a generated 64 MiB
#            checkpoint: --verify whole; sharded over two spec devices on
#            GPU 0; --sha256-file (streaming, hashed on the read path); a
#            flipped byte refused (exit 1, naming the file)
#  torch     python/tests/test_gpu.py with the machine's python3 and its
#            CUDA torch, every skip a failure (RL_NO_SKIP=1)
#  bench-*   a SIZE (2G) checkpoint to cuda:0 from the local disk (cold:
#            page cache dropped when root, else the file evicted with
#            fadvise, as it says) and from tmpfs: ringload load, ringload's
#            torch load_file, safetensors.torch.load_file(device="cuda:0")
#            where importable, and fio's best over a small grid where
#            installed; whole processes, ROUNDS (2) rounds, median GB/s
#            and peak host memory (maximum RSS) in a table
#
# Prints a verdict per step and last "gpu check: N passed, N failed,
# N skipped"; exits 0 only when nothing failed and nothing was skipped.
# RL_LIBCUDA=PATH runs every step against that driver (the tests' fake,
# build/tests/fakecuda/libcuda.so.1); the steps that need torch's own CUDA
# are then skipped, saying "needs torch's CUDA".
# Environment: BUILD (build), OUT (BUILD/gpu-check: logs, table, files),
# SIZE (2G), ROUNDS (2), BUDGET (256M), RL_PYTHON (python3), SHM (a tmpfs
# directory, default /dev/shm), RL_GPU_DROP (1: drop the page cache when
# root; 0: evict the file only), STEP_TIMEOUT (150 s per process),
# DEADLINE (270 s: later bench runs are skipped, saying so).
# --pack (before carrying build/): see pack() below.
set -u
me=gpu_check.sh
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.." || exit 2
# --pack: before carrying build/, copies pytest and the pure-Python modules
# it needs into BUILD/pylib (from RL_PACK_PYTHON, default /usr/bin/python3),
# for a device machine whose python3 has torch but no pytest.
pack() {
	local py=${RL_PACK_PYTHON:-/usr/bin/python3} dst=${BUILD:-build}/pylib
	rm -rf "$dst" && mkdir -p "$dst" || exit 1
	"$py" - "$dst" <<'PY' || exit 1
import importlib, os, shutil, sys
dst = sys.argv[1]
for m in ("pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "attr", "attrs",
          "exceptiongroup", "tomli"):
    try:
        f = importlib.import_module(m).__file__
    except ImportError:
        continue
    if os.path.basename(f) == "__init__.py":
        shutil.copytree(os.path.dirname(f), os.path.join(dst, m),
                        ignore=shutil.ignore_patterns("__pycache__"))
    else:
        shutil.copy(f, dst)
PY
	echo "$me: $(du -sh "$dst" | cut -f1) in $dst: $(ls "$dst" | tr '\n' ' ')"
	# The libraries outside glibc that the build links (liburing, libaio,
	# cJSON, libcrypto, jemalloc), used only where the machine lacks them.
	dst=${BUILD:-build}/syslib
	rm -rf "$dst" && mkdir -p "$dst" || exit 1
	ldd "${BUILD:-build}/ringload" "${BUILD:-build}/libringload.so.0" |
		awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
		grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libringload[^/]*)\.so' |
		xargs -r cp -L -t "$dst" || exit 1
	echo "$me: $(du -sh "$dst" | cut -f1) in $dst: $(ls "$dst" | tr '\n' ' ')"
	exit 0
}
case ${1:-} in
--quick) ;;
--pack) pack ;;
-h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
*) echo "$me: usage: $me --quick | --pack (see docs/cuda.md)" >&2; exit 2 ;;
esac

BUILD=${BUILD:-build}
OUT=${OUT:-$BUILD/gpu-check}
SIZE=${SIZE:-2G}
ROUNDS=${ROUNDS:-2}
BUDGET=${BUDGET:-256M}
PY=${RL_PYTHON:-python3}
STEP_TIMEOUT=${STEP_TIMEOUT:-150}
export RL_BUILD=$BUILD
bdir=$(realpath -m "$BUILD") # for the Python steps, which run elsewhere too
if [ -n "${RL_LIBCUDA:-}" ]; then
	RL_LIBCUDA=$(realpath -m "$RL_LIBCUDA")
	export RL_LIBCUDA
fi
logs=$OUT/logs
rm -rf "$logs" "$OUT/results.tsv"
mkdir -p "$logs" || exit 2
results=$OUT/results.tsv # medium reader round seconds maxrss_bytes
: >"$results"
npass=0 nfail=0 nskip=0 notes=()
t_begin=$(date +%s)
shmdir="" bench_bytes=0

verdict() { # pass|FAIL|skip what [why]
	case $1 in
	pass) npass=$((npass + 1)) ;;
	FAIL) nfail=$((nfail + 1)) ;;
	skip) nskip=$((nskip + 1)) ;;
	esac
	printf '%-4s %s%s\n' "$1" "$2" "${3:+: $3}"
}
note() { notes+=("$*"); echo "note $*"; }

# run NAME CMD...: CMD under its timeout, output in logs/NAME.log; sets
# RC and SECS.
run() {
	local name=$1 t0
	shift
	t0=$(date +%s.%N)
	timeout -k 5 "$STEP_TIMEOUT" "$@" >"$logs/$name.log" 2>&1
	RC=$?
	SECS=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}
# why NAME: the exit status and the log's last lines, on one line.
why() {
	local t=""
	[ "$RC" = 124 ] || [ "$RC" = 137 ] && t=" (timed out after ${STEP_TIMEOUT}s)"
	echo "exit $RC$t: $(tail -n 3 "$logs/$1.log" | tr '\n' ' ' | cut -c1-300)"
}
# step NAME CMD...: passes when CMD exits 0.
step() {
	local name=$1
	run "$@"
	if [ "$RC" = 0 ]; then verdict pass "$name (${SECS}s)"; else verdict FAIL "$name" "$(why "$name")"; fi
}

# late WHAT: past DEADLINE seconds (270: the check must end within 5
# minutes), WHAT is skipped, saying so; returns 0 then.
late() {
	local t=$(( $(date +%s) - t_begin ))
	[ "$t" -lt "${DEADLINE:-270}" ] && return 1
	verdict skip "$1" "out of time: ${t}s gone of the ${DEADLINE:-270}s this check may take"
	return 0
}

cleanup() {
	rm -f "$OUT"/*.safetensors "$OUT/SUMS"*
	[ -n "$shmdir" ] && rm -rf "$shmdir"
	[ -n "${shm_mnt:-}" ] && umount "$shm_mnt" 2>/dev/null && rmdir "$shm_mnt"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- build
# The carried libraries (--pack) of those the machine lacks, alone on
# LD_LIBRARY_PATH: the machine's own (libstdc++ for torch) stay first.
use_syslib() {
	local l lib=$OUT/lib missing
	missing=$(ldd "$BUILD/ringload" "$BUILD/libringload.so.0" 2>/dev/null |
		awk '/not found/ { print $1 }' | sort -u)
	rm -rf "$lib" && mkdir -p "$lib" || return
	for l in $missing; do
		[ -e "$bdir/syslib/$l" ] && ln -s "$bdir/syslib/$l" "$lib/$l"
	done
	lib=$(realpath "$lib")
	export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	note "the machine lacks $(echo "$missing" | tr '\n' ' ')of the build: taken from $BUILD/syslib"
}

check_build() {
	local b have=1
	for b in ringload mkckpt libringload.so.0; do [ -e "$BUILD/$b" ] || have=0; done
	if [ $have = 1 ]; then
		run build "$BUILD/ringload" --help
		if [ "$RC" != 0 ] && [ -d "$BUILD/syslib" ]; then
			use_syslib
			run build "$BUILD/ringload" --help
		fi
		[ "$RC" = 0 ] && verdict pass "build: carried $BUILD ($(du -sh "$BUILD" | cut -f1))" && return 0
		verdict FAIL build "carried $BUILD/ringload does not run: $(why build)"
		return 1
	fi
	if ! command -v make >/dev/null || ! command -v "${CC:-cc}" >/dev/null; then
		verdict FAIL build "no $BUILD/ringload, and make or cc is missing: carry build/"
		return 1
	fi
	STEP_TIMEOUT=240 run build make -j"$(nproc)" BUILD="$BUILD" all
	[ "$RC" = 0 ] && verdict pass "build: make -j$(nproc) (${SECS}s)" && return 0
	verdict FAIL build "$(why build)"
	return 1
}

# ---------------------------------------------------------------- CLI
# refused FILE CMD...: CMD must exit 1 with a line naming FILE's mismatch.
refused() {
	local f=$1 out rc
	shift
	out=$("$@" 2>&1)
	rc=$?
	echo "$out"
	[ "$rc" = 1 ] && grep -q "$(basename "$f").*SHA-256 mismatch" <<<"$out" && return 0
	echo "expected exit 1 and a line naming $(basename "$f")'s SHA-256 mismatch"
	return 1
}
export -f refused

check_cli() {
	local small=$OUT/small.safetensors bad=$OUT/flipped.safetensors spec=$OUT/two.json
	local rl=("$BUILD/ringload" load --quiet --device)
	run cli-fixture "$BUILD/mkckpt" "$small" --size 64M --seed 2
	if [ "$RC" != 0 ]; then
		verdict FAIL cli-fixture "$(why cli-fixture)"
		return
	fi
	printf '{"mesh":{"shape":[2],"axes":["d"]},"rules":[{"match":".*","spec":["d"]}]}' >"$spec"
	(cd "$OUT" && sha256sum small.safetensors >SUMS && sed 's/small/flipped/' SUMS >SUMS.flipped)
	cp "$small" "$bad" && printf '\xa5' | dd of="$bad" bs=1 seek=$(( $(stat -c %s "$bad") - 4096 )) \
		conv=notrunc status=none
	step cli-verify "${rl[@]}" cuda:0 --verify --staging-budget 8M "$small"
	step cli-sharded "${rl[@]}" cuda --device-map 0,0 --sharding "$spec" --verify "$small"
	step cli-sha256-file "${rl[@]}" cuda:0 --staging-budget 8M --sha256-file "$OUT/SUMS" \
		--verify "$small"
	step cli-flipped-byte-refused bash -c 'refused "$@"' _ "$bad" \
		"${rl[@]}" cuda:0 --staging-budget 8M --sha256-file "$OUT/SUMS.flipped" "$bad"
}

# ---------------------------------------------------------------- torch
# Sets TORCH_CUDA (1 or 0) and TORCH_WHY.
probe_torch() {
	TORCH_CUDA=0
	if [ -n "${RL_LIBCUDA:-}" ]; then
		TORCH_WHY="needs torch's CUDA (RL_LIBCUDA=$RL_LIBCUDA is under test)"
	elif ! command -v "$PY" >/dev/null; then
		TORCH_WHY="needs torch's CUDA: no $PY"
	elif TORCH_WHY=$("$PY" -c 'import torch
assert torch.cuda.is_available(), f"torch {torch.__version__}: torch.cuda.is_available() is False"
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")' 2>&1); then
		TORCH_CUDA=1
		note "$PY: $(echo "$TORCH_WHY" | tail -n 1)"
	else
		TORCH_WHY="needs torch's CUDA: $(echo "$TORCH_WHY" | tail -n 1)"
	fi
}

check_torch() {
	local sum p f s
	if [ "$TORCH_CUDA" != 1 ]; then
		verdict skip torch-tests "$TORCH_WHY"
		return
	fi
	# As python-tests.sh runs them; pytest from BUILD/pylib (--pack) where
	# the machine has none.
	RL_NO_SKIP=1 RL_PY_LABEL=gpu RINGLOAD_LIB=$bdir/libringload.so.0 \
		PYTHONPATH=$PWD/python:$bdir/pylib PYTHONDONTWRITEBYTECODE=1 \
		run torch-tests "$PY" python/tests/runner.py -m "not venv" python/tests/test_gpu.py
	sum=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$logs/torch-tests.log" | tail -n 1)
	read -r p _ f _ s _ <<<"$(echo "${sum:-0 passed, 1 failed, 0 skipped}" | tr -d ,)"
	if [ "$RC" = 0 ] && [ "$f" = 0 ] && [ "${s:-0}" = 0 ] && [ "$p" -gt 0 ]; then
		verdict pass "torch-tests: $sum (${SECS}s)"
	else
		verdict FAIL torch-tests "${sum:-no summary}; $(why torch-tests)"
		grep -E '^(FAIL|skip) ' "$logs/torch-tests.log" | head -n 10 | sed 's/^/    /'
	fi
}

# ---------------------------------------------------------------- bench
# Evicts FILE from the page cache: drop_caches when root (RL_GPU_DROP=1),
# else posix_fadvise(DONTNEED) on the file, which needs no privilege.
evict() {
	if [ "${RL_GPU_DROP:-1}" = 1 ] && [ "$(id -u)" = 0 ] &&
		sync && echo 3 2>/dev/null >/proc/sys/vm/drop_caches; then
		return
	fi
	python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"
}
cold_how() {
	if [ "${RL_GPU_DROP:-1}" = 1 ] && [ "$(id -u)" = 0 ] && [ -w /proc/sys/vm/drop_caches ]; then
		echo "page cache dropped before each run"
	else
		echo "not root or RL_GPU_DROP=0: the file evicted with fadvise(DONTNEED) before each run"
	fi
}

# timed LOG CMD...: one whole process (exec to exit); sets RC, SECS and RSS
# (its maximum resident set, bytes).
timed() {
	local log=$1 r
	shift
	r=$(python3 -c 'import resource, subprocess, sys, time
t = time.monotonic()
with open(sys.argv[1], "w") as out:
    rc = subprocess.call(sys.argv[3:], stdout=out, stderr=subprocess.STDOUT,
                         timeout=float(sys.argv[2]))
s = time.monotonic() - t
print(f"{rc} {s:.4f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}")' \
		"$logs/$log.log" "$STEP_TIMEOUT" "$@" 2>>"$logs/$log.log") || r="124 0 0"
	read -r RC SECS RSS <<<"$r"
}

py_st='import sys, torch, safetensors.torch as st
t = st.load_file(sys.argv[1], device="cuda:0"); torch.cuda.synchronize()'
py_rl='import sys, torch, ringload.torch as rt
t = rt.load_file(sys.argv[1], device="cuda:0"); torch.cuda.synchronize()'

# reader WHO FILE: sets ARGV, the command of reader WHO.
reader() {
	case $1 in
	ringload) ARGV=("$BUILD/ringload" load "$2" --device cuda:0 --staging-budget "$BUDGET"
		--quiet --json) ;;
	rl-torch) ARGV=(env PYTHONPATH="$PWD/python" RINGLOAD_LIB="$bdir/libringload.so.0"
		"$PY" -c "$py_rl" "$2") ;;
	st) ARGV=("$PY" -c "$py_st" "$2") ;;
	esac
}

# The readers of one medium, ROUNDS interleaved rounds; a failed run fails
# its reader's step.
bench_readers() { # medium file cold
	local m=$1 f=$2 cold=$3 r who bad readers=(ringload)
	local -A failed=()
	if [ "$TORCH_CUDA" = 1 ]; then
		readers+=(rl-torch)
		if "$PY" -c 'import safetensors.torch' 2>/dev/null; then
			readers+=(st)
		else
			note "$m: safetensors is not importable by $PY: no safetensors column"
		fi
	fi
	for r in $(seq 1 "$ROUNDS"); do
		for who in "${readers[@]}"; do
			[ "${failed[$who]:-}" = late ] && continue
			if late "bench-$m-$who"; then
				failed[$who]=late
				continue
			fi
			reader "$who" "$f"
			[ "$cold" = 1 ] && evict "$f"
			timed "bench-$m-$who-$r" "${ARGV[@]}"
			if [ "$RC" = 0 ]; then
				printf '%s\t%s\t%s\t%s\t%s\n' "$m" "$who" "$r" "$SECS" "$RSS" >>"$results"
			elif [ -z "${failed[$who]:-}" ]; then
				failed[$who]="round $r: $(why "bench-$m-$who-$r")"
			fi
		done
	done
	for who in "${readers[@]}"; do
		bad=${failed[$who]:-}
		if [ "$bad" = late ]; then continue # said by late()
		elif [ -n "$bad" ]; then verdict FAIL "bench-$m-$who" "$bad"
		else verdict pass "bench-$m-$who ($ROUNDS rounds)"; fi
	done
	[ "$TORCH_CUDA" = 1 ] || verdict skip "bench-$m-torch-readers" "$TORCH_WHY"
}

# fio's best over a small grid (bs 4M, 1 and 8 jobs, depth 16 and 64):
# whole processes, the same bytes; a result line "fio" per medium.
fio_run() { # log file direct depth jobs bytes-per-job (eng: the engine)
	timed "$1" fio --name=best --filename="$2" --rw=read --ioengine="$eng" --direct="$3" \
		--bs=4M --iodepth="$4" --numjobs="$5" --size="$6" --offset_increment="$6" \
		--group_reporting --output-format=terse
}
fio_best() { # medium file cold
	local m=$1 f=$2 cold=$3 bytes j qd per best="" direct=1 eng=io_uring
	command -v fio >/dev/null || { note "$m: fio is not installed: no fio column"; return; }
	bytes=$(stat -c %s "$f")
	[ "$m" = tmpfs ] && direct=0 # tmpfs has no O_DIRECT
	for j in 1 8; do for qd in 16 64; do
		if [ $(( $(date +%s) - t_begin )) -ge "${DEADLINE:-270}" ]; then
			note "$m: fio's grid cut short: out of time"
			break 2
		fi
		per=$(( bytes / j / 4194304 * 4194304 ))
		[ "$cold" = 1 ] && evict "$f"
		fio_run "fio-$m-$j-$qd" "$f" "$direct" "$qd" "$j" "$per"
		if [ "$RC" != 0 ] && [ "$eng" = io_uring ]; then # io_uring refused here
			eng=libaio
			[ "$cold" = 1 ] && evict "$f"
			fio_run "fio-$m-$j-$qd" "$f" "$direct" "$qd" "$j" "$per"
		fi
		[ "$RC" = 0 ] || continue
		best=$(awk -v s="$SECS" -v b="$best" -v n=$((per * j)) -v t="$bytes" \
			'BEGIN { x = s * t / n; print (b == "" || x < b) ? x : b }')
	done; done
	if [ -n "$best" ]; then
		printf '%s\tfio\t1\t%s\t0\n' "$m" "$best" >>"$results"
	elif [ -n "$(ls "$logs/fio-$m-"* 2>/dev/null)" ]; then
		note "$m: every fio run failed (logs/fio-$m-*.log): no fio column"
	fi
}

# Sets TMPFS_DIR to a tmpfs directory with room for SIZE: SHM, /dev/shm,
# /run/shm, /tmp, or (root) one mounted here.
find_tmpfs() { # bytes
	local d need=$(( $1 + (64 << 20) ))
	for d in ${SHM:-} /dev/shm /run/shm /tmp; do
		if [ -d "$d" ] && [ "$(stat -f -c %T "$d" 2>/dev/null)" = tmpfs ] &&
			[ "$(df --output=avail -B1 "$d" | tail -n 1)" -gt "$need" ]; then
			TMPFS_DIR=$d
			return 0
		fi
	done
	[ "$(id -u)" = 0 ] || return 1
	mkdir -p "$OUT/tmpfs" && mount -t tmpfs -o size="$need" tmpfs "$OUT/tmpfs" || return 1
	shm_mnt=$OUT/tmpfs TMPFS_DIR=$OUT/tmpfs
}

check_bench() {
	local f=$OUT/ckpt-$SIZE.safetensors bytes
	run bench-fixture "$BUILD/mkckpt" "$f" --size "$SIZE" --seed 1
	[ "$RC" = 0 ] || { verdict FAIL bench-fixture "$(why bench-fixture)"; return; }
	bytes=$(stat -c %s "$f")
	bench_bytes=$bytes
	note "disk: $(df --output=source,fstype "$f" | tail -n 1 | tr -s ' '), $(cold_how)"
	fio_best disk "$f" 1
	bench_readers disk "$f" 1
	if late bench-tmpfs; then
		return
	elif find_tmpfs "$bytes"; then
		shmdir=$(mktemp -d "$TMPFS_DIR/rl-gpu-check.XXXXXX") && cp "$f" "$shmdir/" &&
			rm -f "$f" && f=$shmdir/$(basename "$f")
		note "tmpfs: $shmdir"
		fio_best tmpfs "$f" 0
		bench_readers tmpfs "$f" 0
	else
		verdict skip bench-tmpfs "no tmpfs with $bytes bytes free (SHM=DIR names one)"
	fi
}

# The table (GB/s: median over rounds; fio: its best; peak host memory: the
# largest maximum RSS of its runs).
table() {
	python3 - "$results" "$bench_bytes" <<'PY'
import statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    m, who, r, secs, rss = line.split("\t")
    runs[m, who].append((float(secs), int(rss)))
nbytes = int(sys.argv[2])
print("| medium | reader | GB/s (median) | x fio best | peak host MiB | runs |")
print("|---|---|---|---|---|---|")
for m in ("disk", "tmpfs"):
    fio = runs.get((m, "fio"))
    best = nbytes / fio[0][0] / 1e9 if fio else None
    for who in ("fio", "ringload", "rl-torch", "st"):
        if (m, who) not in runs:
            continue
        v = runs[m, who]
        rate = nbytes / statistics.median(s for s, _ in v) / 1e9
        peak = "-" if who == "fio" else f"{max(p for _, p in v) / 2**20:.0f}"
        ratio = f"{rate / best:.2f}" if best else "-"
        print(f"| {m} | {who} | {rate:.2f} | {ratio} | {peak} | {len(v)} |")
PY
}

echo "# $me --quick: $(uname -n), $(nproc) cores, $(date -u +%FT%TZ), driver ${RL_LIBCUDA:-libcuda.so.1}"
if command -v nvidia-smi >/dev/null; then
	note "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1)"
fi
if check_build; then
	probe_torch
	check_cli
	check_torch
	check_bench
	if [ -s "$results" ] && [ "$bench_bytes" -gt 0 ]; then
		echo
		echo "$SIZE checkpoint ($bench_bytes bytes) to cuda:0, $ROUNDS rounds, whole processes:"
		table | tee "$OUT/table.md"
		printf -- '- %s\n' ${notes[@]+"${notes[@]}"} >>"$OUT/table.md"
		echo
	fi
fi
echo "# $(( $(date +%s) - t_begin ))s; logs in $logs"
echo "gpu check: $npass passed, $nfail failed, $nskip skipped"
[ "$nfail" = 0 ] && [ "$nskip" = 0 ]
