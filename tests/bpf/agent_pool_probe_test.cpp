// Active verification, live (verify.active, issue 38 point 8): quiet CPU
// workers on plain opaque flows to peers in a network namespace of the
// test's own (never loopback, never off the host). When GG-CORR-0023 (its
// windows cut to 4 s) names the miner's peer, the agent probes it from the
// worker's own namespace: a fake pool answering the Stratum v1 subscribe
// makes it GG-CORR-0027 with the answer quoted, journaled as pool_probe so
// that a replay raises it again without probing; a web server answering
// HTTP 400 is probed and nothing is escalated; a pool behind TLS (the
// worker's first bytes a TLS record) is probed over TLS. With the default
// configuration no probe is made at all: the peer sees no connection but
// the worker's own.
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <openssl/ssl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/siem/test_pki.h"
#include "tests/support/child_process.h"
#include "tests/support/netns.h"
#include "tests/support/time_bound.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::Clock;
using gpuguard::testing::kQuietCpuRule;
using gpuguard::testing::RequestChild;
using gpuguard::testing::Subprocess;
using gpuguard::testing::time_bound;

constexpr uint16_t kVethPort = 7009;  // VethPeer's own listener, unused here
constexpr uint16_t kPoolPort = 8443;  // not a miner's port: the address alone is suspect
constexpr uint16_t kWebPort = 8444;

constexpr const char* kPoolReply = R"({"id":1,"result":[[["mining.set_difficulty","b4b6693b"],)"
                                   R"(["mining.notify","ae6812eb"]],"08000002",4],"error":null})"
                                   "\n"
                                   R"({"id":null,"method":"mining.set_difficulty","params":[8]})"
                                   "\n";

// A listening socket made by a thread that entered the namespace of
// `namespace_holder`; -1 on failure.
int listen_in(pid_t namespace_holder, uint16_t port) {
    int fd = -1;
    std::thread([&] {
        const std::string path = "/proc/" + std::to_string(namespace_holder) + "/ns/net";
        const int ns = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (ns < 0 || setns(ns, CLONE_NEWNET) != 0) return;
        close(ns);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int on = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
        sockaddr_in any{};
        any.sin_family = AF_INET;
        any.sin_port = htons(port);
        if (bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof(any)) != 0 || listen(fd, 16) != 0) {
            close(fd);
            fd = -1;
        }
    }).join();
    return fd;
}

// A pool behind TLS in the VethPeer's namespace, with the test PKI's
// server certificate: each connection on a thread of its own (at most 8);
// a connection whose handshake fails (the worker's own, whose "TLS" is a
// record header and zeros) is drained, never closed, so the worker's
// sends go on. Counts the handshakes that carried the agent's probe.
class TlsPoolServer {
  public:
    TlsPoolServer(pid_t namespace_holder, uint16_t port, const gpuguard::testing::TestPki& pki)
        : listen_fd_(listen_in(namespace_holder, port)),
          context_(SSL_CTX_new(TLS_server_method())) {
        if (listen_fd_ < 0 || !context_ ||
            SSL_CTX_use_certificate_chain_file(context_, pki.server_cert.c_str()) != 1 ||
            SSL_CTX_use_PrivateKey_file(context_, pki.server_key.c_str(), SSL_FILETYPE_PEM) != 1) {
            return;
        }
        ok_ = true;
        acceptor_ = std::thread([this] { accept_loop(); });
    }
    ~TlsPoolServer() {
        stop_ = true;
        if (acceptor_.joinable()) acceptor_.join();
        {
            std::lock_guard lock(mutex_);
            for (const int fd : clients_) shutdown(fd, SHUT_RDWR);  // ends their reads
        }
        for (auto& thread : threads_) thread.join();
        for (const int fd : clients_) close(fd);
        if (context_) SSL_CTX_free(context_);
        if (listen_fd_ >= 0) close(listen_fd_);
    }
    bool ok() const { return ok_; }
    int probes() const { return probes_; }

  private:
    void accept_loop() {
        pollfd wait{listen_fd_, POLLIN, 0};
        while (!stop_) {
            if (poll(&wait, 1, 50) <= 0) continue;
            const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) continue;
            std::lock_guard lock(mutex_);
            if (threads_.size() >= 8) {
                close(fd);
                continue;
            }
            clients_.push_back(fd);
            threads_.emplace_back([this, fd] { serve(fd); });
        }
    }
    void serve(int fd) {
        SSL* ssl = SSL_new(context_);
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) == 1) {
            std::string line;
            char buffer[1024];
            int n = 0;
            while (line.find('\n') == std::string::npos &&
                   (n = SSL_read(ssl, buffer, sizeof(buffer))) > 0) {
                line.append(buffer, static_cast<size_t>(n));
            }
            if (line.find("gpuguard-probe") != std::string::npos) ++probes_;
            SSL_write(ssl, kPoolReply, static_cast<int>(std::strlen(kPoolReply)));
        } else {
            char buffer[1024];
            while (read(fd, buffer, sizeof(buffer)) > 0) {
            }
        }
        SSL_free(ssl);
    }

    int listen_fd_;
    SSL_CTX* context_;
    bool ok_ = false;
    std::mutex mutex_;
    std::list<int> clients_;
    std::list<std::thread> threads_;
    std::thread acceptor_;
    std::atomic<bool> stop_{false};
    std::atomic<int> probes_{0};
};

