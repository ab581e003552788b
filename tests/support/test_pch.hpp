// The tests' precompiled header: Catch2's header and the standard headers
// most test sources include, parsed once per build instead of once per test
// source (Catch2's header alone took about 1.4 s of every test source's
// compile). primcache_test_sources gives it to the sources of every test
// executable; each source still includes what it uses, so it also compiles
// without it (-DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>
