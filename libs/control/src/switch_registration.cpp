#include "primcache/control/switch_registration.hpp"

#include <utility>

#include "registry_state.hpp"

namespace primcache {

switch_registration::switch_registration(
    std::shared_ptr<control_internal::registry_state> registry,
    std::shared_ptr<control_internal::switch_entry> entry) noexcept
    : registry_(std::move(registry)), entry_(std::move(entry)), state_(&entry_->state) {}

switch_registration::switch_registration(switch_registration&& other) noexcept
    : registry_(std::move(other.registry_)),
      entry_(std::move(other.entry_)),
      state_(std::exchange(other.state_, nullptr)) {}

switch_registration& switch_registration::operator=(switch_registration&& other) noexcept {
  if (this != &other) {
    reset();
    registry_ = std::move(other.registry_);
    entry_ = std::move(other.entry_);
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

switch_registration::~switch_registration() {
  reset();
}

void switch_registration::reset() noexcept {
  if (entry_ == nullptr) return;
  registry_->unregister(entry_);
  state_ = nullptr;
  entry_.reset();
  registry_.reset();
}

const std::string& switch_registration::name() const noexcept {
  return entry_->name;
}

}  // namespace primcache