// A server in the VethPeer's namespace (10.67.0.2): the listening socket is
// made by a thread that entered that namespace; a second thread serves every
// connection, answering each line as `web` or as a pool does, and counts
// the connections that carried the agent's probe (its user agent).
class PeerServer {
  public:
    PeerServer(pid_t namespace_holder, uint16_t port, bool web)
        : web_(web), listen_fd_(listen_in(namespace_holder, port)) {
        if (listen_fd_ >= 0) thread_ = std::thread([this] { serve(); });
    }
    ~PeerServer() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
        if (listen_fd_ >= 0) close(listen_fd_);
    }
    bool ok() const { return listen_fd_ >= 0; }
    int accepted() const { return accepted_; }
    int probes() const { return probes_; }

  private:
    struct Client {
        int fd;
        std::string pending;
        bool probe;
    };
    void serve() {
        std::vector<Client> clients;
        while (!stop_) {
            std::vector<pollfd> wait{{listen_fd_, POLLIN, 0}};
            for (const auto& client : clients) wait.push_back({client.fd, POLLIN, 0});
            if (poll(wait.data(), wait.size(), 50) <= 0) continue;
            if (wait[0].revents & POLLIN) {
                const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
                if (fd >= 0 && clients.size() < 32) {
                    clients.push_back({fd, "", false});
                    ++accepted_;
                } else if (fd >= 0) {
                    close(fd);
                }
            }
            for (size_t i = 1; i < wait.size(); ++i) {
                if (!(wait[i].revents & (POLLIN | POLLHUP))) continue;
                Client& client = clients[i - 1];
                char buffer[2048];
                const ssize_t n = read(client.fd, buffer, sizeof(buffer));
                if (n <= 0) {
                    close(client.fd);
                    client.fd = -1;
                    continue;
                }
                client.pending.append(buffer, static_cast<size_t>(n));
                if (client.pending.size() > 65536) client.pending.erase(0, 32768);
                if (!client.probe && client.pending.find("gpuguard-probe") != std::string::npos) {
                    client.probe = true;
                    ++probes_;
                }
                if (client.pending.find('\n') == std::string::npos) continue;
                client.pending.clear();
                const std::string reply =
                    web_ ? "HTTP/1.1 400 Bad Request\r\nServer: nginx\r\nContent-Length: 0\r\n\r\n"
                         : kPoolReply;
                if (write(client.fd, reply.data(), reply.size()) < 0 || web_) {
                    close(client.fd);
                    client.fd = -1;
                }
            }
            std::erase_if(clients, [](const Client& client) { return client.fd < 0; });
        }
        for (const auto& client : clients) close(client.fd);
    }

    bool web_;
    int listen_fd_ = -1;
    std::thread thread_;
    std::atomic<bool> stop_{false};
    std::atomic<int> accepted_{0};
    std::atomic<int> probes_{0};
};

