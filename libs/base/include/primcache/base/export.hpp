// primcache/base/export.hpp — symbol visibility for primcache's libraries.
//
// Libraries build with hidden visibility; PRIMCACHE_API marks the classes and
// functions that form a library's binary interface. On ELF the same attribute
// serves the library that defines a symbol and the code that uses it.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define PRIMCACHE_API __attribute__((visibility("default")))
#else
#define PRIMCACHE_API
#endif
