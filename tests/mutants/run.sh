#!/usr/bin/env bash
# run.sh [LIST] - mutation testing: does the test suite notice a bug?
#
# Applies each mutant of LIST (default tests/mutants/mutants.txt, format
# described there) alone to a scratch copy of the tree, rebuilds, runs the
# test programs the mutant names, and reports it KILLED (a test failed) or
# SURVIVED (every test passed: a missing test), then the kill rate over the
# non-equivalent mutants. Exits 1 when the rate is under RL_MUTANT_TARGET
# percent (default 90) or the list has an error (a search text that is not
# in its file exactly once).
#
#   RL_MUTANT_DIR   scratch directory (default: a fresh one under /tmp, removed)
#   RL_MUTANT_ONLY  run only the mutants whose line contains this text
#   RL_MUTANT_TIMEOUT  seconds per test program (default 300: a mutant may hang)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
list=$(realpath "${1:-$root/tests/mutants/mutants.txt}")
target=${RL_MUTANT_TARGET:-90}
timeout_s=${RL_MUTANT_TIMEOUT:-300}
only=${RL_MUTANT_ONLY:-}
testdata=${RL_TESTDATA:-$(realpath -m "$root/../shared/testdata")}
scratch=${RL_MUTANT_DIR:-}
if [ -z "$scratch" ]; then
	scratch=$(mktemp -d /tmp/rl-mutants.XXXXXX)
	trap 'rm -rf "$scratch"' EXIT
fi
mkdir -p "$scratch/tree"
tree=$scratch/tree

# The tree as committed plus untracked files git does not ignore.
(cd "$root" && git ls-files -co --exclude-standard -z) |
	(cd "$root" && tar cf - --null -T -) | (cd "$tree" && tar xf -)

# The tests read the fixtures make writes in the scratch tree (build/testdata)
# and, where present, the shared ones (RL_TESTDATA).
# Parses the list into records: index, file, -, -, tests, equivalence
# reason (unit-separator separated; mutant.py applies a mutant by index).
records=$(python3 "$root/tests/mutants/mutant.py" parse "$list") || exit 1
bins=$(printf '%s\n' "$records" | cut -d$'\x1f' -f5 | tr ' ' '\n' | sort -u | grep . | grep -v '^py:' |
	sed 's|^|build/tests/|')
echo "  MUTANT  building the scratch tree ($tree)"
make -C "$tree" -j2 all fixtures $bins >"$scratch/build.log" 2>&1 ||
	{ tail -n 30 "$scratch/build.log"; echo "the unmutated tree does not build"; exit 1; }

# A test program: build/tests/NAME, or py:FILE, the Python tests of
# python/tests/FILE (python-tests.sh, against the tree's library).
test_cmd() {
	case $1 in
	py:*) echo "python/tests/python-tests.sh python/tests/${1#py:}" ;;
	*) echo "build/tests/$1" ;;
	esac
}

killed=0 survived=0 equiv=0 errors=0 stillborn=0
survivors=()
while IFS=$'\x1f' read -r idx file search repl tests reason; do
	line=$(python3 "$root/tests/mutants/mutant.py" show "$list" "$idx")
	if [ -n "$only" ] && ! grep -qF -- "$only" <<<"$line"; then
		continue
	fi
	if [ -n "$reason" ]; then
		equiv=$((equiv + 1))
		echo "EQUIV    $line  ($reason)"
		continue
	fi
	cp "$tree/$file" "$scratch/orig" 2>/dev/null || { echo "ERROR    $line: no file $file"; errors=$((errors + 1)); continue; }
	if ! python3 "$root/tests/mutants/mutant.py" apply "$list" "$idx" "$tree/$file"; then
		errors=$((errors + 1))
		continue
	fi
	verdict=SURVIVED by=
	# The libraries and the CLI (tests run it) with the mutant, and the tests;
	# an mpi/ mutant lives in libringload_mpi, which the rank program links,
	# a tools/ one in ringload-mpi.so too (`ringload load --mpi` loads it).
	mpi_bins=
	case $file in
	mpi/*) mpi_bins="build/libringload_mpi.so build/tests/mpi_driver" ;;
	tools/*) [ -n "${MPICC:-$(command -v mpicc)}" ] && mpi_bins="build/ringload-mpi.so" ;;
	esac
	if ! make -C "$tree" -j2 build/libringload.a build/libringload.so build/ringload $mpi_bins \
		$(printf 'build/tests/%s ' $tests | sed 's|build/tests/py:[^ ]* ||g') \
		>"$scratch/build.log" 2>&1; then
		verdict=STILLBORN
	else
		for t in $tests; do
			# Redirected as a whole, so that a crash's notice goes to the log;
			# stdin is not the list's (mpirun reads it: the run ended there).
			if ! (cd "$tree" && RL_TESTDATA="$testdata" RL_BUILD=build RL_SRCDIR="$tree" \
				timeout --foreground -k 5 "$timeout_s" $(test_cmd "$t")) \
				</dev/null >"$scratch/test.log" 2>&1; then
				verdict=KILLED by=" by $t"
				break
			fi
		done
	fi
	cp "$scratch/orig" "$tree/$file"
	touch "$tree/$file"
	case $verdict in
	KILLED) killed=$((killed + 1)) ;;
	STILLBORN) stillborn=$((stillborn + 1)) ;;
	SURVIVED) survived=$((survived + 1)); survivors+=("$line") ;;
	esac
	printf '%-8s %s%s\n' "$verdict" "$line" "$by"
done <<<"$records"

total=$((killed + survived))
rate=$([ "$total" -gt 0 ] && echo $((100 * killed / total)) || echo 100)
echo "$killed killed, $survived survived, $equiv equivalent, $stillborn did not build, $errors list errors: kill rate $rate% of $total (target $target%)"
for s in "${survivors[@]}"; do
	echo "  survived: $s"
done
[ "$errors" -eq 0 ] && [ "$rate" -ge "$target" ]