class AgentPoolProbeTest : public AgentDetectTest {
  protected:
    // Workers forked in a namespace of the test's own, joined by a veth pair
    // to the peer namespace where the servers listen; connected before the
    // agent starts.
    // With `pki`, the pool speaks TLS (tls_pool_) instead.
    void start_peers_and_workers(const gpuguard::testing::TestPki* pki = nullptr) {
        gpuguard::testing::NetnsScope netns;
        ASSERT_EQ(netns.error(), "");
        peer_.emplace(kVethPort, /*hold_connections=*/true);
        ASSERT_EQ(peer_->error(), "");
        if (pki) {
            tls_pool_.emplace(peer_->pid(), kPoolPort, *pki);
            ASSERT_TRUE(tls_pool_->ok());
        } else {
            pool_.emplace(peer_->pid(), kPoolPort, /*web=*/false);
            ASSERT_TRUE(pool_->ok());
        }
        web_.emplace(peer_->pid(), kWebPort, /*web=*/true);
        ASSERT_TRUE(web_->ok());
        const auto worker = [&](const std::string& comm, uint16_t port) {
            return gpuguard::testing::start_io_worker({.comm = comm,
                                                       .gpu_node = "",
                                                       .file = "",
                                                       .tcp_port = port,
                                                       .tcp_address = "10.67.0.2"});
        };
        miner_ = worker("gg-probedminer", kPoolPort);
        webbed_ = worker("gg-probedweb", kWebPort);
        for (auto* child : {miner_.get(), webbed_.get()}) ASSERT_EQ(child->ask('c'), 0);
    }
    void use_quiet_cpu_rule(const std::string& more) {
        rules_ = dir_ / "quiet-cpu.yaml";
        std::ofstream(rules_) << kQuietCpuRule;
        std::ofstream(config_, std::ios::app)
            << "  correlation_files: [" << rules_.string() << "]\n"
            << "process_table:\n  cpu_interval_ms: 500\n  busy_cpu_percent: 20\n"
            << more;
    }
    // Rounds of small sends from both ('s' opaque bytes: the probe is plain
    // TCP; 't' TLS records) until `pid`'s detection of `rule`, for `within`
    // at most.
    std::optional<nlohmann::json> rounds_until(Subprocess& agent, pid_t pid,
                                               const std::string& rule, std::chrono::seconds within,
                                               char send = 's') {
        std::optional<nlohmann::json> detection;
        for (const auto deadline = Clock::now() + time_bound(within);
             !detection && Clock::now() < deadline;) {
            for (auto* child : {miner_.get(), webbed_.get()}) EXPECT_EQ(child->ask(send), 0);
            detection = wait_for_detection(agent, pid, rule, 300ms);
        }
        return detection;
    }

    std::optional<gpuguard::testing::VethPeer> peer_;
    std::optional<PeerServer> pool_, web_;
    std::optional<TlsPoolServer> tls_pool_;
    std::unique_ptr<RequestChild> miner_, webbed_;
    std::filesystem::path rules_;
};

