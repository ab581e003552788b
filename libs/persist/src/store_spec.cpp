#include "primcache/persist/store_spec.hpp"

#include "primcache/base/error.hpp"
#include "primcache/persist/directory_store.hpp"
#include "primcache/persist/redis_store.hpp"
#include "primcache/persist/sharded_redis_store.hpp"

namespace primcache {

std::unique_ptr<blob_store> open_store(const store_spec& spec) {
  if (spec.dir.empty() && spec.redis_url.empty()) {
    throw error(status::invalid_arguments,
                "persistent cache: neither a directory nor a Redis URL is given");
  }
  std::unique_ptr<blob_store> local;
  std::unique_ptr<blob_store> remote;
  if (!spec.dir.empty()) {
    directory_store_options o;
    o.path = spec.dir;
    o.capacity_mb = spec.capacity_mb;
    o.read_only = spec.read_only;
    o.format = spec.format;
    local = directory_store::open(std::move(o));
  }
  if (!spec.redis_url.empty()) {
    redis_store_options base;
    base.capacity_mb = spec.capacity_mb;
    base.read_only = spec.read_only;
    base.format = spec.format;
    std::vector<redis_store_options> servers = parse_redis_url_list(spec.redis_url, base);
    if (servers.size() == 1) {
      remote = redis_store::open(std::move(servers.front()));
    } else {
      remote = sharded_redis_store::open(std::move(servers));
    }
  }
  if (!local) return remote;
  if (!remote) return local;
  return tiered_store::open(std::move(local), std::move(remote), spec.tiered);
}

}  // namespace primcache
