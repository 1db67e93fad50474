// A private rsyslogd for the tests: own config, loopback port, spool dir and
// pid file in a temp dir, receiving RFC 5424 over TCP (optionally TLS) and
// a unix socket, writing what it parsed as JSON lines. Only the process it
// started is ever stopped.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/siem/test_pki.h"
#include "tests/support/run_command.h"

namespace gpuguard::testing {

struct RsyslogOptions {
    uint16_t port = 0;  // 0: free_port()
    bool tls = false;
    // TLS: require a client certificate signed by pki.ca_cert
    // (streamDriver.authMode x509/certvalid) instead of anonymous clients.
    bool require_client_cert = false;
    TestPki pki;
    std::filesystem::path unix_socket;  // "" = none
    bool udp = false;                   // also listen on UDP `port`
};

class RsyslogServer {
  public:
    // Writes the config into `dir` and starts rsyslogd -n; waits until the
    // TCP port accepts. Returns "" or why it failed.
    std::string start(const std::filesystem::path& dir, RsyslogOptions options);
    // SIGTERM and wait (bounded).
    void stop();
    ~RsyslogServer() { stop(); }

    uint16_t port() const { return options_.port; }
    std::string address() const { return "127.0.0.1:" + std::to_string(options_.port); }

    // Every message received so far, as rsyslog parsed it: host, app, procid,
    // msgid, severity, facility, sd, msg.
    std::vector<nlohmann::json> messages() const;
    // Waits (bounded) until at least `count` messages arrived.
    std::vector<nlohmann::json> wait_for(size_t count, std::chrono::milliseconds timeout) const;

    std::string log() const;

  private:
    std::filesystem::path dir_;
    RsyslogOptions options_;
    std::unique_ptr<Subprocess> process_;
};

}  // namespace gpuguard::testing
