#!/usr/bin/env bash
# Installs every Debian 12 package rapide needs to build, test and benchmark.
# Idempotent: packages already present are skipped, so a second run is a no-op.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  clang libclang-rt-14-dev          # libFuzzer + sanitizers for the GGUF fuzz target
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libxxhash-dev libzstd-dev liblz4-dev libpcre2-dev
  libboost-dev                      # Asio/Beast (header-only) for the HTTP server
  libopenblas-dev liblapacke-dev    # Cholesky / products of rapide quantize --method gptq|awq
  libicu-dev                        # Unicode NFC in rapide advise --prompts
  libreadline-dev                   # line editing and history in `rapide chat`
  openmpi-bin libopenmpi-dev        # --tp: tensor parallelism over MPI (mpirun, MPI_Allreduce)
  dpkg-dev                          # dpkg-shlibdeps: the .deb's dependencies (cpack)
  python3 python3-jinja2            # chat-template oracle in tests
  python3-jsonschema                # structured-output oracle in tests
  curl
  chromium chromium-driver python3-selenium  # the dashboard's headless-browser tests
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Node.js and npm run the official openai npm client in the serve e2e tests. A machine may
# already have them from another source (e.g. NodeSource's nodejs, which bundles npm);
# installing Debian's npm on top of that would conflict, so only the missing commands count.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The dashboard embeds uPlot from npm at build time (pinned by package-lock.json); the build
# fails without it. npm ci only when the installed version is not the locked one.
dashboard="$(cd "$(dirname "$0")/.." && pwd)/web/dashboard"
want=$(node -p "require('$dashboard/package-lock.json').packages['node_modules/uplot'].version")
have=$(node -p "try { require('$dashboard/node_modules/uplot/package.json').version } catch { '' }")
if [ "$want" != "$have" ]; then
  echo "install-deps: npm ci in web/dashboard (uPlot $want)"
  (cd "$dashboard" && npm ci --no-audit --no-fund --loglevel=error)
fi
