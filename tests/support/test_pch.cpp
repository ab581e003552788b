// The translation unit that builds test_pch.hpp's precompiled header (a
// target needs a source; CMake compiles the header beside it).
