# The one CMake helper every folder uses, so each CMakeLists.txt reads alike:
#
#   primcache_library(NAME cache SRCS src/cache.cpp DEPS primcache::base)
#   primcache_test(NAME cache_test SRCS a_test.cpp DEPS primcache::cache
#                  [LABELS concurrency] [KERNELS] [TIMEOUT seconds])
#   primcache_benchmark(NAME bench_cache SRCS bench_cache.cpp DEPS primcache::cache)
#
# DEPS are public dependencies (aliases only, one per line by convention);
# PRIVATE_DEPS stay out of the exported interface.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

set_property(GLOBAL PROPERTY PRIMCACHE_COMPONENTS "")

function(primcache_library)
  cmake_parse_arguments(PL "" "NAME" "SRCS;DEPS;PRIVATE_DEPS;PACKAGE_DEPS" ${ARGN})
  set(target primcache_${PL_NAME})
  add_library(${target} ${PL_SRCS})
  add_library(primcache::${PL_NAME} ALIAS ${target})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME primcache_${PL_NAME}
    EXPORT_NAME ${PL_NAME}
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}
    # Installed libraries find their sibling libraries (a program's RUNPATH
    # covers only its direct dependencies).
    INSTALL_RPATH "$ORIGIN")
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${target} PUBLIC cxx_std_20)
  # NODELETE: dlclose never unmaps a primcache library. Each holds
  # process-wide state that other libraries and the program point into (the
  # runtime's registry holds a backend's factories, the primitive cache its
  # impls, control every library's callbacks; the CPU backend runs JIT code
  # and a background compiler from its own pages), and none of it can be
  # taken back safely while another library still holds it.
  if(BUILD_SHARED_LIBS)
    target_link_options(${target} PRIVATE "LINKER:-z,nodelete")
  endif()
  if(PL_DEPS)
    target_link_libraries(${target} PUBLIC ${PL_DEPS})
  endif()
  if(PL_PRIVATE_DEPS)
    target_link_libraries(${target} PRIVATE ${PL_PRIVATE_DEPS})
  endif()
  install(TARGETS ${target} EXPORT primcache-${PL_NAME}-targets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT primcache-${PL_NAME}-targets
    NAMESPACE primcache::
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/primcache)
  # Which other components (and find_dependency packages) this one needs,
  # for the package config to load them first.
  set(component_deps "")
  foreach(dep IN LISTS PL_DEPS PL_PRIVATE_DEPS)
    if(dep MATCHES "^primcache::(.+)$")
      list(APPEND component_deps ${CMAKE_MATCH_1})
    endif()
  endforeach()
  set_property(GLOBAL APPEND PROPERTY PRIMCACHE_COMPONENTS ${PL_NAME})
  set_property(GLOBAL PROPERTY PRIMCACHE_COMPONENT_DEPS_${PL_NAME} "${component_deps}")
  set_property(GLOBAL PROPERTY PRIMCACHE_PACKAGE_DEPS_${PL_NAME} "${PL_PACKAGE_DEPS}")
endfunction()

