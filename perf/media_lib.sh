# media_lib.sh - what perf/load_media.sh and perf/load_grid.sh share:
# checks, the checkpoint, dropping the page cache, priming fresh memory,
# timing a process (wall and CPU), and setting up each medium (disk, loop
# device over tmpfs with --direct-io=on, tmpfs) and tearing it down.
# Sourced after setting me (the script's name) and kind (media, grid).

BUILD=${BUILD:-build}
OUT=${OUT:-bench-out}
ROUNDS=${ROUNDS:-3}
MEDIA=${MEDIA:-"disk loop tmpfs"}
DIR=${RL_BENCH_DIR:-/var/tmp/rlmedia}
SHM=${SHM:-/dev/shm}
PRIME=${PRIME:-1}
cores=$(nproc)
# 1 2 4 .. up to n, and n
pow2s() { local n=1 s=""; while [ "$n" -lt "$1" ]; do s="$s $n"; n=$((n * 2)); done; echo "$s $1"; }
stamp=$(date -u +%Y%m%d-%H%M%S)
raw=$OUT/raw/$kind-$stamp

die() { echo "$me: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (drop_caches, losetup, mount)"
for b in ringload mkckpt perf/bench_fill; do
	[ -x "$BUILD/$b" ] || die "$BUILD/$b missing: make first"
done
command -v fio >/dev/null || die "fio not installed (make deps)"
[ -x /usr/bin/time ] || die "/usr/bin/time missing (apt-get install time)"

if [ -z "${SIZE:-}" ]; then
	avail_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
	SIZE=$(( avail_kb / 3 / 1024 ))M
	[ $(( avail_kb / 3 / 1024 )) -gt 16384 ] && SIZE=16G
fi
mkdir -p "$raw" "$DIR"
t_start=$(date +%s)

src=$DIR/ckpt-$SIZE.safetensors
if [ ! -e "$src" ]; then
	echo "generating $src ($SIZE)" >&2
	"$BUILD/mkckpt" "$src" --size "$SIZE" --files 1 --seed 1 >/dev/null
fi
bytes=$(stat -c %s "$src")

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
now() { date +%s.%N; }
prime() { [ "$PRIME" = 1 ] && "$BUILD/perf/bench_fill" "$bytes" >/dev/null || true; }

# One timed process: wall time around it, CPU (user + sys) from time(1).
# Sets SECS and CPU.
timed() {
	local t0 t1 tf=$raw/time.out
	t0=$(now)
	/usr/bin/time -f '%U %S' -o "$tf" "$@" >"$raw/last.out" 2>"$raw/last.err" ||
		{ cat "$raw/last.err" >&2; die "failed: $*"; }
	t1=$(now)
	SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')
	CPU=$(awk '{ printf "%.3f", $1 + $2 }' "$tf")
}

mnt= loopdev= img= shmdir=
cleanup() {
	# a reader's io_uring can hold its files for a moment after it exits
	# (the kernel tears rings down in a work item): retry, then say so
	if [ -n "$mnt" ]; then
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			umount "$mnt" 2>/dev/null && break
			sleep 0.2
		done
		mountpoint -q "$mnt" && echo "$me: warning: $mnt still mounted" >&2
		rmdir "$mnt" 2>/dev/null || true
	fi
	[ -n "$loopdev" ] && { losetup -d "$loopdev" 2>/dev/null || true; }
	[ -n "$img" ] && rm -f "$img"
	[ -n "$shmdir" ] && rm -rf "$shmdir"
	return 0
}
trap cleanup EXIT

setup_medium() { # medium -> sets FILE, COLD
	case $1 in
	disk) FILE=$src; COLD=1 ;;
	tmpfs)
		shmdir=$(mktemp -d "$SHM/rlmedia.XXXXXX")
		cp "$src" "$shmdir/"
		FILE=$shmdir/$(basename "$src"); COLD=0 ;;
	loop)
		command -v losetup >/dev/null && command -v mkfs.ext4 >/dev/null ||
			{ echo "skipping loop: losetup or mkfs.ext4 missing" >&2; return 1; }
		img=$SHM/rlmedia-loop-$$.img
		truncate -s $(( (bytes + bytes / 10 + (256 << 20)) >> 20 << 20 )) "$img"
		loopdev=$(losetup -f --show --direct-io=on "$img") ||
			{ echo "skipping loop: losetup failed" >&2; return 1; }
		mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$loopdev"
		mnt=$(mktemp -d /tmp/rlmedia-mnt.XXXXXX)
		mount -o noatime "$loopdev" "$mnt"
		cp "$src" "$mnt/"
		FILE=$mnt/$(basename "$src"); COLD=1 ;;
	*) die "unknown medium $1" ;;
	esac
}

teardown_medium() {
	cleanup
	mnt= loopdev= img= shmdir=
}

