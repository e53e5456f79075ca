# Cross-compiling nightlora for arm64 (phones) with Debian's g++-aarch64-linux-gnu.
# Used by scripts/arm64.sh, which builds the kernel-level tests into build-arm64/ and runs
# them under qemu-aarch64 (Debian's qemu-user). See docs/ARCHITECTURE.md, "arm64".
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(NL_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER   ${NL_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${NL_CROSS_TRIPLE}-g++)

# armv8-a: the baseline every arm64 phone core runs (Cortex-A53 included). The sdot kernels
# are compiled for armv8.2-a+dotprod by a target pragma in their own file
# (src/engine/kernels_int8_neon_dotprod.cpp) and chosen at run time, as the AVX2 ones are on
# x86-64. scripts/arm64.sh runs the tests under qemu's `-cpu max` (dotprod) and
# `-cpu cortex-a53` (ARMv8.0, no dotprod).
set(CMAKE_C_FLAGS_INIT   "-march=armv8-a")
set(CMAKE_CXX_FLAGS_INIT "-march=armv8-a")
# Static executables: qemu then needs no aarch64 shared libraries at run time (the cross
# libc lives in /usr/aarch64-linux-gnu, PCRE2 in the multiarch /usr/lib/aarch64-linux-gnu).
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
# The nightlora executable starts at cli/static_start.cpp: static glibc makes system calls at
# start-up that Android's app sandbox (Termux) answers with SIGSYS; it turns them into ENOSYS.
set(NL_STATIC_START ON)

# Libraries come from the cross sysroot and Debian's multiarch folder; programs (and
# header-only CMake packages such as nlohmann_json and CLI11) from the build machine.
set(CMAKE_FIND_ROOT_PATH /usr/${NL_CROSS_TRIPLE})
set(CMAKE_LIBRARY_ARCHITECTURE ${NL_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config (PCRE2) must see only the aarch64 .pc files from libpcre2-dev:arm64.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${NL_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# Test programs (and gtest's test discovery) run through qemu with every optional
# instruction enabled, so dotprod code paths execute (scripts/arm64.sh adds cortex-a53 runs).
find_program(NL_QEMU_AARCH64 qemu-aarch64)
if(NL_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${NL_QEMU_AARCH64} -cpu max -L /usr/${NL_CROSS_TRIPLE})
endif()