# Every test case gets a CTest timeout (TIMEOUT seconds, default 120): a
# regression that hangs (a lost wake-up, a deadlock) fails instead of eating
# CI's budget. Sanitizer builds get three times as long.
#
# KERNELS marks a binary whose subject is generated code (JIT objects, the
# generic kernels' objects, against references and each other): the
# sanitizers instrument none of it, so the sanitizer builds neither build nor
# run it. The host paths it reaches are the ones the other binaries test
# (creation, the config source, the reference implementations).
function(primcache_test)
  cmake_parse_arguments(PT "KERNELS" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(PT_KERNELS AND PRIMCACHE_SANITIZE)
    return()
  endif()
  add_executable(${PT_NAME} ${PT_SRCS})
  target_link_libraries(${PT_NAME} PRIVATE ${PT_DEPS} Catch2::Catch2WithMain)
  primcache_test_sources(${PT_NAME})
  set(labels ${PT_LABELS})
  if(PT_NAME MATCHES "_concurrency$")
    list(APPEND labels concurrency)
    set_property(GLOBAL APPEND PROPERTY PRIMCACHE_CONCURRENCY_TESTS ${PT_NAME})
  endif()
  primcache_test_timeout(timeout ${PT_TIMEOUT})
  set(properties TIMEOUT ${timeout})
  if(labels)
    list(APPEND properties LABELS "${labels}")
  endif()
  # A case tagged [kernel_sweep] runs one host path over many generated
  # kernels (configurations, shapes, edges), code that no sanitizer
  # instruments (JIT objects, PoCL's builds): it runs in unsanitized builds,
  # where it checks the kernels, and not under the sanitizers, where the
  # quicker cases take the same host paths (several minutes of CI's asan job).
  set(spec "")
  if(PRIMCACHE_SANITIZE)
    # ~[.]: Catch2 2 lists hidden cases for any spec that names none.
    set(spec TEST_SPEC "~[kernel_sweep]~[.]")
  endif()
  catch_discover_tests(${PT_NAME} TEST_PREFIX "${PT_NAME}:" ${spec} PROPERTIES ${properties})
endfunction()

# How a test binary's own sources compile (primcache_test calls it; a test
# binary made with add_executable calls it too):
# - without UBSan's checks, which double their compile time (Catch2's
#   assertion macros); the libraries and programs under test keep them, and
#   AddressSanitizer stays on everywhere;
# - at -O1 in optimized builds (a quarter less compile time than -O2): the
#   code under test is the libraries', built at the build's level; the
#   tests' own code is assertions and set-up. Not lower: at -O0 the release
#   suite ran 16% longer (999 s of test time against 863; the cache's
#   templates, instantiated in its tests, and the comparison loops of the
#   kernel tests), where a test source alone compiles in 0.62-0.79x of -O1's
#   CPU time and the whole rebuild of them saved less than that;
# - at -O0 under the sanitizers, still instrumented: at -O1 a test source
#   took 1.4-1.9x as long to compile under AddressSanitizer (GCC) and 1.1-2.2x
#   under ThreadSanitizer (clang), and the asan build compiled about a
#   thousand CPU-seconds of them; the suites ran as fast (asan 1,425 s of
#   test time against 1,408, tsan 196 s of wall against 195). Sources that
#   compute references keep the build's level (primcache_reference_sources).
#
# Every test executable's sources reuse tests/support's precompiled header
# (test_pch.hpp, built once per build: Catch2's header was about 1.4 s of
# each source's compile time), the copy with LLVM's definitions where the
# target links the CPU backend's objects. A source that must see something
# before Catch2's header (a CATCH_CONFIG_ macro) or compiles with other flags
# sets SKIP_PRECOMPILE_HEADERS.
function(primcache_test_sources target)
  primcache_test_flags(${target})
  # Executables only: the header is built position-independent as they are
  # (-fPIE), and a library's -fPIC would not match it.
  get_target_property(type ${target} TYPE)
  if(NOT type STREQUAL "EXECUTABLE")
    return()
  endif()
  get_target_property(libs ${target} LINK_LIBRARIES)
  set(pch primcache_test_pch)
  if(libs AND "primcache_cpu_objects" IN_LIST libs AND TARGET primcache_test_pch_llvm)
    set(pch primcache_test_pch_llvm)
  endif()
  target_precompile_headers(${target} REUSE_FROM ${pch})
endfunction()

# A target that builds the tests' precompiled header with the flags of the
# test executables that use it: a compiler refuses (clang) or ignores (GCC) a
# precompiled header built with other code-generation flags.
function(primcache_test_pch_target target)
  primcache_test_flags(${target})
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  target_compile_options(${target} PRIVATE ${CMAKE_CXX_COMPILE_OPTIONS_PIE})
  target_precompile_headers(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support/test_pch.hpp)
endfunction()

function(primcache_test_flags target)
  # tests/support's headers ("support/sanitizers.hpp", ...).
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  if("undefined" IN_LIST PRIMCACHE_SANITIZE)
    target_compile_options(${target} PRIVATE -fno-sanitize=undefined)
  endif()
  if(PRIMCACHE_SANITIZE)
    target_compile_options(${target} PRIVATE -O0)
  endif()
  target_compile_options(${target} PRIVATE $<$<CONFIG:Release,RelWithDebInfo>:-O1>)
endfunction()

# Test sources whose own loops do the work (reference convolutions and
# matmuls the kernels are checked against): under the sanitizers they stay at
# -O1 instead of primcache_test_sources' -O0, which would slow the cases that
# call them more than it saves in compile time. Call it in the directory that
# adds the sources.
function(primcache_reference_sources)
  if(PRIMCACHE_SANITIZE)
    # Not with the precompiled header, which is built at the tests' -O0.
    set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS -O1
                                SKIP_PRECOMPILE_HEADERS ON)
  endif()
