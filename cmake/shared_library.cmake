# libnightlora.so: the C API (include/nightlora.h) as a shared library for apps, language
# bindings (python/nightlora) and anything that cannot link C++ static libraries. It is linked
# from the static module libraries (compiled -fPIC with hidden visibility, see the top
# CMakeLists.txt); the version script keeps every symbol but the nl_* C functions local, so
# the C++ internals, libstdc++ and nlohmann_json never clash with an app's own copies.
#
# Installed (cmake --install BUILD [--prefix P]):
#   include/nightlora.h             the C API (stable: NL_API_VERSION)
#   include/nightlora/**            the C++ API headers (for the static libraries; less stable)
#   lib/libnightlora.so*            SONAME libnightlora.so.<NL_API_VERSION>
#   lib/pkgconfig/nightlora.pc      cc app.c $(pkg-config --cflags --libs nightlora)
#   lib/cmake/nightlora/            find_package(nightlora) -> nightlora::nightlora
#   lib/python3/dist-packages/nightlora   the Python bindings (ctypes over the C API)
# and, from the top CMakeLists.txt, bin/nightlora and bin/nightlora-serve (`nightlora serve`).
if(CMAKE_VERSION VERSION_LESS 3.24)
  message(FATAL_ERROR "libnightlora.so needs CMake 3.24 or newer (WHOLE_ARCHIVE); or configure with -DNL_SHARED=OFF")
endif()
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The C API's version (NL_API_VERSION in include/nightlora.h) is the SONAME's number.
file(STRINGS ${CMAKE_SOURCE_DIR}/include/nightlora.h _api_line REGEX "^#define NL_API_VERSION [0-9]+")
string(REGEX REPLACE "^#define NL_API_VERSION ([0-9]+).*" "\\1" NL_API_VERSION "${_api_line}")
if(NOT NL_API_VERSION)
  message(FATAL_ERROR "include/nightlora.h: no '#define NL_API_VERSION <n>' line")
endif()

# Every object of nl_capi goes in (nothing inside the library calls the nl_* functions, so a
# plain link would pull none of them); the modules' objects follow as the C API needs them.
file(WRITE ${CMAKE_BINARY_DIR}/nightlora_shared_empty.cpp "// libnightlora.so is nl_capi's objects\n")
add_library(nightlora_shared SHARED ${CMAKE_BINARY_DIR}/nightlora_shared_empty.cpp)
target_link_libraries(nightlora_shared PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,nl_capi>")
target_include_directories(nightlora_shared PUBLIC
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
set(_map ${CMAKE_SOURCE_DIR}/cmake/nightlora.map)
target_link_options(nightlora_shared PRIVATE -Wl,--version-script=${_map})
if(NOT NL_SANITIZE)  # (the sanitizers' runtime comes with the executable)
  target_link_options(nightlora_shared PRIVATE -Wl,--no-undefined)
endif()
set_target_properties(nightlora_shared PROPERTIES
  OUTPUT_NAME nightlora
  EXPORT_NAME nightlora
  SOVERSION ${NL_API_VERSION}
  VERSION ${NL_API_VERSION}.${PROJECT_VERSION_MINOR}.${PROJECT_VERSION_PATCH}
  LINK_DEPENDS ${_map})

install(TARGETS nightlora_shared EXPORT nightloraTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/nightlora.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/nightlora DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# pkg-config: plain `cc` builds against the installed tree.
# The file finds the prefix from where it lies (${pcfiledir}), so `--prefix P` at install
# time is honoured.
file(RELATIVE_PATH NL_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(${CMAKE_SOURCE_DIR}/cmake/nightlora.pc.in ${CMAKE_BINARY_DIR}/nightlora.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/nightlora.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# CMake package: find_package(nightlora) then target_link_libraries(app nightlora::nightlora).
set(_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/nightlora)
install(EXPORT nightloraTargets NAMESPACE nightlora:: FILE nightloraTargets.cmake DESTINATION ${_cmake_dir})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/nightloraConfig.cmake.in
  ${CMAKE_BINARY_DIR}/nightloraConfig.cmake INSTALL_DESTINATION ${_cmake_dir})
# Same major version = same C API (NL_API_VERSION); minor versions add to it.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/nightloraConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/nightloraConfig.cmake ${CMAKE_BINARY_DIR}/nightloraConfigVersion.cmake
        DESTINATION ${_cmake_dir})

# The Python bindings (pure Python, ctypes): they find the library beside them in the tree.
set(NL_PYTHON_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/python3/dist-packages
    CACHE STRING "Where `cmake --install` puts the nightlora Python package (relative to the prefix)")
install(DIRECTORY ${CMAKE_SOURCE_DIR}/python/nightlora DESTINATION ${NL_PYTHON_INSTALL_DIR}
        PATTERN "__pycache__" EXCLUDE)

# The installed tree as an app sees it: exported symbols, the C example with cc + pkg-config
# and with find_package, the Python bindings' tests (tests/capi/installed_test.sh).
if(NL_BUILD_TESTS AND NOT CMAKE_CROSSCOMPILING)
  enable_testing()
  foreach(_mode symbols c cmake python cli)
    add_test(NAME capi.installed.${_mode}
             COMMAND ${CMAKE_SOURCE_DIR}/tests/capi/installed_test.sh ${_mode} ${CMAKE_BINARY_DIR}
                     $<TARGET_FILE:nightlora_cli>)
    set_tests_properties(capi.installed.${_mode} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77)
  endforeach()
endif()
