// A scripted loopback mining pool (TestServer), the mining dialects it
// speaks (dialects()), a loopback DNS responder (DnsResponder), and the
// child-safe socket helpers a test's miner uses; shared by payload_test.cpp,
// stratum_agent_test.cpp and watch_agent_test.cpp, defined in
// stratum_test_pool.cpp.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace gpuguard::testing {

inline constexpr int kShares = 11;
inline constexpr long kShareIntervalNs = 100'000'000;  // the child submits every 100 ms

// One TCP connection served by a script: every line received gets the
// replies `respond` gives. Bound to a loopback address, ephemeral port.
class TestServer {
  public:
    using Respond = std::function<std::vector<std::string>(const std::string& line)>;

    TestServer(const char* address, Respond respond) : respond_(std::move(respond)) {
        listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in in{};
        in.sin_family = AF_INET;
        inet_pton(AF_INET, address, &in.sin_addr);
        socklen_t length = sizeof(in);
        if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&in), length) != 0 ||
            listen(listen_fd_, 4) != 0) {
            close(listen_fd_);
            listen_fd_ = -1;
            return;
        }
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&in), &length);
        port_ = ntohs(in.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~TestServer() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
        if (listen_fd_ >= 0) close(listen_fd_);
    }
    bool ok() const { return listen_fd_ >= 0; }
    uint16_t port() const { return port_; }

  private:
    void serve() {
        pollfd wait{listen_fd_, POLLIN, 0};
        while (!stop_ && poll(&wait, 1, 50) == 0) {
        }
        if (stop_) return;
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;
        // A greeting of several lines arrives at once, not one delayed ACK later.
        const int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        std::string pending;
        char buffer[4096];
        pollfd client{fd, POLLIN, 0};
        while (!stop_) {
            if (poll(&client, 1, 50) <= 0) continue;
            const ssize_t n = read(fd, buffer, sizeof(buffer));
            if (n <= 0) break;
            pending.append(buffer, static_cast<size_t>(n));
            size_t newline;
            while ((newline = pending.find('\n')) != std::string::npos) {
                const std::string line = pending.substr(0, newline);
                pending.erase(0, newline + 1);
                for (const auto& reply : respond_(line)) {
                    const std::string framed = reply + "\n";
                    if (write(fd, framed.data(), framed.size()) < 0) break;
                }
            }
        }
        close(fd);
    }

    Respond respond_;
    int listen_fd_ = -1;
    uint16_t port_ = 0;
    std::thread thread_;
    std::atomic<bool> stop_{false};
};

// A DNS responder on 127.53.53.53:53 (not the host's resolver) that answers
// every A query for `name` with `address`.
class DnsResponder {
  public:
    DnsResponder(std::string name, std::array<uint8_t, 4> address)
        : name_(std::move(name)), address_(address) {
        fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_in in{};
        in.sin_family = AF_INET;
        in.sin_port = htons(53);
        inet_pton(AF_INET, "127.53.53.53", &in.sin_addr);
        if (bind(fd_, reinterpret_cast<sockaddr*>(&in), sizeof(in)) != 0) {
            close(fd_);
            fd_ = -1;
            return;
        }
        thread_ = std::thread([this] { serve(); });
    }
    ~DnsResponder() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
        if (fd_ >= 0) close(fd_);
    }
    bool ok() const { return fd_ >= 0; }

  private:
    void serve() {
        uint8_t query[512];
        pollfd wait{fd_, POLLIN, 0};
        while (!stop_) {
            if (poll(&wait, 1, 50) <= 0) continue;
            sockaddr_in from{};
            socklen_t length = sizeof(from);
            const ssize_t n =
                recvfrom(fd_, query, sizeof(query), 0, reinterpret_cast<sockaddr*>(&from), &length);
            if (n < 12) continue;
            // Echo the header and question, one answer pointing at the question.
            std::string reply(reinterpret_cast<char*>(query), static_cast<size_t>(n));
            reply[2] = static_cast<char>(0x81);
            reply[3] = static_cast<char>(0x80);
            reply[7] = 1;  // ancount
            reply += std::string{char(0xc0), 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4};
            for (uint8_t byte : address_) reply += static_cast<char>(byte);
            sendto(fd_, reply.data(), reply.size(), 0, reinterpret_cast<sockaddr*>(&from), length);
        }
    }

    std::string name_;
    std::array<uint8_t, 4> address_;
    int fd_ = -1;
    std::thread thread_;
    std::atomic<bool> stop_{false};
};

// A DNS query (id 0x4242, recursion desired) for the A record of `name`.
std::string dns_query(const std::string& name);

// A process of the host looks `name` up: a child named gg-lookup sends a real
// UDP query to a DnsResponder on 127.53.53.53:53 that answers `address`, and
// reads the answer. 0 when it came; otherwise which step failed (-2: no
// resolver, 1 connect, 2 send, 3 no answer in 5 s, 4 a short answer).
int look_up_through_test_resolver(const std::string& name, std::array<uint8_t, 4> address);

// The JSON-RPC id of a request line, as text ("" when none).
std::string id_of(const std::string& line);

// A mining dialect: what the miner sends, what the pool answers, and the
// hashes one share stands for at the difficulty the pool sets.
struct Dialect {
    const char* name;
    const char* protocol;            // Stratum::protocol expected
    const char* first_method;        // recognised from this request, before any answer
    std::vector<std::string> login;  // the miner's opening requests, one answer line each
    TestServer::Respond pool;
    std::function<std::string(int)> submit;  // the i-th share
    double share_hashes;
};

// The dialects the tests mine in, stratum1 (difficulty 8) first.
std::vector<Dialect> dialects();

// Child-safe helpers: only system calls.
void sleep_ns(long ns);

bool write_all(int fd, const std::string& text);

// Reads until `lines` newlines arrived (or 2 s passed).
bool read_lines(int fd, int lines);

// Reads whatever has arrived, without waiting.
void drain_input(int fd);

// A free loopback port of `type` (SOCK_STREAM, SOCK_DGRAM): nobody listens
// on it, though a datagram sent there still leaves the sender.
uint16_t free_loopback_port(int type = SOCK_STREAM);

int connect_v4(const char* address, uint16_t port);

// GET `path` from 127.0.0.1:`port` (HTTP/1.0, 5 s at most): the body, "" on
// failure. Not child-safe.
std::string http_get(uint16_t port, const std::string& path);

}  // namespace gpuguard::testing
