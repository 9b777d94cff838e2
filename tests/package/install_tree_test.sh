#!/usr/bin/env bash
# `cmake --install` into a fresh prefix (issue 51): it installs rapide (and rapide-mpi when
# built) with the documents, and leaves the build tree as it was: no file in it is created,
# changed or removed (CMake's install manifest goes through the links to /dev/null that
# cmake/packaging.cmake makes). Testing/ is left out of the comparison: it is ctest's own log.
# Usage: install_tree_test.sh BUILD_DIR CMAKE_COMMAND
set -euo pipefail
build=$1
cmake=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

# Every path under the build tree with its type, size and modification time.
snapshot() {
  (cd "$build" && find . -path ./Testing -prune -o -printf '%p %y %s %T@\n' | sort)
}
snapshot >"$out/before"
"$cmake" --install "$build" --prefix "$out/prefix" >"$out/install.log"
snapshot >"$out/after"
if ! diff "$out/before" "$out/after" >"$out/diff"; then
  cat "$out/install.log"
  cat "$out/diff"
  fail "cmake --install changed the build tree"
fi

for f in bin/rapide share/doc/rapide/README.md share/doc/rapide/LICENSE \
         share/doc/rapide/rapide-help.txt; do
  [ -f "$out/prefix/$f" ] || fail "$f was not installed"
done
if [ -x "$build/apps/rapide/rapide-mpi" ]; then
  [ -x "$out/prefix/bin/rapide-mpi" ] || fail "bin/rapide-mpi was not installed"
fi
"$out/prefix/bin/rapide" --version | grep -q '^rapide [0-9]' || fail "the installed rapide does not run"
echo "PASS: cmake --install installed $(cd "$out/prefix" && find . -type f | wc -l) files and" \
  "left the build tree as it was"
