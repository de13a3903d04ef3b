#!/usr/bin/env bash
# gpu_check_fake.sh - perf/gpu_check.sh --quick against the tests' fake CUDA
# driver, as one program of tests/run.sh (make test). Under RL_LIBCUDA the
# check skips the steps that need torch's own CUDA and so exits 1; this
# judges it: it passes when nothing failed, something passed, and every
# skip says "needs torch's CUDA". Then the same check with the fake failing
# a copy (FAKECUDA_FAIL_COPY_AT) must fail, naming the CLI steps.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${RL_BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
fake=$build/tests/fakecuda/libcuda.so.1
pass=0 fail=0
say() { # ok|FAIL name [output file]
	if [ "$1" = ok ]; then
		pass=$((pass + 1))
		echo "ok   $2"
	else
		fail=$((fail + 1))
		echo "FAIL $2"
		[ -n "${3:-}" ] && sed 's/^/    /' "$3"
	fi
}
if [ ! -e "$fake" ]; then
	echo "FAIL gpu_check: $fake missing (make $fake)"
	echo "0 passed, 1 failed, 0 skipped"
	exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
check() { # log, then VAR=VALUE... for the check
	local log=$1
	shift
	env BUILD="$build" OUT="$out/run" RL_LIBCUDA="$fake" RL_GPU_DROP=0 ROUNDS=1 \
		FAKECUDA_DELAY_US="${FAKECUDA_DELAY_US:-20}" "$@" \
		"$root/perf/gpu_check.sh" --quick >"$log" 2>&1
}

# 1. The whole check passes but for torch's steps.
check "$out/quick.log" SIZE=64M
rc=$?
sum=$(tail -n 1 "$out/quick.log")
read -r p f s <<<"$(sed -n 's/^gpu check: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p' <<<"$sum")"
others=$(grep '^skip ' "$out/quick.log" | grep -vc "needs torch's CUDA")
if [ "$rc" = 1 ] && [ "${f:-1}" = 0 ] && [ "${p:-0}" -ge 7 ] && [ "${s:-0}" -ge 1 ] &&
	[ "$others" = 0 ] && ! grep -q '^FAIL' "$out/quick.log"; then
	say ok "gpu_check --quick against the fake driver ($sum; only torch's CUDA skipped)"
else
	say FAIL "gpu_check --quick against the fake driver (exit $rc, $sum, $others other skips)" \
		"$out/quick.log"
fi

# 2. A copy the driver fails is a failed check.
check "$out/fault.log" SIZE=16M FAKECUDA_FAIL_COPY_AT=2
rc=$?
if [ "$rc" != 0 ] && grep -q '^FAIL cli-verify' "$out/fault.log" &&
	grep -q '^FAIL bench-disk-ringload' "$out/fault.log" &&
	grep -Eq '^gpu check: [0-9]+ passed, [1-9][0-9]* failed' "$out/fault.log"; then
	say ok "gpu_check --quick fails when the fake driver fails a copy"
else
	say FAIL "gpu_check --quick fails when the fake driver fails a copy (exit $rc)" "$out/fault.log"
fi
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" = 0 ]
