#!/usr/bin/env bash
# install.sh - make install into the default prefix, /usr/local, then the
# README's C example built with its pkg-config line and run, the installed
# ringload command and Python package; make uninstall after. It runs in a
# mount namespace where /usr/local and /etc are overlays on temporary
# folders, so the machine's own are never written (ldconfig writes
# /etc/ld.so.cache); skipped where that is not allowed (root, unshare -m,
# overlayfs). Also: a DESTDIR or a prefix outside the loader's path runs no
# ldconfig. One line per check, then "N passed, N failed, N skipped".
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RL_BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
work=$(mktemp -d /tmp/ringload-install.XXXXXX)
trap 'rm -rf "$work"' EXIT
unset MAKEFLAGS MFLAGS MAKELEVEL LD_LIBRARY_PATH PKG_CONFIG_PATH PYTHONPATH RINGLOAD_LIB

# The part that runs inside the namespace: prints one line per check.
inside() {
	local t=$1 out
	for d in usr/local etc; do
		mkdir -p "$t/up/$d" "$t/work/$d"
		mount -t overlay overlay -o "lowerdir=/$d,upperdir=$t/up/$d,workdir=$t/work/$d" "/$d" || return
	done
	cd "$root" || return
	out=$(make --no-print-directory install BUILD="$build" 2>&1)
	case $out in *"LDCONFIG /usr/local/lib is in the loader's path"*)
		echo "ok   make install runs ldconfig for /usr/local/lib" ;;
	*) echo "FAIL make install ran no ldconfig for /usr/local/lib: $(echo "$out" | tail -n 5 | tr '\n' ' ')" ;;
	esac
	# The README's C program, with the README's build line, from elsewhere.
	awk '/^```c$/ { f = 1; next } f && /^```$/ { exit } f' README.md >"$t/load.c"
	grep -q 'cc load.c -o load $(pkg-config --cflags --libs ringload)' README.md ||
		echo "FAIL README.md has no pkg-config build line"
	"$build/mkckpt" "$t/r.safetensors" --size 6M >/dev/null
	cp tools/sample-sharding.json "$t/"
	out=$(cd "$t" && cc load.c -o load $(pkg-config --cflags --libs ringload) 2>&1 &&
		./load r.safetensors sample-sharding.json 2>&1)
	case $out in *": device 0, "*": device 1, "*)
		echo "ok   the README's C example runs after make install" ;;
	*) echo "FAIL the README's C example after make install: $(echo "$out" | tail -n 5 | tr '\n' ' ')" ;;
	esac
	out=$(cd "$t" && /usr/local/bin/ringload --version 2>&1 && /usr/bin/python3 -c \
		'import ringload; print(ringload.__file__, ringload.library_path())' 2>&1)
	case $out in "ringload "*"/usr/local/lib/python3"*"/ringload/__init__.py /usr/local/lib/libringload.so.0")
		echo "ok   the installed ringload command and Python package run" ;;
	*) echo "FAIL the installed ringload command and Python package: $out" | tr '\n' ' '; echo ;;
	esac
	make --no-print-directory uninstall BUILD="$build" >/dev/null 2>&1
	if ldconfig -p | grep -q 'libringload\.so\.0 '; then
		echo "FAIL make uninstall left libringload.so.0 in the loader's cache"
	else
		echo "ok   make uninstall drops it from the loader's cache"
	fi
}

if [ -n "${RL_SAN:-}" ]; then
	echo "skip make install into /usr/local: not in the $RL_SAN build (the plain make test runs it)"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
fi
if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
	echo "skip make install into /usr/local: needs root and a mount namespace (unshare -m)"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
fi
export -f inside
export root build
lines=$(unshare -m bash -c 'inside "$1"' inside "$work" 2>&1)
# Staged or outside the loader's path: no ldconfig (nor root needed for it).
for how in "DESTDIR=$work/stage" "PREFIX=$work/prefix"; do
	out=$(cd "$root" && make --no-print-directory install BUILD="$build" "$how" 2>&1)
	if [ $? -eq 0 ] && [[ $out != *LDCONFIG* ]]; then
		lines+=$'\n'"ok   make install $how runs no ldconfig"
	else
		lines+=$'\n'"FAIL make install $how: $(echo "$out" | tail -n 3 | tr '\n' ' ')"
	fi
done
echo "$lines"
pass=$(grep -c '^ok ' <<<"$lines") fail=$(grep -vc '^ok ' <<<"$lines")
echo "$pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
