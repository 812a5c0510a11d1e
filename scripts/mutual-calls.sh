#!/bin/sh
# SPDX-License-Identifier: MIT
# Which source files call each other? For every pair of ptwatch's object
# files A and B (the two libraries and the program, not tests or
# fixtures): A uses a symbol B defines and B one A defines. Prints each
# such pair with the symbols in each direction, and exits 1 if there is
# one (0 if none).
#
#   scripts/mutual-calls.sh [BUILD_DIR]      (default: build)
set -eu
build=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
objs=$(find "$build/libptwcore.a.p" "$build/libptwtracer.a.p" "$build/libptwkernel.a.p" "$build/libptwkconv.a.p" "$build/ptwatch.p" \
	-name '*.o' 2>/dev/null | sort)
[ -n "$objs" ] || { echo "mutual-calls: no object files under $build (build first)" >&2; exit 2; }
# name: src_dir_file.c.o -> src/dir/file.c (meson's naming)
for o in $objs; do
	n=$(basename "$o" .o)
	nm --defined-only -g "$o" | awk 'NF == 3 { print $3 }' | sort -u > "$tmp/$n.def"
	nm -u "$o" | awk '{ print $NF }' | sort -u > "$tmp/$n.und"
done
found=0
names=$(for o in $objs; do basename "$o" .o; done)
for a in $names; do
	for b in $names; do
		[ "$a" \< "$b" ] || continue
		ab=$(comm -12 "$tmp/$a.und" "$tmp/$b.def")
		[ -n "$ab" ] || continue
		ba=$(comm -12 "$tmp/$b.und" "$tmp/$a.def")
		[ -n "$ba" ] || continue
		found=1
		pa=$(echo "$a" | sed 's/\.c$//; s/_/\//; s/_/\//').c
		pb=$(echo "$b" | sed 's/\.c$//; s/_/\//; s/_/\//').c
		echo "$pa <-> $pb"
		echo "  $pa uses: $(echo $ab)"
		echo "  $pb uses: $(echo $ba)"
	done
done
[ "$found" = 0 ] && echo "mutual-calls: no two files call each other"
exit "$found"
