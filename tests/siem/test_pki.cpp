#include "tests/siem/test_pki.h"

#include <fstream>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/siem/siem_fixtures.h"
#include "tests/support/run_command.h"

namespace gpuguard::testing {
namespace {

bool openssl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {find_tool("openssl")};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto result = run_command(argv, std::chrono::seconds(30));
    if (result.exit_code != 0) {
        ADD_FAILURE() << "openssl " << args[0] << " failed: " << result.stderr_text;
        return false;
    }
    return true;
}

}  // namespace

uint16_t free_port() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    close(fd);
    return ntohs(addr.sin_port);
}

bool make_test_pki(const std::filesystem::path& dir, TestPki* pki) {
    const auto p = [&](const char* name) { return (dir / name).string(); };
    const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt",
                                         "ec_paramgen_curve:prime256v1", "-nodes"};
    auto args = [&](std::vector<std::string> head, std::vector<std::string> tail) {
        head.insert(head.end(), ec.begin(), ec.end());
        head.insert(head.end(), tail.begin(), tail.end());
        return head;
    };
    {
        std::ofstream ext(p("server.ext"));
        ext << "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
               "extendedKeyUsage=serverAuth\n";
    }
    {
        std::ofstream ext(p("client.ext"));
        ext << "extendedKeyUsage=clientAuth\n";
    }
    // One certificate request signed by the test CA.
    const auto signed_by_ca = [&](const std::string& name, const std::string& subject) {
        return openssl(args({"req"}, {"-keyout", p((name + ".key").c_str()), "-out",
                                      p((name + ".csr").c_str()), "-subj", subject})) &&
               openssl({"x509", "-req", "-in", p((name + ".csr").c_str()), "-CA", p("ca.pem"),
                        "-CAkey", p("ca.key"), "-CAcreateserial", "-out",
                        p((name + ".pem").c_str()), "-days", "2", "-extfile",
                        p((name + ".ext").c_str())});
    };
    if (!openssl(args({"req", "-x509"}, {"-keyout", p("ca.key"), "-out", p("ca.pem"), "-days", "2",
                                         "-subj", "/CN=gpuguard test CA"})) ||
        !openssl(args({"req", "-x509"}, {"-keyout", p("other-ca.key"), "-out", p("other-ca.pem"),
                                         "-days", "2", "-subj", "/CN=unrelated test CA"})) ||
        !signed_by_ca("server", "/CN=localhost") || !signed_by_ca("client", "/CN=gpu-node-7")) {
        return false;
    }
    pki->client_cert = p("client.pem");
    pki->client_key = p("client.key");
    pki->ca_cert = p("ca.pem");
    pki->server_cert = p("server.pem");
    pki->server_key = p("server.key");
    pki->other_ca_cert = p("other-ca.pem");
    return true;
}

}  // namespace gpuguard::testing
