# SPDX-License-Identifier: Apache-2.0
# Cross-build for arm64 (DGX Spark's DGX OS, Grace, Graviton) on a Debian x86-64 machine with
# Debian's cross toolchain and multiarch arm64 libraries (scripts/arm64-lane.sh installs them):
#   cmake -S . -B build-arm64 --toolchain cmake/toolchain-aarch64-linux-gnu.cmake
# The arm64 libraries (GoogleTest, rdma-core's headers) live in the multiarch folders
# /usr/lib/aarch64-linux-gnu and /usr/include, the C library in the same place (libc6:arm64), so
# no sysroot is needed: CMake searches lib/aarch64-linux-gnu for this CMAKE_LIBRARY_ARCHITECTURE.
# Tests run under qemu-user: CMAKE_CROSSCOMPILING_EMULATOR for ctest and gtest discovery, and
# the kernel's binfmt_misc entry for the processes the tests start themselves (conformance peers).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Programs (python3, gzip) are the build machine's; libraries and headers the target's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
find_program(MESH_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(MESH_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${MESH_QEMU_AARCH64})
endif()
# pkg-config (FindOpenSSL asks it first) must describe the arm64 libraries, not the build
# machine's: without this, libcrypto resolved to /usr/lib/x86_64-linux-gnu and the link failed.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
