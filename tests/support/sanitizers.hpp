// Which sanitizer a test binary is built with, the same way under GCC
// (__SANITIZE_ADDRESS__, __SANITIZE_THREAD__) and clang (__has_feature):
// PRIMCACHE_TEST_ASAN and PRIMCACHE_TEST_TSAN are 1 or 0. Tests use them to
// shorten loops a sanitizer slows, and to leave out what a sanitizer's own
// runtime cannot do (AddressSanitizer's allocator is not fork-safe).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define PRIMCACHE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PRIMCACHE_TEST_ASAN 1
#endif
#endif
#ifndef PRIMCACHE_TEST_ASAN
#define PRIMCACHE_TEST_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define PRIMCACHE_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PRIMCACHE_TEST_TSAN 1
#endif
#endif
#ifndef PRIMCACHE_TEST_TSAN
#define PRIMCACHE_TEST_TSAN 0
#endif
