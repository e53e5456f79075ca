# Cross-compiling nightlora for arm64 (phones) with Debian's g++-aarch64-linux-gnu.
# Used by scripts/arm64.sh, which builds the kernel-level tests into build-arm64/ and runs
# them under qemu-aarch64 (Debian's qemu-user). See docs/ARCHITECTURE.md, "arm64".
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(NL_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER   ${NL_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${NL_CROSS_TRIPLE}-g++)

# armv8.2-a+dotprod: the baseline of current phone cores, and what the NEON kernels need
# for `sdot`. Binaries built with it run under `qemu-aarch64 -cpu max` (which has dotprod).
set(CMAKE_C_FLAGS_INIT   "-march=armv8.2-a+dotprod")
set(CMAKE_CXX_FLAGS_INIT "-march=armv8.2-a+dotprod")
# Static executables: qemu then needs no aarch64 shared libraries at run time (the cross
# libc lives in /usr/aarch64-linux-gnu, PCRE2 in the multiarch /usr/lib/aarch64-linux-gnu).
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

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
# instruction enabled, so dotprod code paths execute.
find_program(NL_QEMU_AARCH64 qemu-aarch64)
if(NL_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${NL_QEMU_AARCH64} -cpu max -L /usr/${NL_CROSS_TRIPLE})
endif()
