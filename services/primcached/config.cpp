#include "config.hpp"

#include <optional>

#include "default_paths.hpp"
#include "json_field.hpp"
#include "primcache/base/error.hpp"
#include "primcache/control/registry.hpp"
#include "primcache/runtime/constant_cache.hpp"
#include "primcache/runtime/persistent_cache.hpp"
#include "primcache/runtime/primitive_cache.hpp"

namespace primcache::primcached {

daemon_config load_config(std::string_view text, const std::string& file,
                          const std::string& base_dir) {
  const boost::json::value doc = parse_json_text(text, file);
  const json_field root(doc, file);
  root.object();
  root.allow_only({"admin", "threads", "summary_interval_seconds", "caches", "constant_caches",
                   "persistent_cache", "tune", "workload"});
  daemon_config c;
  c.file = file;
  if (std::optional<json_field> admin = root.member("admin")) {
    admin->object();
    admin->allow_only({"address", "port", "token_file", "threads"});
    if (auto f = admin->member("address")) {
      c.admin_address = f->string();
      if (!services::is_ip_address(c.admin_address)) {
        f->fail("expected an IP address such as 127.0.0.1 or ::1 (primcached resolves no names)");
      }
    }
    if (auto f = admin->member("port"))
      c.admin_port = static_cast<std::uint16_t>(f->integer(0, 65535));
    if (auto f = admin->member("token_file")) c.token_file = f->string();
    if (auto f = admin->member("threads")) c.admin_threads = static_cast<int>(f->integer(1, 64));
  }
  if (auto f = root.member("threads")) c.threads = static_cast<int>(f->integer(1, 1024));
  if (auto f = root.member("summary_interval_seconds")) {
    c.summary_interval_seconds = f->number();
    if (!(c.summary_interval_seconds >= 0.1 && c.summary_interval_seconds <= 3600)) {
      f->fail("expected a number of seconds in [0.1, 3600]");
    }
  }
  if (std::optional<json_field> caches = root.member("caches")) {
    for (const auto& kv : caches->object()) {
      const json_field entry = *caches->member(kv.key());
      c.caches.emplace_back(std::string(kv.key()),
                            static_cast<std::uint64_t>(entry.integer(0, std::int64_t{1} << 53)));
    }
  }
  if (std::optional<json_field> constants = root.member("constant_caches")) {
    for (const auto& kv : constants->object()) {
      const json_field entry = *constants->member(kv.key());
      engine_kind kind = engine_kind::cpu;
      if (kv.key() == "cpu") {
        kind = engine_kind::cpu;
      } else if (kv.key() == "gpu") {
        kind = engine_kind::gpu;
      } else {
        entry.fail("unknown engine kind (expected cpu or gpu)");
      }
      std::int64_t mb = 0;
      if (entry.value().is_string()) {
        if (entry.string() != "unlimited")
          entry.fail("expected MB (an integer >= 0) or \"unlimited\"");
        mb = constant_tensor_cache_unlimited;
      } else if (entry.value().is_number()) {
        mb = entry.integer(0, max_constant_tensor_cache_capacity);
      } else {
        entry.fail("expected MB (an integer >= 0) or \"unlimited\"");
      }
      c.constant_caches.emplace_back(kind, mb);
    }
  }
  if (std::optional<json_field> p = root.member("persistent_cache")) {
    p->object();
    p->allow_only({"dir", "capacity_mb", "redis"});
    daemon_config::persistent_config pc;
    if (auto f = p->member("dir")) {
      pc.dir = f->string();
      if (pc.dir.empty()) f->fail("expected a directory path (leave the field out for none)");
      if (pc.dir.front() != '/' && !base_dir.empty()) pc.dir = base_dir + "/" + pc.dir;
    }
    if (auto f = p->member("capacity_mb")) {
      pc.capacity_mb = static_cast<std::uint64_t>(f->integer(0, std::int64_t{1} << 44));
    }
    if (auto f = p->member("redis")) {
      pc.redis = f->string();
      // redis:// or rediss:// (TLS), or a comma-separated list of them (sharded):
      // open_persistent_cache checks the rest.
      if (pc.redis.rfind("redis://", 0) != 0 && pc.redis.rfind("rediss://", 0) != 0) {
        f->fail("expected a redis://host:port/prefix URL");
      }
    }
    if (pc.dir.empty() && pc.redis.empty()) p->fail("expected \"dir\", \"redis\" or both");
    c.persistent = std::move(pc);
  }
  if (std::optional<json_field> t = root.member("tune")) {
    t->object();
    t->allow_only({"enabled", "table", "max_nconfigs"});
    if (auto f = t->member("enabled")) c.tune.enabled = f->boolean();
    if (auto f = t->member("table")) {
      c.tune.table = f->string();
      if (c.tune.table.empty()) f->fail("expected a file path (leave the field out for none)");
      if (c.tune.table.front() != '/' && !base_dir.empty()) {
        c.tune.table = base_dir + "/" + c.tune.table;
      }
    }
    if (auto f = t->member("max_nconfigs")) {
      c.tune.max_nconfigs = static_cast<std::size_t>(f->integer(1, 1000));
    }
  }
  if (auto f = root.member("workload")) {
    c.workload = f->string();
    if (c.workload.empty()) f->fail("expected a path (leave the field out for the default)");
    if (c.workload.front() != '/' && !base_dir.empty()) c.workload = base_dir + "/" + c.workload;
  }
  return c;
}

std::string attach_persistent_cache(const daemon_config& config) {
  if (!config.persistent) return {};
  const daemon_config::persistent_config& p = *config.persistent;
  try {
    set_persistent_cache(open_persistent_cache(p.dir, p.capacity_mb, p.redis));
  } catch (const error& e) {
    return config.file + ": persistent_cache: " + e.message();
  }
  return {};
}

void apply_capacities(const daemon_config& config) {
  // The runtime registers its caches on first use: make sure they are there
  // (the constant caches read PRIMCACHE_CONSTANT_TENSOR_CACHE_CAPACITY then;
  // the config's constant_caches win over it).
  get_primitive_cache_capacity();
  (void)constant_tensor_cache_for(engine_kind::cpu);
  for (const auto& [kind, mb] : config.constant_caches) {
    set_constant_tensor_cache_capacity(kind, mb);
  }
  for (const auto& [name, capacity] : config.caches) {
    try {
      control().set_capacity(name, capacity);
    } catch (const error& e) {
      if (e.code() != status::not_found) {
        throw error(status::invalid_arguments, config.file + ": caches." + name + ": " + e.what());
      }
      std::string known;
      for (const cache_info& info : control().list_caches()) {
        known += known.empty() ? "" : ", ";
        known += info.name;
      }
      throw error(
          status::invalid_arguments,
          config.file + ": caches." + name + ": no cache of that name (registered: " + known + ")");
    }
  }
}

}  // namespace primcache::primcached
