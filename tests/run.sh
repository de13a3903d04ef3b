#!/usr/bin/env bash
# run.sh - runs test programs, prints their lines, and ends with the total.
# A program that dies without its summary line counts as one failure.
set -u
pass=0 fail=0 skip=0
timeout_s=${RL_TEST_TIMEOUT:-900}
for t in "$@"; do
	name=$(basename "$t")
	echo "# $name"
	out=$(mktemp)
	timeout --foreground "$timeout_s" "$t" >"$out" 2>&1
	rc=$?
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$out" | tail -n 1)
	grep -vE '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$out"
	rm -f "$out"
	if [ -z "$summary" ]; then
		echo "FAIL $name (exited $rc without a summary)"
		fail=$((fail + 1))
		continue
	fi
	read -r p _ f _ s _ <<<"$(echo "$summary" | tr -d ',')"
	pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + ${s:-0}))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL $name (exit status $rc)"
		fail=$((fail + 1))
	fi
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
