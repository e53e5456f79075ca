#!/usr/bin/env bash
# Installs everything nightlora needs on a fresh Debian 12 machine (run as root, or with sudo).
# Versions are pinned to what the project was tested with; when Debian has moved a pinned
# version on (a point release), the current version of the same package is taken instead.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  "cmake=3.25.1-1"
  "ninja-build=1.11.1-2~deb12u1"
  "g++=4:12.2.0-3"
  "libgtest-dev=1.12.1-0.2"
  "libgmock-dev=1.12.1-0.2"
  "libbenchmark-dev=1.7.1-1"
  "nlohmann-json3-dev=3.11.2-2"
  "libcli11-dev=2.1.2+ds-1"
  # `train`/`nightly --config FILE` (cli/config_file.cpp): TOML, header-only (the static arm64 build links nothing more).
  "libtoml11-dev=3.7.1-3"
  "libpcre2-dev=10.42-1+deb12u2"
  "python3-torch=1.13.1+dfsg-4"
  "python3-numpy=1:1.24.2-1+deb12u1"
  "libopenblas0-openmp=0.3.21+ds-4"
  "g++-aarch64-linux-gnu=4:12.2.0-3"
  "qemu-user=1:7.2+dfsg-7+deb12u18+b3"
  # scripts/build-arm64-static.sh checks with file(1) that the phone binary is static.
  "file=1:5.44-3"
  # arm64 cross tests (scripts/arm64.sh): GoogleTest's sources, built there for aarch64,
  # and PCRE2 for aarch64 through Debian multiarch (the tokenizer needs it).
  "googletest=1.12.1-0.2"
  "libpcre2-dev:arm64=10.42-1+deb12u2"
  "nodejs"
  "npm"
  # Vulkan backend of the frozen engine: headers + loader, the GLSL -> SPIR-V compiler (build
  # time), and Mesa's software Vulkan driver (lavapipe), the device its tests run on in CI.
  "libvulkan-dev=1.3.239.0-1"
  "glslc=2023.2-1"
  "mesa-vulkan-drivers=22.3.6-1+deb12u2"
  # libFuzzer targets (fuzz/, scripts/fuzz.sh): clang with its sanitizer and fuzzer runtimes.
  "clang-14=1:14.0.6-12"
  "libclang-rt-14-dev=1:14.0.6-12"
  # `nightlora serve`: HTTP server library (llama.cpp's server uses the same one).
  "libcpp-httplib-dev=0.11.4+ds-1+deb12u1"
  # Headless browser for the report test (tests/report): renders `nightlora report` pages.
  "chromium=156.0.8078.108-1~deb12u1"
  # Python bindings' tests (python/tests, ctest capi.installed.python) with Debian's pytest.
  "python3-pytest=7.2.1-2"
  # pkg-config: CMake finds PCRE2 and cpp-httplib with it; the C example builds with it.
  "pkgconf=1.8.1-1"
)

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

missing=()
for spec in "${APT_PACKAGES[@]}"; do
  name=${spec%%=*}
  want=${spec#*=}; [ "$want" = "$spec" ] && want=""
  have=$(dpkg-query -W -f='${Status} ${Version}' "$name" 2>/dev/null || true)
  case "$have" in
    "install ok installed"*) ;;          # already there (any version): keep it
    *) missing+=("$spec") ;;
  esac
done

# node and npm may come from elsewhere than Debian (the image ships them): skip if present.
command -v node >/dev/null && command -v npm >/dev/null && \
  missing=($(printf '%s\n' "${missing[@]}" | grep -vE '^(nodejs|npm)$' || true))

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  # Packages for another architecture (name:arm64) need it enabled in dpkg first.
  for spec in "${missing[@]}"; do
    arch=${spec%%=*}; arch=${arch#*:}
    if [ "$arch" != "${spec%%=*}" ] && ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
      $SUDO dpkg --add-architecture "$arch"
    fi
  done
  $SUDO apt-get update -qq
  if ! $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
    echo "setup: pinned versions not available, installing the current Debian 12 versions" >&2
    $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]%%=*}"
  fi
fi

# npm packages used only by the tests as independent oracles (versions pinned in package-lock.json),
# among them Hugging Face's Rust tokenizers (npm `tokenizers`, its prebuilt linux-x64 binding
# inside the package) and node-llama-cpp (real llama.cpp, as the prebuilt CPU binaries of
# @node-llama-cpp/linux-x64, a direct dependency). --omit=optional leaves out its other
# prebuilt variants (CUDA, Vulkan, arm: ~650 MB). --ignore-scripts: its postinstall step would
# build or download llama.cpp; the tests load only the prebuilt binary (tools/js/llama_greedy.mjs).
# Also run when an older install lacks a package added since.
if [ -f tools/js/package.json ] && { [ ! -d tools/js/node_modules ] || [ ! -d tools/js/node_modules/@node-llama-cpp/linux-x64 ] ||
                                    [ ! -d tools/js/node_modules/tokenizers ]; }; then
  (cd tools/js && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
# The official openai npm client (pinned in tools/js-serve/package-lock.json), which
# tests/serve uses to drive `nightlora serve` as an app would. No install scripts run.
if [ -f tools/js-serve/package.json ] && [ ! -d tools/js-serve/node_modules/openai ]; then
  (cd tools/js-serve && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi
echo "setup: done"
