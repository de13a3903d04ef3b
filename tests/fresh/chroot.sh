#!/usr/bin/env bash
# chroot.sh - runs the README's `make test` on a fresh Debian 12, as a new user would.
#
#   usage: tests/fresh/chroot.sh [COMMIT] [LOG]      (as root)
#
#   COMMIT  what to test: a commit of any branch of the repository this script is in
#           (default HEAD); the clone is made from that repository
#   LOG     where the run's output goes (default /var/tmp/ringload-fresh/COMMIT.log); it ends
#           with make test's "N passed, N failed, N skipped", then "exit N, <date>"
#
# The root is an overlayfs, as in every container: a Debian 12 (bookworm) debootstrap,
# made once and cached read-only as the lower layer (RL_FRESH_BASE, default
# /var/tmp/ringload-fresh/lower; RL_FRESH_MIRROR picks the mirror), under a fresh upper
# layer for each run. /proc, /sys, /dev, /dev/shm and /dev/pts are bound in (without
# devpts, progress_on_a_terminal skips: no terminal); git, make, gcc, ca-certificates and
# sudo are in the debootstrap; the host's pip network settings (PIP_CERT and its bundle,
# /etc/pip.conf) are copied in, as a new machine on the same network has them; the commit
# is cloned into /root/project, a mode-700
# directory, and the README's `make test` runs there alone, as root, with a bare
# environment: `make deps` apt-gets the rest, anything Python needs from PyPI is fetched by
# the build itself (nothing of the host's venvs is visible). The shared fixtures are copied
# beside the clone (/root/shared/testdata) as the worktrees have them; RL_FRESH_TESTDATA=none
# leaves them out (the tests that need them then skip). Everything runs in a private mount
# namespace, so the mounts go away with the script; the run's upper layer is removed
# afterwards unless RL_FRESH_KEEP=1. Run it in the background, nice'd: about 20 minutes on 2
# busy cores for debootstrap (once), make deps and the tests (2026-11-26).
#
# Exit status: make's (0: every test passed, 2: one failed), 3 for a set-up error.
#
#   nohup nice tests/fresh/chroot.sh HEAD /var/tmp/fresh.log >/dev/null 2>&1 &
#   tail -n 3 /var/tmp/fresh.log
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
base=${RL_FRESH_BASE:-/var/tmp/ringload-fresh}
mirror=${RL_FRESH_MIRROR:-http://deb.debian.org/debian}
commit=$(git -C "$repo" rev-parse "${1:-HEAD}")
log=${2:-$base/${commit:0:12}.log}

die() { echo "chroot.sh: $*" >&2; exit 3; }
[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, mount, chroot)"

# Re-run in a private mount namespace: every mount below dies with it.
if [ -z "${RL_FRESH_NS:-}" ]; then
	mkdir -p "$(dirname "$log")"
	RL_FRESH_NS=1 exec unshare --mount --propagation private "$0" "$commit" "$log"
fi

lower=$base/lower
if [ ! -e "$lower/.complete" ]; then
	command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null
	rm -rf "$lower.tmp"
	echo "chroot.sh: debootstrap bookworm into $lower (once)"
	debootstrap --include=git,make,gcc,ca-certificates,sudo bookworm "$lower.tmp" "$mirror" \
		>"$base/debootstrap.log" 2>&1 || die "debootstrap failed: $base/debootstrap.log"
	touch "$lower.tmp/.complete"
	mv "$lower.tmp" "$lower"
fi

run=$(mktemp -d "$base/run-XXXXXX")
root=$run/root
cleanup() {
	umount -R "$root" 2>/dev/null || true
	[ "${RL_FRESH_KEEP:-0}" = 1 ] || rm -rf "$run"
}
trap cleanup EXIT
mkdir -p "$run/upper" "$run/work" "$root"
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$run/upper,workdir=$run/work" "$root"
for d in proc sys dev dev/shm dev/pts; do
	mkdir -p "$root/$d"
	mount --bind "/$d" "$root/$d"
done
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# The way out to the registries is the host's: where its pip trusts a
# certificate bundle of its own (PIP_CERT, /etc/pip.conf: a TLS proxy), a new
# machine of the same network has it too, so the chroot gets the same
# bundle and pip settings; the Debian packages themselves stay fresh.
pip_env=()
for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_DEFAULT_TIMEOUT; do
	[ -n "${!v:-}" ] && pip_env+=("$v=${!v}")
done
cert=${PIP_CERT:-$(sed -n 's/^cert *= *//p' /etc/pip.conf 2>/dev/null | head -n 1)}
if [ -n "$cert" ] && [ -f "$cert" ]; then
	# a path of its own: apt's ca-certificates triggers rewrite the usual one
	cp -L "$cert" "$root/etc/ssl/host-pip-cert.pem"
	pip_env+=("PIP_CERT=/etc/ssl/host-pip-cert.pem")
fi

git clone -q --no-hardlinks "$repo" "$root/root/project"
git -C "$root/root/project" checkout -q "$commit"
chmod 700 "$root/root/project"
td=${RL_FRESH_TESTDATA:-$repo/../shared/testdata}
if [ "$td" != none ] && [ -d "$td" ]; then
	mkdir -p "$root/root/shared"
	cp -r "$td" "$root/root/shared/testdata"
fi

echo "chroot.sh: $commit in $root (overlayfs), log $log, $(date -u)"
set +e
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	LANG=C.UTF-8 "${pip_env[@]}" /bin/bash -c 'cd /root/project && make test' >"$log" 2>&1
rc=$?
set -e
echo "exit $rc, $(date -u)" >>"$log"
tail -n 2 "$log"
exit "$rc"
