#include "tests/siem/rsyslog_server.h"

#include <fstream>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/siem/siem_fixtures.h"

namespace gpuguard::testing {
namespace {

bool port_accepts(uint16_t port) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    return ok;
}

}  // namespace

std::string RsyslogServer::start(const std::filesystem::path& dir, RsyslogOptions options) {
    dir_ = dir;
    options_ = std::move(options);
    if (options_.port == 0) options_.port = free_port();
    std::filesystem::create_directories(dir_ / "spool");
    std::filesystem::remove(dir_ / "rsyslogd.pid");
    std::ostringstream conf;
    // LEEF separates attributes with tabs, which rsyslog escapes as #011 unless told not to.
    conf << fmt::format(
        "global(workDirectory=\"{}\" maxMessageSize=\"256k\" "
        "parser.escapeControlCharacterTab=\"off\"",
        (dir_ / "spool").string());
    if (options_.tls) {
        conf << fmt::format(
            " defaultNetstreamDriver=\"ossl\" defaultNetstreamDriverCAFile=\"{}\""
            " defaultNetstreamDriverCertFile=\"{}\" defaultNetstreamDriverKeyFile=\"{}\"",
            options_.pki.ca_cert.string(), options_.pki.server_cert.string(),
            options_.pki.server_key.string());
    }
    conf << ")\n";
    if (options_.tls) {
        conf << fmt::format(
            "module(load=\"imtcp\" streamDriver.name=\"ossl\" streamDriver.mode=\"1\" "
            "streamDriver.authMode=\"{}\")\n",
            options_.require_client_cert ? "x509/certvalid" : "anon");
    } else {
        conf << "module(load=\"imtcp\")\n";
    }
    if (!options_.unix_socket.empty()) conf << "module(load=\"imuxsock\" sysSock.use=\"off\")\n";
    if (options_.udp) conf << "module(load=\"imudp\")\n";
    conf << R"(template(name="gg" type="list" option.jsonf="on") {
  property(outname="host" name="hostname" format="jsonf")
  property(outname="app" name="app-name" format="jsonf")
  property(outname="procid" name="procid" format="jsonf")
  property(outname="msgid" name="msgid" format="jsonf")
  property(outname="severity" name="syslogseverity" format="jsonf")
  property(outname="facility" name="syslogfacility" format="jsonf")
  property(outname="sd" name="structured-data" format="jsonf")
  property(outname="msg" name="msg" format="jsonf")
}
)";
    conf << fmt::format(
        "ruleset(name=\"in\") {{ action(type=\"omfile\" file=\"{}\" template=\"gg\") }}\n",
        (dir_ / "received.jsonl").string());
    conf << fmt::format("input(type=\"imtcp\" port=\"{}\" ruleset=\"in\")\n", options_.port);
    if (options_.udp) {
        conf << fmt::format(
            "input(type=\"imudp\" address=\"127.0.0.1\" port=\"{}\" "
            "ruleset=\"in\")\n",
            options_.port);
    }
    if (!options_.unix_socket.empty()) {
        conf << fmt::format(
            "input(type=\"imuxsock\" socket=\"{}\" ruleset=\"in\" "
            "useSpecialParser=\"off\" parseHostname=\"off\")\n",
            options_.unix_socket.string());
    }
    {
        std::ofstream out(dir_ / "rsyslog.conf");
        out << conf.str();
    }
    process_ = std::make_unique<Subprocess>(std::vector<std::string>{
        find_tool("rsyslogd"), "-n", "-f", (dir_ / "rsyslog.conf").string(), "-i",
        (dir_ / "rsyslogd.pid").string()});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!port_accepts(options_.port)) {
        if (std::chrono::steady_clock::now() >= deadline) {
            process_->stop(SIGKILL, std::chrono::seconds(2));
            return "rsyslogd did not listen on port " + std::to_string(options_.port) + ": " +
                   process_->stderr_text();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!options_.unix_socket.empty()) {
        while (!std::filesystem::exists(options_.unix_socket) &&
               std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    return "";
}

void RsyslogServer::stop() {
    if (!process_) return;
    process_->stop(SIGTERM, std::chrono::seconds(5));
    process_.reset();
}

std::vector<nlohmann::json> RsyslogServer::messages() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(dir_ / "received.jsonl");
    std::string line;
    while (std::getline(in, line)) {
        auto json = nlohmann::json::parse(line, nullptr, false);
        if (!json.is_discarded()) out.push_back(std::move(json));
    }
    return out;
}

std::vector<nlohmann::json> RsyslogServer::wait_for(size_t count,
                                                    std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto out = messages();
    while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
        out = messages();
    }
    return out;
}

std::string RsyslogServer::log() const {
    return process_ ? process_->stderr_text() : std::string();
}

}  // namespace gpuguard::testing
