# Helpers that turn a room folder into a library + tests, and the project-wide compile flags.
include_guard(GLOBAL)
include(${CMAKE_CURRENT_LIST_DIR}/test_costs.cmake)

find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  # The sloppiness lets ccache cache the translation units that use the tests' precompiled
  # header (nothing here reads __DATE__ or __TIME__).
  set(CMAKE_CXX_COMPILER_LAUNCHER env
    CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime "${CCACHE_PROGRAM}")
  set(CMAKE_C_COMPILER_LAUNCHER "${CCACHE_PROGRAM}")
endif()

add_compile_options(-Wall -Wextra -Wno-unused-parameter -fno-strict-aliasing)
if(FLASHSERVE_SANITIZE OR FLASHSERVE_TSAN OR FLASHSERVE_FUZZ)
  # Sanitizer and fuzzing builds: -O1 with line tables compiles about 3x faster than -O3 -g and
  # still gives every report its file and line.
  add_compile_options(-O1 -g1)
elseif(CMAKE_BUILD_TYPE MATCHES "Rel")
  add_compile_options(-O3)
endif()
if(FLASHSERVE_SANITIZE OR FLASHSERVE_FUZZ)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
if(FLASHSERVE_TSAN)
  if(FLASHSERVE_SANITIZE OR FLASHSERVE_FUZZ)
    message(FATAL_ERROR "FLASHSERVE_TSAN cannot be combined with AddressSanitizer builds")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()
if(FLASHSERVE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "FLASHSERVE_FUZZ needs clang (libFuzzer): CXX=clang++ CC=clang, or scripts/fuzz.sh")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)  # coverage for the fuzzers in every room they reach
  # clang 14 with libstdc++ 12: Boost.Asio does not detect the C++20 coroutines (its awaitable
  # and use_awaitable are then missing); they are there.
  add_compile_definitions(BOOST_ASIO_HAS_CO_AWAIT=1 BOOST_ASIO_HAS_STD_COROUTINE=1)
endif()

# flashserve_coroutine_sources(a.cc ...): files with C++20 coroutines. clang 14 cannot emit
# UBSan's checks in coroutine frames ("Cannot represent a difference across sections"), so in
# clang sanitizer builds they keep AddressSanitizer only. Call from the room's CMakeLists.txt.
function(flashserve_coroutine_sources)
  if((FLASHSERVE_SANITIZE OR FLASHSERVE_FUZZ) AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS -fno-sanitize=undefined)
  endif()
endfunction()

# Repository root and the read-only shared folder (golden fixtures); tests skip when absent.
set(FLASHSERVE_ROOT "${CMAKE_SOURCE_DIR}")
get_filename_component(FLASHSERVE_SHARED "${CMAKE_SOURCE_DIR}/../shared" ABSOLUTE)

# The unit tests' own translation units: googletest, nlohmann/json and fmt take about half of
# each one's compile time, so they are parsed once into a precompiled header every test reuses,
# and the test code (not the rooms it links) is built at -O1, which compiles about a quarter faster.
option(FLASHSERVE_TEST_PCH "Unit tests share one precompiled header of the common headers" ON)
set(FLASHSERVE_TEST_DEFINITIONS FLASHSERVE_ROOT="${FLASHSERVE_ROOT}" FLASHSERVE_SHARED="${FLASHSERVE_SHARED}")
function(flashserve_test_flags target)
  target_compile_definitions(${target} PRIVATE ${FLASHSERVE_TEST_DEFINITIONS})
  if(CMAKE_BUILD_TYPE MATCHES "Rel" AND NOT (FLASHSERVE_SANITIZE OR FLASHSERVE_TSAN OR FLASHSERVE_FUZZ))
    target_compile_options(${target} PRIVATE -O1)
  endif()
  # clang stamps a PCH with its inputs' times, which a fresh build folder rewrites: without this
  # ccache could never reuse the header or the tests built on it.
  target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:Clang>:SHELL:-Xclang -fno-pch-timestamp>)
endfunction()

# flashserve_test_target(name): a unit-test executable's flags and the shared header.
function(flashserve_test_target tname)
  flashserve_test_flags(${tname})
  if(NOT FLASHSERVE_TEST_PCH)
    return()
  endif()
  if(NOT TARGET fs_test_pch)
    add_library(fs_test_pch OBJECT "${CMAKE_SOURCE_DIR}/cmake/test_pch.cc")
    target_link_libraries(fs_test_pch PRIVATE GTest::gtest nlohmann_json::nlohmann_json fmt::fmt)
    flashserve_test_flags(fs_test_pch)
    target_precompile_headers(fs_test_pch PRIVATE <gtest/gtest.h> <nlohmann/json.hpp> <fmt/format.h>
      <algorithm> <atomic> <chrono> <cmath> <cstdint> <cstring> <functional> <map> <memory>
      <mutex> <optional> <random> <span> <string> <string_view> <thread> <vector>)
  endif()
  target_precompile_headers(${tname} REUSE_FROM fs_test_pch)
endfunction()

# flashserve_room(NAME room SOURCES a.cc ... DEPS other rooms/libs... [TEST_DEPS ...])
# Builds library fs_<room>; every <x>_test.cc in the folder becomes one gtest binary run by CTest
# (not those of a subfolder with its own CMakeLists.txt: that is another room).
function(flashserve_room)
  cmake_parse_arguments(R "" "NAME" "SOURCES;DEPS;TEST_DEPS" ${ARGN})
  add_library(fs_${R_NAME} ${R_SOURCES})
  target_include_directories(fs_${R_NAME} PUBLIC "${CMAKE_SOURCE_DIR}/src")
  target_link_libraries(fs_${R_NAME} PUBLIC ${R_DEPS})
  if(FLASHSERVE_TESTS)
    file(GLOB_RECURSE tests CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc")
    foreach(t ${tests})
      get_filename_component(tdir ${t} DIRECTORY)
      if(NOT tdir STREQUAL CMAKE_CURRENT_SOURCE_DIR AND EXISTS "${tdir}/CMakeLists.txt")
        continue()
      endif()
      get_filename_component(tname ${t} NAME_WE)
      add_executable(${tname} ${t})
      target_link_libraries(${tname} PRIVATE fs_${R_NAME} ${R_TEST_DEPS} GTest::gtest GTest::gtest_main)
      flashserve_test_target(${tname})
      add_test(NAME ${R_NAME}.${tname} COMMAND bash "${CMAKE_SOURCE_DIR}/cmake/run_gtest.sh" $<TARGET_FILE:${tname}>)
      set_tests_properties(${R_NAME}.${tname} PROPERTIES LABELS "${R_NAME}" SKIP_RETURN_CODE 77)
      flashserve_test_cost(${R_NAME}.${tname})
    endforeach()
  endif()
endfunction()
