#include "primcache/const_cache/constant_buffer.hpp"

#include <string>
#include <utility>

#include "primcache/base/error.hpp"

namespace primcache {
namespace {

constant_buffer::free_function checked(constant_buffer::free_function free) {
  if (!free) throw error(status::invalid_arguments, "constant buffer needs a free function");
  return free;
}

}  // namespace

constant_buffer::constant_buffer(std::size_t size, allocate_function allocate, free_function free)
    : size_(size), free_(checked(std::move(free))), data_(nullptr) {
  if (!allocate)
    throw error(status::invalid_arguments, "constant buffer needs an allocate function");
  data_ = allocate(size);
  if (data_ == nullptr && size != 0) {
    throw error(status::out_of_memory,
                "constant buffer of " + std::to_string(size) + " bytes: allocate returned null");
  }
}

constant_buffer::~constant_buffer() {
  if (data_ != nullptr) free_(data_, size_);
}

std::shared_ptr<constant_buffer> make_constant_buffer(std::size_t size,
                                                      constant_buffer::allocate_function allocate,
                                                      constant_buffer::free_function free) {
  return std::make_shared<constant_buffer>(size, std::move(allocate), std::move(free));
}

}  // namespace primcache