TEST_F(AgentPoolProbeTest, a_suspected_peer_answering_stratum_is_certain_a_web_server_is_not) {
    start_peers_and_workers();
    if (HasFatalFailure()) return;
    use_quiet_cpu_rule("verify:\n  active: true\n  timeout_ms: 1000\n");
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    for (auto* child : {miner_.get(), webbed_.get()}) ASSERT_EQ(child->ask('b'), 0);

    const auto certain = rounds_until(agent, miner_->pid(), "GG-CORR-0027", 40s);
    ASSERT_TRUE(certain) << agent.stderr_text();
    const std::string text = certain->dump();
    EXPECT_EQ((*certain)["log"]["level"], "critical");
    EXPECT_NE(text.find("10.67.0.2:8443 answered over plain TCP the agent's stratum1 probe: "
                        "pool: stratum1 mining.subscribe answered with a subscription"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("mining.notify"), std::string::npos) << "the answer is quoted: " << text;
    EXPECT_EQ(pool_->probes(), 1) << "one connection for the dialect that decided";

    // The web server's worker is as suspect; its peer is probed and answers
    // HTTP 400: nothing certain.
    // (Its detection may be among the lines read while waiting for the miner's.)
    if (detections_for({webbed_->pid()}, "GG-CORR-0023").empty()) {
        ASSERT_TRUE(rounds_until(agent, webbed_->pid(), "GG-CORR-0023", 30s))
            << agent.stderr_text();
    }
    for (const auto deadline = Clock::now() + 10s;
         web_->probes() == 0 && Clock::now() < deadline;) {
        std::this_thread::sleep_for(50ms);
    }
    EXPECT_EQ(web_->probes(), 1) << "probed once, stopped at the first non-pool answer";
    for (int i = 0; i < 8; ++i) {
        for (auto* child : {miner_.get(), webbed_.get()}) ASSERT_EQ(child->ask('s'), 0);
        EXPECT_FALSE(wait_for_detection(agent, webbed_->pid(), "GG-CORR-0027", 250ms)) << i;
    }
    for (const auto& line : detections_for({webbed_->pid()}, "GG-CORR-0027")) {
        ADD_FAILURE() << "a web server was taken for a pool: " << line;
    }
    // Both quiet-CPU detections, the miner's certainty, nothing else at
    // warning or above (the workers' own YARA verdict allowed).
    const pid_t miner = miner_->pid(), webbed = webbed_->pid();
    expect_whole_output(agent,
                        with_test_binary_scans({{"GG-CORR-0023", miner, "error"},
                                                {"GG-CORR-0023", webbed, "error"},
                                                {"GG-CORR-0027", miner, "critical"}},
                                               {miner, webbed}),
                        {miner, webbed});
    const std::string log = agent.stderr_text();
    EXPECT_NE(log.find("pool probe of 10.67.0.2:8444 for pid " + std::to_string(webbed_->pid()) +
                       " (gg-probedweb): not a pool: HTTP 400"),
              std::string::npos)
        << log;

    // The journal holds both probes: a replay raises GG-CORR-0027 for the
    // miner alone, and probes nothing.
    const int probes_before = pool_->probes() + web_->probes();
    const auto replayed = replay_journal(rules_);
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    const auto pids = replayed_pids(replayed, "GG-CORR-0027");
    for (const pid_t pid : pids) EXPECT_EQ(pid, miner_->pid());
    EXPECT_FALSE(pids.empty()) << replayed.stdout_text.substr(0, 4000);
    EXPECT_EQ(pool_->probes() + web_->probes(), probes_before) << "replay never probes";
}

TEST_F(AgentPoolProbeTest, a_suspected_peer_spoken_to_over_tls_is_probed_over_tls) {
    gpuguard::testing::TestPki pki;
    std::filesystem::create_directories(dir_ / "pki");
    ASSERT_TRUE(gpuguard::testing::make_test_pki(dir_ / "pki", &pki));
    start_peers_and_workers(&pki);
    if (HasFatalFailure()) return;
    // At debug level the agent says when it watches a busy process's sends.
    use_quiet_cpu_rule("verify:\n  active: true\n  timeout_ms: 2000\nlog:\n  level: debug\n");
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    for (auto* child : {miner_.get(), webbed_.get()}) ASSERT_EQ(child->ask('b'), 0);
    // Its first bytes once watched are a TLS handshake record: the probe
    // speaks TLS. Sent once the agent watches it (busy for a CPU interval).
    ASSERT_TRUE(agent.wait_for_stderr("watch list: pid " + std::to_string(miner_->pid()) +
                                          " (gg-probedminer) watched on any port while busy",
                                      time_bound(15s)))
        << agent.stderr_text();
    ASSERT_EQ(miner_->ask('h'), 0);
    const auto certain = rounds_until(agent, miner_->pid(), "GG-CORR-0027", 40s, 't');
    ASSERT_TRUE(certain) << agent.stderr_text();
    const std::string text = certain->dump();
    EXPECT_NE(text.find("10.67.0.2:8443 answered over TLS the agent's stratum1 probe: "
                        "pool: stratum1 mining.subscribe answered with a subscription"),
              std::string::npos)
        << text;
    EXPECT_EQ(tls_pool_->probes(), 1) << "the subscribe came inside a TLS session";
    // The web worker (sending TLS records too) may be judged or not yet.
    const pid_t miner = miner_->pid(), webbed = webbed_->pid();
    expect_whole_output(agent,
                        with_test_binary_scans({{"GG-CORR-0023", miner, "error"},
                                                {"GG-CORR-0027", miner, "critical"},
                                                {"GG-CORR-0023", webbed, "error", true}},
                                               {miner, webbed}),
                        {miner, webbed});
}

TEST_F(AgentPoolProbeTest, by_default_nothing_is_probed) {
    start_peers_and_workers();
    if (HasFatalFailure()) return;
    use_quiet_cpu_rule("");
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    for (auto* child : {miner_.get(), webbed_.get()}) ASSERT_EQ(child->ask('b'), 0);
    ASSERT_TRUE(rounds_until(agent, miner_->pid(), "GG-CORR-0023", 30s)) << agent.stderr_text();
    // The web server's worker is as suspect (its detection may be among the
    // lines read while waiting for the miner's): both are judged before the
    // whole output is read (the sanitizer build's slower agent had not yet
    // named it when the rounds below ended).
    if (detections_for({webbed_->pid()}, "GG-CORR-0023").empty()) {
        ASSERT_TRUE(rounds_until(agent, webbed_->pid(), "GG-CORR-0023", 30s))
            << agent.stderr_text();
    }
    // Time enough for a probe (one answers within milliseconds here).
    for (int i = 0; i < 10; ++i) {
        for (auto* child : {miner_.get(), webbed_.get()}) ASSERT_EQ(child->ask('s'), 0);
        EXPECT_FALSE(wait_for_detection(agent, miner_->pid(), "GG-CORR-0027", 250ms)) << i;
    }
    // Both workers: the quiet-CPU rule (no file writes: error), and their
    // YARA verdict allowed (forks of this test binary: with_test_binary_scans).
    const pid_t miner = miner_->pid(), webbed = webbed_->pid();
    expect_whole_output(
        agent,
        with_test_binary_scans(
            {{"GG-CORR-0023", miner, "error"}, {"GG-CORR-0023", webbed, "error"}}, {miner, webbed}),
        {miner, webbed});
    EXPECT_EQ(pool_->probes(), 0);
    EXPECT_EQ(pool_->accepted(), 1) << "the worker's own connection, no other";
    EXPECT_EQ(web_->accepted(), 1);
    EXPECT_EQ(agent.stderr_text().find("pool probe"), std::string::npos) << agent.stderr_text();
}

}  // namespace
