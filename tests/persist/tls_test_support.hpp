// TLS for the persist tests: certificates made with the openssl command (a
// test CA, a server certificate for localhost and 127.0.0.1, a client
// certificate, and a second CA nothing uses) and a redis-server with a TLS
// port beside its plain one (the plain port is how redis_server knows it is
// up, and lets a test look at the data).
//
// A missing openssl command is a failure, never a skip.
#pragma once

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "persist_test_support.hpp"
#include "redis_test_support.hpp"

namespace primcache::test {

inline void run_or_throw(const std::string& command) {
  if (std::system(command.c_str()) != 0) {
    throw std::runtime_error("'" + command +
                             "' failed: the TLS tests make their certificates with the openssl "
                             "command (run scripts/install-deps)");
  }
}

// A CA, a server certificate (localhost, 127.0.0.1) and a client
// certificate signed by it, and an unrelated CA, in a private directory.
class test_pki {
 public:
  test_pki() {
    const std::string d = dir_.path();
    {
      std::ofstream(d + "/server.ext") << "subjectAltName=DNS:localhost,IP:127.0.0.1\n";
      std::ofstream(d + "/client.ext") << "extendedKeyUsage=clientAuth\n";
    }
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string q = " 2>/dev/null";
    run_or_throw("cd '" + d + "' && openssl req -x509" + ec +
                 " -keyout ca.key -out ca.crt -days 2 -subj /CN=primcache-test-ca" + q);
    run_or_throw("cd '" + d + "' && openssl req -x509" + ec +
                 " -keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=primcache-other-ca" +
                 q);
    for (const char* who : {"server", "client"}) {
      const std::string w = who;
      run_or_throw("cd '" + d + "' && openssl req" + ec + " -keyout " + w + ".key -out " + w +
                   ".csr -subj /CN=" + (w == "server" ? "localhost" : "primcache-client") + q);
      run_or_throw("cd '" + d + "' && openssl x509 -req -in " + w +
                   ".csr -CA ca.crt -CAkey ca.key " + "-CAcreateserial -days 2 -out " + w +
                   ".crt -extfile " + w + ".ext" + q);
    }
  }
  std::string file(const std::string& name) const { return dir_.path() + "/" + name; }

 private:
  temp_dir dir_;
};

// A redis-server with a plain port (for readiness and raw access) and a TLS port.
struct tls_server {
  int tls_port;
  redis_server server;
  tls_server(const test_pki& pki, const std::string& auth_clients,
             std::vector<std::string> extra = {})
      : tls_port(primcache::test::free_loopback_port()),
        server(0, with_tls(pki, auth_clients, tls_port, std::move(extra))) {}

  static std::vector<std::string> with_tls(const test_pki& pki, const std::string& auth_clients,
                                           int tls_port, std::vector<std::string> extra) {
    std::vector<std::string> a = {"--tls-port",         std::to_string(tls_port),
                                  "--tls-cert-file",    pki.file("server.crt"),
                                  "--tls-key-file",     pki.file("server.key"),
                                  "--tls-ca-cert-file", pki.file("ca.crt"),
                                  "--tls-auth-clients", auth_clients};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
};

}  // namespace primcache::test