endfunction()

# Compiles every target defined in the given directories (and the ones below
# them) at -O0, after the build's own level (the root CMakeLists.txt says
# which, and why).
function(primcache_compile_at_O0)
  foreach(dir IN LISTS ARGN)
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(NOT type MATCHES "^(INTERFACE_LIBRARY|UTILITY)$")
        set_property(TARGET ${target} APPEND PROPERTY COMPILE_OPTIONS -O0)
      endif()
    endforeach()
    get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    if(subdirs)
      primcache_compile_at_O0(${subdirs})
    endif()
  endforeach()
endfunction()

# The timeout for a test: `seconds` (default 120), tripled under sanitizers.
# For tests registered with add_test: set_tests_properties(... TIMEOUT ...).
function(primcache_test_timeout out)
  set(seconds 120)
  if(ARGC GREATER 1 AND ARGV1)
    set(seconds ${ARGV1})
  endif()
  if(PRIMCACHE_SANITIZE)
    math(EXPR seconds "${seconds} * 3")
  endif()
  set(${out} ${seconds} PARENT_SCOPE)
endfunction()

# `concurrency_tests` builds every *_concurrency binary: the tsan job builds
# only what it runs.
function(primcache_concurrency_target)
  get_property(tests GLOBAL PROPERTY PRIMCACHE_CONCURRENCY_TESTS)
  add_custom_target(concurrency_tests)
  if(tests)
    add_dependencies(concurrency_tests ${tests})
  endif()
endfunction()

function(primcache_benchmark)
  cmake_parse_arguments(PB "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${PB_NAME} ${PB_SRCS})
  target_link_libraries(${PB_NAME} PRIVATE ${PB_DEPS} benchmark::benchmark)
endfunction()

# Writes primcacheConfig.cmake: find_package(primcache COMPONENTS a b) loads
# each requested component's targets after those it depends on.
function(primcache_install_package)
  get_property(components GLOBAL PROPERTY PRIMCACHE_COMPONENTS)
  # `cmake --build ... --target primcache_installed`: what `cmake --install`
  # installs (the libraries, and primcached and the command line when
  # built), without the tests and benchmarks (CI's ThreadSanitizer job
  # builds this and its concurrency tests, not every test).
  list(TRANSFORM components PREPEND primcache_ OUTPUT_VARIABLE installed_targets)
  foreach(program primcached primcache_cli)
    if(TARGET ${program})
      list(APPEND installed_targets ${program})
    endif()
  endforeach()
  add_custom_target(primcache_installed)
  add_dependencies(primcache_installed ${installed_targets})
  set(PRIMCACHE_COMPONENT_TABLE "")
  foreach(c IN LISTS components)
    get_property(deps GLOBAL PROPERTY PRIMCACHE_COMPONENT_DEPS_${c})
    get_property(pkgs GLOBAL PROPERTY PRIMCACHE_PACKAGE_DEPS_${c})
    string(APPEND PRIMCACHE_COMPONENT_TABLE
      "set(_primcache_deps_${c} \"${deps}\")\nset(_primcache_pkgs_${c} \"${pkgs}\")\n")
  endforeach()
  set(PRIMCACHE_ALL_COMPONENTS "${components}")
  configure_package_config_file(
    ${PROJECT_SOURCE_DIR}/cmake/primcacheConfig.cmake.in
    ${PROJECT_BINARY_DIR}/primcacheConfig.cmake
    INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/primcache)
  write_basic_package_version_file(
    ${PROJECT_BINARY_DIR}/primcacheConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
  install(FILES
    ${PROJECT_BINARY_DIR}/primcacheConfig.cmake
    ${PROJECT_BINARY_DIR}/primcacheConfigVersion.cmake
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/primcache)
endfunction()
