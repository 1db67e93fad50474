// Loopback ports and a test PKI for the sink tests' peers (rsyslog, the
// HTTP peers), made with the openssl CLI at test time.
#pragma once

#include <cstdint>
#include <filesystem>

namespace gpuguard::testing {

// A free loopback TCP port (bound and released; fine for tests).
uint16_t free_port();

// Test PKI made with the openssl CLI: a CA, a server certificate for
// localhost / 127.0.0.1 and a client certificate (mutual TLS) signed by it.
struct TestPki {
    std::filesystem::path ca_cert, server_cert, server_key;
    std::filesystem::path client_cert, client_key;  // CN=gpu-node-7, clientAuth
    std::filesystem::path other_ca_cert;            // a CA that did not sign the server
};
// Fails the current test (returns false) when openssl fails.
bool make_test_pki(const std::filesystem::path& dir, TestPki* pki);

}  // namespace gpuguard::testing
