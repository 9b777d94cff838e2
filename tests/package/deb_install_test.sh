#!/usr/bin/env bash
# Builds the Debian packages with cpack, checks what each declares and holds, installs them
# with dpkg and runs the binaries from PATH (issues 20 and 51):
#   rapide       the one-process binary, stripped, with no MPI among its dependencies;
#   rapide-mpi   (when the build has RAPIDE_MPI) the MPI binary, stripped, depending on
#                rapide of the same version and on the Open MPI libraries.
# Needs root for dpkg -i: outside CI a non-root run is a skip (exit 77); with CI=true it
# fails. The packages are removed afterwards unless they were installed before.
# Usage: deb_install_test.sh BUILD_DIR
set -euo pipefail
build=$1
if [ "$(id -u)" -ne 0 ]; then
  if [ "${CI:-}" = "true" ]; then
    echo "FAIL: installing the .deb needs root (CI runs as root)"
    exit 1
  fi
  echo "SKIPPED package_deb_install: dpkg -i needs root (run as root, or in CI)"
  exit 77
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
# A copy of the build's CPack config writing into $out, so parallel tests and the build
# folder itself see no package files appear.
(cd "$build" && cpack -G DEB -B "$out" >"$out/cpack.log" 2>&1) || {
  cat "$out/cpack.log"
  exit 1
}
deb=$(ls "$out"/rapide_*.deb)
mpi_deb=$(ls "$out"/rapide-mpi_*.deb 2>/dev/null || true)
if grep -q '^RAPIDE_MPI:BOOL=ON' "$build/CMakeCache.txt"; then
  [ -n "$mpi_deb" ] || fail "the build has RAPIDE_MPI but cpack made no rapide-mpi package"
fi

# check_package DEB BINARY: the binary is in the package, stripped, and its size is printed
# beside the build tree's (unstripped) one.
check_package() {
  local deb=$1 binary=$2 tree=$out/$2
  grep -q " ./usr/bin/$binary\$" <<<"$(dpkg-deb -c "$deb")" || fail "/usr/bin/$binary is not in $deb"
  dpkg-deb -x "$deb" "$tree"
  if readelf -S --wide "$tree/usr/bin/$binary" | grep -q ' \.symtab '; then
    fail "/usr/bin/$binary in $(basename "$deb") is not stripped"
  fi
  echo "$binary: $(stat -c %s "$build/apps/rapide/$binary") bytes in the build tree," \
    "$(stat -c %s "$tree/usr/bin/$binary") bytes stripped in $(basename "$deb")"
}

echo "built $(basename "$deb") ${mpi_deb:+$(basename "$mpi_deb")}"
depends=$(dpkg-deb -f "$deb" Depends)
echo "rapide Depends: $depends"
for lib in libc6 libstdc++6 libspdlog libfmt libreadline; do
  case "$depends" in
    *"$lib"*) ;;
    *) fail "the package does not declare a dependency on $lib" ;;
  esac
done
case "$depends" in
  *mpi*) fail "the rapide package depends on MPI: $depends" ;;
esac
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/rapide ./usr/share/doc/rapide/README.md ./usr/share/doc/rapide/LICENSE \
         ./usr/share/doc/rapide/rapide-help.txt; do
  grep -q " $f\$" <<<"$contents" || fail "$f is not in the package"
done
grep -q " ./usr/bin/rapide-mpi\$" <<<"$contents" && fail "rapide-mpi is in the rapide package"
check_package "$deb" rapide
if ldd "$out/rapide/usr/bin/rapide" | grep -q 'libmpi'; then
  fail "the packaged rapide links libmpi"
fi

packages=(rapide)
if [ -n "$mpi_deb" ]; then
  packages+=(rapide-mpi)
  mpi_depends=$(dpkg-deb -f "$mpi_deb" Depends)
  echo "rapide-mpi Depends: $mpi_depends"
  version=$(dpkg-deb -f "$deb" Version)
  grep -q "rapide (= $version)" <<<"$mpi_depends" || fail "rapide-mpi does not depend on rapide"
  grep -q "libopenmpi" <<<"$mpi_depends" || fail "rapide-mpi does not depend on libopenmpi"
  check_package "$mpi_deb" rapide-mpi
fi

installed_before=()
for p in "${packages[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    installed_before+=("$p")
  fi
done
dpkg -i "$deb" $mpi_deb >/dev/null
path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
version=$(env PATH=$path rapide --version)
mpi_version=""
if [ -n "$mpi_deb" ]; then mpi_version=$(env PATH=$path rapide-mpi --version); fi
for ((i = ${#packages[@]} - 1; i >= 0; i--)); do  # rapide-mpi before the rapide it needs
  case " ${installed_before[*]} " in
    *" ${packages[i]} "*) ;;
    *) dpkg -r "${packages[i]}" >/dev/null ;;
  esac
done
echo "$version"
grep -q '^rapide [0-9]' <<<"$version" || fail "no version line"
grep -q '^commit [0-9a-f]' <<<"$version" || fail "no commit line"
grep -q '^kernels \(scalar\|avx2\|avx512\)' <<<"$version" || fail "no kernel ISA"
grep -q '^mpi none' <<<"$version" || fail "rapide --version does not say mpi none"
if [ -n "$mpi_deb" ]; then
  echo "$mpi_version"
  grep -q '^mpi ' <<<"$mpi_version" && ! grep -q '^mpi none' <<<"$mpi_version" ||
    fail "rapide-mpi --version does not name its MPI library"
fi
echo "PASS: the .deb packages install ${packages[*]} on PATH"
