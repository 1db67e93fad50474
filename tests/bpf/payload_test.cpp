// Payload sampling (payload.bpf.c) end to end on loopback: a child holding
// a fake GPU node mines against a test pool in this process, speaking each
// dialect; the captured samples go through NetIntel and the correlator as in
// the agent. Also: a loopback DNS responder naming the pool, a non-mining
// JSON-RPC client, and an unwatched process that is not sampled at all.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuguard/detect/correlator.h"
#include "gpuguard/netintel/net_intel.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/sensor/sensor_probe.h"
#include "gpuguard/state/process_io.h"
#include "tests/support/child_process.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/sensor_harness.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using gpuguard::testing::run_in_child;

constexpr int kShares = 11;
constexpr long kShareIntervalNs = 100'000'000;  // the child submits every 100 ms

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

// The JSON-RPC id of a request line, as text ("" when none).
std::string id_of(const std::string& line) {
    const auto at = line.find("\"id\":");
    if (at == std::string::npos) return "";
    const auto end = line.find_first_of(",}", at);
    return line.substr(at + 5, end - at - 5);
}

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

std::vector<Dialect> dialects() {
    return {
        {"stratum1",
         "stratum1",
         "mining.subscribe",
         {R"({"id":1,"method":"mining.subscribe","params":["cgminer/4.10.0"]})",
          R"({"params":["bc1qtestwalletaddressxxxxxxxxxxxxxxxxx.rig1","x"],"id":2,"method":"mining.authorize"})"},
         [](const std::string& line) -> std::vector<std::string> {
             if (line.find("mining.subscribe") != std::string::npos) {
                 return {
                     R"({"id":1,"result":[[["mining.notify","ae68"]],"08000002",4],"error":null})",
                     R"({"id":null,"method":"mining.set_difficulty","params":[8]})",
                     R"({"id":null,"method":"mining.notify","params":["bf","4d16","01","02",[],"20000000","1d00ffff","504e86b9",true]})"};
             }
             return {R"({"id":)" + id_of(line) + R"(,"result":true,"error":null})"};
         },
         [](int i) {
             return R"({"params":["w.rig1","bf","00000001","504e86ed","b2957c02"],"id":)" +
                    std::to_string(100 + i) + R"(,"method":"mining.submit"})";
         },
         8 * 4294967296.0},
        {"cryptonote",
         "cryptonote",
         "login",
         {R"({"id":1,"jsonrpc":"2.0","method":"login","params":{"login":"44AFFq5kSiGBoZ4NMDwYtN18obc8AemS33DBLWs3H7otXft3XjrpDtQGv7SqSsaBYBb98uNbr2VBBEt7f2wfn3RVGQBEP3A","pass":"x","agent":"XMRig/6.21.0"}})"},
         [](const std::string& line) -> std::vector<std::string> {
             if (line.find("\"login\"") != std::string::npos) {
                 return {
                     R"({"id":1,"jsonrpc":"2.0","error":null,"result":{"id":"s1","job":{"blob":"0707","job_id":"4","target":"b88d0600","seed_hash":"ab"},"status":"OK"}})"};
             }
             return {R"({"id":)" + id_of(line) +
                     R"(,"jsonrpc":"2.0","error":null,"result":{"status":"OK"}})"};
         },
         [](int i) {
             return R"({"id":)" + std::to_string(100 + i) +
                    R"(,"jsonrpc":"2.0","method":"submit","params":{"id":"s1","job_id":"4","nonce":"0a0b0c0d","result":"ff"}})";
         },
         10000.0},
        {"ethereumstratum",
         "ethereumstratum",
         "mining.subscribe",
         {R"({"id":1,"method":"mining.subscribe","params":["ethminer/0.19","EthereumStratum/1.0.0"]})",
          R"({"id":2,"method":"mining.authorize","params":["0xb85150eb365e7df0941f0cf08235f987ba91506a.rig2","x"]})"},
         [](const std::string& line) -> std::vector<std::string> {
             if (line.find("mining.subscribe") != std::string::npos) {
                 return {
                     R"({"id":1,"result":[["mining.notify","ae68","EthereumStratum/1.0.0"],"080c"],"error":null})",
                     R"({"id":null,"method":"mining.set_target","params":["0000000100000000000000000000000000000000000000000000000000000000"]})"};
             }
             return {R"({"id":)" + id_of(line) + R"(,"result":true,"error":null})"};
         },
         [](int i) {
             return R"({"id":)" + std::to_string(100 + i) +
                    R"(,"method":"mining.submit","params":["rig2","bf","0x6a3c"]})";
         },
         4294967296.0},
        // ETHPROXY (getwork over a stratum connection): the work package's
        // third element is the share target, 2^224: 2^32 hashes per share.
        {"ethproxy",
         "ethproxy",
         "eth_submitLogin",
         {R"({"id":1,"jsonrpc":"2.0","method":"eth_submitLogin","params":["0xb85150eb365e7df0941f0cf08235f987ba91506a"],"worker":"rig3"})",
          R"({"id":2,"jsonrpc":"2.0","method":"eth_submitHashrate","params":["0x1dcd6500","0x59daa26581d0acd1fce254fb7e85952f4c09d0915afd33d3886cd914bc7d283c"]})",
          R"({"id":3,"jsonrpc":"2.0","method":"eth_getWork","params":[]})"},
         [](const std::string& line) -> std::vector<std::string> {
             if (line.find("eth_getWork") != std::string::npos) {
                 return {
                     R"({"id":3,"jsonrpc":"2.0","result":["0x645cf20198c2f3861e947d4f67e3ab63b7b2e24dcc9095bd9123e7b33371f6cc","0xabad1dea","0x0000000100000000000000000000000000000000000000000000000000000000"]})"};
             }
             return {R"({"id":)" + id_of(line) + R"(,"jsonrpc":"2.0","result":true})"};
         },
         [](int i) {
             return R"({"id":)" + std::to_string(100 + i) +
                    R"(,"jsonrpc":"2.0","method":"eth_submitWork","params":["0xa60b68765fccd712","0x645cf20198c2f3861e947d4f67e3ab63b7b2e24dcc9095bd9123e7b33371f6cc","0x5bb5ba1e"]})";
         },
         4294967296.0},
        // EthereumStratum/2.0.0: mining.hello first; the target comes in
        // mining.set without its leading zeros (2^224: 2^32 hashes per share).
        {"ethereumstratum2",
         "ethereumstratum",
         "mining.hello",
         {R"({"id":0,"jsonrpc":"2.0","method":"mining.hello","params":{"agent":"ethminer-0.19","host":"127.0.0.1","port":"4444","proto":"EthereumStratum/2.0.0"}})",
          R"({"id":1,"jsonrpc":"2.0","method":"mining.subscribe"})",
          R"({"id":2,"jsonrpc":"2.0","method":"mining.authorize","params":["0xb85150eb365e7df0941f0cf08235f987ba91506a.rig4","x"]})"},
         [](const std::string& line) -> std::vector<std::string> {
             if (line.find("mining.hello") != std::string::npos) {
                 return {
                     R"({"id":0,"jsonrpc":"2.0","result":{"proto":"EthereumStratum/2.0.0","encoding":"plain","resume":1,"timeout":30,"maxerrors":5,"node":"test"}})"};
             }
             if (line.find("mining.subscribe") != std::string::npos) {
                 return {R"({"id":1,"jsonrpc":"2.0","result":"s-12345"})"};
             }
             if (line.find("mining.authorize") != std::string::npos) {
                 return {
                     R"({"id":2,"jsonrpc":"2.0","result":"w1"})",
                     R"({"jsonrpc":"2.0","method":"mining.set","params":{"epoch":"dc","target":"0x100000000000000000000000000000000000000000000000000000000","algo":"ethash","extranonce":"af4c"}})",
                     R"({"jsonrpc":"2.0","method":"mining.notify","params":["bf0488aa","0x645cf20198c2f3861e947d4f67e3ab63b7b2e24dcc9095bd9123e7b33371f6cc",false]})"};
             }
             return {R"({"id":)" + id_of(line) + R"(,"jsonrpc":"2.0"})"};
         },
         [](int i) {
             return R"({"id":)" + std::to_string(100 + i) +
                    R"(,"jsonrpc":"2.0","method":"mining.submit","params":["bf0488aa","0xa60b68765fccd712","w1"]})";
         },
         4294967296.0},
    };
}

// Child-safe helpers: only system calls.
void sleep_ns(long ns) {
    timespec delay{ns / 1'000'000'000, ns % 1'000'000'000};
    while (nanosleep(&delay, &delay) != 0) {
    }
}

bool write_all(int fd, const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = write(fd, text.data() + done, text.size() - done);
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

// Reads until `lines` newlines arrived (or 2 s passed).
bool read_lines(int fd, int lines) {
    char buffer[4096];
    int seen = 0;
    pollfd wait{fd, POLLIN, 0};
    while (seen < lines) {
        if (poll(&wait, 1, 2000) <= 0) return false;
        const ssize_t n = read(fd, buffer, sizeof(buffer));
        if (n <= 0) return false;
        seen += static_cast<int>(std::count(buffer, buffer + n, '\n'));
    }
    return true;
}

// Reads whatever has arrived, without waiting.
void drain_input(int fd) {
    char buffer[4096];
    pollfd wait{fd, POLLIN, 0};
    while (poll(&wait, 1, 0) > 0 && read(fd, buffer, sizeof(buffer)) > 0) {
    }
}

// A free loopback port of `type` (SOCK_STREAM, SOCK_DGRAM): nobody listens
// on it, though a datagram sent there still leaves the sender.
uint16_t free_loopback_port(int type = SOCK_STREAM) {
    const int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(in);
    bind(fd, reinterpret_cast<sockaddr*>(&in), length);
    getsockname(fd, reinterpret_cast<sockaddr*>(&in), &length);
    close(fd);
    return ntohs(in.sin_port);
}

int connect_v4(const char* address, uint16_t port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    inet_pton(AF_INET, address, &in.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&in), sizeof(in)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// NetIntel, process table and correlator, as the agent chains them.
class Pipeline {
  public:
    Pipeline() : intel_(NetIntelOptions{0, 4096, 16, 16384}) {
        ProcessTableOptions options;
        options.read_host = false;
        table_ = std::make_unique<ProcessTable>(
            options, [](uint32_t major, uint32_t minor) { return major == 1 && minor == 3; });
        auto pack = rules::compile_builtin_pack();
        EXPECT_TRUE(pack) << pack.error().message;
        auto set = rules::RuleSet::build(*pack, {});
        EXPECT_TRUE(set) << set.error().message;
        auto correlation = rules::builtin_correlation_rules();
        EXPECT_TRUE(correlation) << correlation.error().message;
        auto created = Correlator::create(
            *correlation, std::make_shared<const rules::RuleSet>(std::move(*set)), *table_);
        EXPECT_TRUE(created) << created.error().message;
        correlator_ = std::move(*created);
    }

    void run(const std::vector<Event>& events) {
        for (Event event : events) {
            std::vector<Event> derived;
            intel_.process(event, derived);
            judge(event);
            for (const auto& extra : derived) judge(extra);
        }
    }

    std::vector<const Event*> of_pid(uint32_t pid) const {
        std::vector<const Event*> out;
        for (const auto& event : judged_) {
            if (event.task.pid == pid) out.push_back(&event);
        }
        return out;
    }
    bool fired(const std::string& rule, uint32_t pid) const {
        return std::any_of(detections_.begin(), detections_.end(), [&](const Detection& d) {
            return d.rule_id == rule && d.process.pid == pid;
        });
    }
    const std::vector<Detection>& detections() const { return detections_; }

  private:
    void judge(const Event& event) {
        judged_.push_back(event);
        table_->apply(event);
        correlator_->observe(event, detections_);
    }

    NetIntel intel_;
    std::unique_ptr<ProcessTable> table_;
    std::unique_ptr<Correlator> correlator_;
    std::vector<Event> judged_;
    std::vector<Detection> detections_;
};

// Run once per hook variant (bpf/payload.bpf.c): the socket-layer tracepoints
// where the kernel has them, and the syscall tracepoints.
class PayloadTracingTest : public ::testing::TestWithParam<bool> {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        // The socket-layer variant needs sock_send_length/sock_recv_length
        // (6.3+); older kernels run the syscall variant only.
        const FeatureStatus socket_layer = probe_socket_layer("");
        if (!GetParam() && !socket_layer.available) {
            GTEST_SKIP() << "no socket-layer tracepoints: " << socket_layer.detail;
        }
        node_ = (dir_ / "gpu0").string();
        ASSERT_EQ(mknod(node_.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
        SensorOptions options;
        options.config.extra_gpu_devices = {GpuDeviceNumber{1, 7, "test"}};
        options.config.connect_loopback = true;  // the tests' traffic is loopback only
        options.config.watched_ports = {};
        options.config.payload_syscall_hooks = GetParam();
        const auto error = harness_.open(options);
        ASSERT_FALSE(error) << *error;
        const auto hooks = harness_.sensor().attached_hooks();
        const bool syscall_hooks =
            std::find(hooks.begin(), hooks.end(), "syscalls/sys_enter_write") != hooks.end();
        const bool socket_hooks =
            std::find(hooks.begin(), hooks.end(), "tp_btf/sock_send_length") != hooks.end();
        ASSERT_TRUE(syscall_hooks != socket_hooks);
        EXPECT_EQ(socket_hooks, !GetParam());
    }

    // The child: open the GPU node, connect, log in, mine kShares shares.
    pid_t mine(const Dialect& dialect, uint16_t port) {
        std::vector<std::string> shares;
        for (int i = 0; i < kShares; ++i) shares.push_back(dialect.submit(i) + "\n");
        std::vector<std::string> login;
        for (const auto& line : dialect.login) login.push_back(line + "\n");
        int exit_code = -1;
        const pid_t child = run_in_child(
            "gg-miner",
            [&] {
                const int gpu = open(node_.c_str(), O_RDWR);
                if (gpu < 0) return 1;
                const int fd = connect_v4("127.0.0.1", port);
                if (fd < 0) return 2;
                for (const auto& line : login) {
                    if (!write_all(fd, line)) return 3;
                    if (!read_lines(fd, 1)) return 4;
                }
                sleep_ns(20'000'000);  // the rest of the pool's greeting
                drain_input(fd);       // so each share's answer is read before the next
                for (const auto& share : shares) {
                    if (!write_all(fd, share) || !read_lines(fd, 1)) return 5;
                    sleep_ns(kShareIntervalNs);
                }
                close(fd);
                return 0;
            },
            &exit_code);
        EXPECT_EQ(exit_code, 0) << dialect.name;
        return child;
    }

    gpuguard::testing::TempDir dir_{"gg-payload"};
    std::string node_;
    gpuguard::testing::SensorHarness harness_;
};

TEST_P(PayloadTracingTest, each_dialect_is_recognised_in_one_round_trip_with_its_hash_rate) {
    for (const auto& dialect : dialects()) {
        SCOPED_TRACE(dialect.name);
        TestServer pool("127.0.0.1", dialect.pool);
        ASSERT_TRUE(pool.ok());
        const pid_t child = mine(dialect, pool.port());
        const auto samples = harness_.of<NetPayload>(child, dialect.login.size() + kShares);
        ASSERT_GE(samples.size(), dialect.login.size() + kShares);
        EXPECT_EQ(samples.front().second.remote_port, pool.port());
        EXPECT_EQ(samples.front().second.remote_address, "127.0.0.1");

        Pipeline pipeline;
        pipeline.run(harness_.events());
        std::vector<Stratum> sessions;
        for (const Event* event : pipeline.of_pid(child)) {
            if (const auto* stratum = std::get_if<Stratum>(&event->data))
                sessions.push_back(*stratum);
        }
        ASSERT_FALSE(sessions.empty());
        // Recognised from the miner's first request, before any answer.
        EXPECT_EQ(sessions.front().methods.size(), 1u);
        EXPECT_EQ(sessions.front().methods.front(), dialect.first_method);
        const Stratum& last = sessions.back();
        EXPECT_EQ(last.protocol, dialect.protocol);
        EXPECT_EQ(last.shares_accepted, static_cast<uint64_t>(kShares));
        EXPECT_EQ(last.pool_port, pool.port());
        EXPECT_EQ(last.shares_submitted, static_cast<uint64_t>(kShares));
        EXPECT_DOUBLE_EQ(last.share_hashes, dialect.share_hashes);
        ASSERT_TRUE(last.hash_rate);
        const double truth = dialect.share_hashes / (kShareIntervalNs / 1e9);
        std::printf("%-16s hash rate %.6g H/s, truth %.6g H/s, error %+.2f %%\n", dialect.name,
                    *last.hash_rate, truth, (*last.hash_rate - truth) / truth * 100);
        EXPECT_NEAR(*last.hash_rate, truth, truth * 0.10)
            << "error " << (*last.hash_rate - truth) / truth * 100 << "%";
        EXPECT_TRUE(pipeline.fired("GG-CORR-0003", static_cast<uint32_t>(child)));
        harness_.events().clear();
    }
}

// Reads exactly `size` bytes (2 s at most).
bool read_exact(int fd, char* buffer, size_t size) {
    size_t done = 0;
    pollfd wait{fd, POLLIN, 0};
    while (done < size) {
        if (poll(&wait, 1, 2000) <= 0) return false;
        const ssize_t n = read(fd, buffer + done, size - done);
        if (n <= 0) return false;
        done += static_cast<size_t>(n);
    }
    return true;
}

// Stratum v2: the Noise NX handshake (64-byte client act, 170-byte server
// act), then encrypted frames on a connection that stays open. The bytes are
// random-looking; only the sizes and the connection's life tell.
TEST_P(PayloadTracingTest, stratum_v2_handshake_on_a_long_lived_connection_is_detected) {
    const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(listener, 0);
    sockaddr_in in{};
    in.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
    socklen_t length = sizeof(in);
    ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&in), length), 0);
    ASSERT_EQ(listen(listener, 1), 0);
    ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&in), &length), 0);
    const uint16_t port = ntohs(in.sin_port);
    std::atomic<bool> served{false};
    std::thread pool([&] {
        pollfd wait{listener, POLLIN, 0};
        if (poll(&wait, 1, 5000) <= 0) return;
        const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) return;
        char buffer[256];
        const std::string server_act(170, '\x5a'), frame(48, '\x6b');
        // Handshake, then SetupConnection and its answer, then a job.
        if (read_exact(fd, buffer, 64) && write_all(fd, server_act) && read_exact(fd, buffer, 98) &&
            write_all(fd, frame) && write_all(fd, frame)) {
            served = true;
        }
        while (read(fd, buffer, sizeof(buffer)) > 0) {
        }
        close(fd);
    });
    int exit_code = -1;
    const pid_t child = run_in_child(
        "gg-sv2-miner",
        [&] {
            if (open(node_.c_str(), O_RDWR) < 0) return 1;
            const int fd = connect_v4("127.0.0.1", port);
            if (fd < 0) return 2;
            char buffer[256];
            if (!write_all(fd, std::string(64, '\x11')) || !read_exact(fd, buffer, 170)) return 3;
            if (!write_all(fd, std::string(98, '\x22')) || !read_exact(fd, buffer, 96)) return 4;
            sleep_ns(200'000'000);  // mining: the connection stays open
            close(fd);
            return 0;
        },
        &exit_code);
    pool.join();
    close(listener);
    ASSERT_EQ(exit_code, 0);
    EXPECT_TRUE(served);
    const auto samples = harness_.of<NetPayload>(child, 3);
    ASSERT_GE(samples.size(), 3u);
    EXPECT_EQ(samples.front().second.length, 64u);

    Pipeline pipeline;
    pipeline.run(harness_.events());
    std::vector<Stratum> sessions;
    for (const Event* event : pipeline.of_pid(child)) {
        if (const auto* stratum = std::get_if<Stratum>(&event->data)) sessions.push_back(*stratum);
    }
    ASSERT_FALSE(sessions.empty());
    EXPECT_EQ(sessions.front().protocol, "stratum2");
    EXPECT_EQ(sessions.front().pool_port, port);
    ASSERT_TRUE(pipeline.fired("GG-CORR-0003", static_cast<uint32_t>(child)));
    const auto detection =
        std::find_if(pipeline.detections().begin(), pipeline.detections().end(),
                     [&](const Detection& d) { return d.rule_id == "GG-CORR-0003"; });
    EXPECT_NE(std::find(detection->signature_ids.begin(), detection->signature_ids.end(),
                        "GG-STRATUM-0023"),
              detection->signature_ids.end());
    ASSERT_TRUE(detection->peer);
    EXPECT_EQ(detection->peer->protocol, "stratum2");
}

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

std::string dns_query(const std::string& name) {
    std::string out = {0x42, 0x42, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    size_t start = 0;
    while (start <= name.size()) {
        size_t end = name.find('.', start);
        if (end == std::string::npos) end = name.size();
        out += static_cast<char>(end - start);
        out += name.substr(start, end - start);
        start = end + 1;
    }
    out += std::string{0, 0, 1, 0, 1};
    return out;
}

TEST_P(PayloadTracingTest, observed_dns_answer_names_the_connect_and_the_pool_domain_rule_fires) {
    DnsResponder responder("pool.supportxmr.com", {127, 0, 0, 77});
    ASSERT_TRUE(responder.ok());
    TestServer pool("127.0.0.77", [](const std::string&) { return std::vector<std::string>{}; });
    ASSERT_TRUE(pool.ok());
    const std::string query = dns_query("pool.supportxmr.com");
    const uint16_t port = pool.port();
    int exit_code = -1;
    const pid_t child = run_in_child(
        "gg-resolver",
        [&] {
            if (open(node_.c_str(), O_RDWR) < 0) return 1;
            // As a stub resolver does: an unconnected UDP socket, sendto/recvfrom.
            const int udp = socket(AF_INET, SOCK_DGRAM, 0);
            sockaddr_in server{};
            server.sin_family = AF_INET;
            server.sin_port = htons(53);
            inet_pton(AF_INET, "127.53.53.53", &server.sin_addr);
            if (sendto(udp, query.data(), query.size(), 0, reinterpret_cast<sockaddr*>(&server),
                       sizeof(server)) < 0) {
                return 2;
            }
            char answer[512];
            sockaddr_in from{};
            socklen_t length = sizeof(from);
            pollfd wait{udp, POLLIN, 0};
            if (poll(&wait, 1, 2000) <= 0) return 3;
            if (recvfrom(udp, answer, sizeof(answer), 0, reinterpret_cast<sockaddr*>(&from),
                         &length) < 12) {
                return 4;
            }
            close(udp);
            const int fd = connect_v4("127.0.0.77", port);
            if (fd < 0) return 5;
            close(fd);
            return 0;
        },
        &exit_code);
    ASSERT_EQ(exit_code, 0);
    const auto connects = harness_.of<Connect>(child, 1);
    ASSERT_EQ(connects.size(), 1u);
    const auto answers = harness_.matching<NetPayload>(child);
    ASSERT_EQ(answers.size(), 1u);
    EXPECT_TRUE(answers[0].second.dns);
    EXPECT_EQ(answers[0].second.remote_port, 53);
    EXPECT_EQ(answers[0].second.remote_address, "127.53.53.53");

    Pipeline pipeline;
    pipeline.run(harness_.events());
    const auto events = pipeline.of_pid(child);
    const auto connect = std::find_if(events.begin(), events.end(), [](const Event* event) {
        return std::holds_alternative<Connect>(event->data);
    });
    ASSERT_NE(connect, events.end());
    EXPECT_EQ(std::get<Connect>((*connect)->data).domain, "pool.supportxmr.com");
    EXPECT_TRUE(pipeline.fired("GG-CORR-0002", static_cast<uint32_t>(child)));
}

TEST_P(PayloadTracingTest, non_mining_json_rpc_is_sampled_but_raises_nothing) {
    TestServer node("127.0.0.1", [](const std::string& line) {
        return std::vector<std::string>{R"({"jsonrpc":"2.0","id":)" + id_of(line) +
                                        R"(,"result":"0x0234c8a3397aab58"})"};
    });
    ASSERT_TRUE(node.ok());
    const std::string request =
        R"({"jsonrpc":"2.0","method":"eth_getBalance","params":["0xb85150eb365e7df0941f0cf08235f987ba91506a","latest"],"id":1})"
        "\n";
    const uint16_t port = node.port();
    int exit_code = -1;
    const pid_t child = run_in_child(
        "gg-wallet",
        [&] {
            if (open(node_.c_str(), O_RDWR) < 0) return 1;
            const int fd = connect_v4("127.0.0.1", port);
            if (fd < 0) return 2;
            for (int i = 0; i < 3; ++i) {
                if (!write_all(fd, request) || !read_lines(fd, 1)) return 3;
            }
            close(fd);
            return 0;
        },
        &exit_code);
    ASSERT_EQ(exit_code, 0);
    const auto samples = harness_.of<NetPayload>(child, 6);
    EXPECT_EQ(samples.size(), 6u);  // watched (GPU holder): sampled both ways
    Pipeline pipeline;
    pipeline.run(harness_.events());
    for (const Event* event : pipeline.of_pid(child)) {
        EXPECT_FALSE(std::holds_alternative<Stratum>(event->data));
    }
    EXPECT_FALSE(pipeline.fired("GG-CORR-0003", static_cast<uint32_t>(child)));
}

TEST_P(PayloadTracingTest, unwatched_processes_are_not_sampled_and_flows_are_bounded) {
    TestServer pool("127.0.0.1", [](const std::string& line) {
        return std::vector<std::string>{R"({"id":)" + id_of(line) + R"(,"result":true})"};
    });
    ASSERT_TRUE(pool.ok());
    const uint16_t port = pool.port();
    const std::string line = R"({"id":7,"method":"mining.subscribe","params":[]})"
                             "\n";
    const std::string binary(40, 'B');  // not JSON: the default budget applies
    int exit_code = -1;
    // No GPU, no watched port: nothing at all.
    const pid_t stranger = run_in_child(
        "gg-stranger",
        [&] {
            const int fd = connect_v4("127.0.0.1", port);
            if (fd < 0) return 2;
            if (!write_all(fd, line) || !read_lines(fd, 1)) return 3;
            close(fd);
            return 0;
        },
        &exit_code);
    ASSERT_EQ(exit_code, 0);
    harness_.drain(std::chrono::milliseconds(300));
    EXPECT_TRUE(harness_.matching<NetPayload>(stranger).empty());

    // A GPU holder's non-JSON flow: only the first payload_messages (4) writes.
    TestServer sink("127.0.0.1", [](const std::string&) { return std::vector<std::string>{}; });
    ASSERT_TRUE(sink.ok());
    const uint16_t sink_port = sink.port();
    const pid_t holder = run_in_child(
        "gg-holder",
        [&] {
            if (open(node_.c_str(), O_RDWR) < 0) return 1;
            const int fd = connect_v4("127.0.0.1", sink_port);
            if (fd < 0) return 2;
            for (int i = 0; i < 20; ++i) {
                if (!write_all(fd, binary)) return 3;
            }
            close(fd);
            return 0;
        },
        &exit_code);
    ASSERT_EQ(exit_code, 0);
    const auto samples = harness_.of<NetPayload>(holder, 4);
    EXPECT_EQ(samples.size(), 4u);
}

// Send accounting (GG-CORR-0009's quiet_io): every send of a GPU process on
// an INET socket adds to its gpu_tgids entry, past the sampling budget, TCP
// and UDP alike; a process is counted only from its first GPU open; the
// agent's ProcessIoSampler reads the count with /proc/PID/io's write_bytes.
TEST_P(PayloadTracingTest, gpu_process_sends_and_file_writes_are_counted) {
    TestServer sink("127.0.0.1", [](const std::string&) { return std::vector<std::string>{}; });
    ASSERT_TRUE(sink.ok());
    const uint16_t port = sink.port();
    const uint16_t udp_port = free_loopback_port(SOCK_DGRAM);
    const gpuguard::testing::DiskScratchFile file("gg-quiet");
    const auto child = gpuguard::testing::start_io_worker({.comm = "gg-quiet",
                                                           .gpu_node = node_,
                                                           .file = file.path(),
                                                           .tcp_port = port,
                                                           .udp_port = udp_port});
    Sensor& sensor = harness_.sensor();
    using gpuguard::testing::kIoDatagramBytes;
    using gpuguard::testing::kIoFileBytes;
    using gpuguard::testing::kIoMessageBytes;
    ASSERT_EQ(child->ask('c'), 0);
    ASSERT_EQ(child->ask('s'), 0);
    const auto pid = static_cast<uint32_t>(child->pid());
    EXPECT_EQ(sensor.net_sends(pid), std::nullopt) << "not a GPU process yet";
    ASSERT_EQ(child->ask('g'), 0);
    for (int i = 0; i < 9; ++i) ASSERT_EQ(child->ask('s'), 0);  // past the 4-message budget
    ASSERT_EQ(child->ask('u'), 0);
    const auto sends = sensor.net_sends(pid);
    ASSERT_TRUE(sends);
    EXPECT_EQ(sends->calls, 10u);
    EXPECT_EQ(sends->bytes, 9 * kIoMessageBytes + kIoDatagramBytes);

    ProcessIoSampler io("/proc", [&](uint32_t of) { return sensor.net_sends(of); });
    const ProcessIo before = io.read(pid);
    ASSERT_TRUE(before.file_write_bytes) << "/proc/" << pid << "/io";
    ASSERT_EQ(child->ask('f'), 0);
    const ProcessIo after = io.read(pid);
    ASSERT_TRUE(after.file_write_bytes);
    EXPECT_GE(*after.file_write_bytes - *before.file_write_bytes, kIoFileBytes);
    EXPECT_EQ(after.net_sends, 10u);
    EXPECT_EQ(after.net_send_bytes, 9 * kIoMessageBytes + kIoDatagramBytes);
}

// GET `path` from 127.0.0.1:`port` (HTTP/1.0, 5 s at most): the body, "" on failure.
std::string http_get(uint16_t port, const std::string& path) {
    const int fd = connect_v4("127.0.0.1", port);
    if (fd < 0) return "";
    std::string response;
    if (write_all(fd, "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")) {
        char buffer[65536];
        pollfd wait{fd, POLLIN, 0};
        while (poll(&wait, 1, 5000) > 0) {
            const ssize_t n = read(fd, buffer, sizeof(buffer));
            if (n <= 0) break;
            response.append(buffer, static_cast<size_t>(n));
        }
    }
    close(fd);
    const auto body = response.find("\r\n\r\n");
    return body == std::string::npos ? "" : response.substr(body + 4);
}

// The whole agent (`gpuguard run`): a miner holding a fake GPU node mines
// against a loopback pool; the agent raises GG-CORR-0003, and `gpuguard ps`
// and /metrics show the session's hash rate within 10 % of the truth while
// the miner is still connected.
TEST(StratumAgentTest, live_agent_detects_the_session_and_ps_and_metrics_show_its_hash_rate) {
    GG_REQUIRE_PRIVILEGED();
    using namespace std::chrono_literals;
    gpuguard::testing::TempDir dir("gg-stratum-agent");
    const std::string node = (dir / "gpu0").string();
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    const auto socket_path = dir / "control.sock";
    const uint16_t metrics_port = free_loopback_port();
    const auto config = dir / "gpuguard.yaml";
    std::ofstream(config) << "sensor:\n  extra_gpu_devices: [\"1:7\"]\n  connect_loopback: true\n"
                          << "control:\n  socket: " << socket_path.string() << "\n"
                          << "metrics:\n  enabled: true\n  listen: 127.0.0.1\n  port: "
                          << metrics_port << "\n"
                          << "journal:\n  enabled: false\n";
    gpuguard::testing::Subprocess agent(
        {GPUGUARD_BINARY, "run", "--config", config.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    const Dialect dialect = dialects().front();  // stratum1, difficulty 8
    const std::string wallet = "bc1qtestwalletaddressxxxxxxxxxxxxxxxxx";
    TestServer pool("127.0.0.1", dialect.pool);
    ASSERT_TRUE(pool.ok());
    const uint16_t port = pool.port();
    std::vector<std::string> lines;
    for (const auto& line : dialect.login) lines.push_back(line + "\n");
    for (int i = 0; i < kShares; ++i) lines.push_back(dialect.submit(i) + "\n");
    int done[2], timing[2];
    ASSERT_EQ(pipe2(done, O_CLOEXEC), 0);
    ASSERT_EQ(pipe2(timing, O_CLOEXEC), 0);
    const pid_t miner = fork();
    ASSERT_GE(miner, 0);
    if (miner == 0) {
        prctl(PR_SET_NAME, "gg-live-miner");
        close(done[1]);
        close(timing[0]);
        const int gpu = open(node.c_str(), O_RDWR);
        const int fd = gpu < 0 ? -1 : connect_v4("127.0.0.1", port);
        if (fd < 0) _exit(2);
        timespec first{}, last{};
        for (size_t i = 0; i < lines.size(); ++i) {
            if (i == dialect.login.size()) clock_gettime(CLOCK_MONOTONIC, &first);
            if (i + 1 == lines.size()) clock_gettime(CLOCK_MONOTONIC, &last);
            if (!write_all(fd, lines[i]) || !read_lines(fd, 1)) _exit(3);
            if (i + 1 == dialect.login.size()) {
                sleep_ns(20'000'000);
                drain_input(fd);
            }
            if (i >= dialect.login.size()) sleep_ns(kShareIntervalNs);
        }
        // How long the shares really took (the machine may be loaded).
        const int64_t elapsed =
            (last.tv_sec - first.tv_sec) * 1'000'000'000ll + (last.tv_nsec - first.tv_nsec);
        if (write(timing[1], &elapsed, sizeof(elapsed)) != sizeof(elapsed)) _exit(4);
        // Connected until the test has looked (20 s at most).
        pollfd wait{done[0], POLLIN, 0};
        poll(&wait, 1, 20000);
        _exit(0);
    }
    gpuguard::testing::ChildReaper reaper(miner);
    close(done[0]);
    close(timing[1]);

    // The detection, from the agent's own output.
    std::optional<nlohmann::json> detection;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!detection && std::chrono::steady_clock::now() < deadline) {
        const auto line = agent.read_stdout_line(200ms);
        if (!line) continue;
        const auto parsed = nlohmann::json::parse(*line, nullptr, false);
        if (parsed.is_object() && parsed["rule"]["id"] == "GG-CORR-0003" &&
            parsed["process"]["pid"] == miner) {
            detection = parsed;
        }
    }
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["destination"]["port"], port);
    EXPECT_EQ(detection->dump().find(wallet), std::string::npos) << "wallet in the alert";

    // The truth: the hashes the shares after the first stand for over the
    // time the miner took to submit them, by its own clock.
    int64_t elapsed_ns = 0;
    pollfd timed{timing[0], POLLIN, 0};
    ASSERT_GT(poll(&timed, 1, 15000), 0);
    ASSERT_EQ(read(timing[0], &elapsed_ns, sizeof(elapsed_ns)),
              static_cast<ssize_t>(sizeof(elapsed_ns)));
    close(timing[0]);
    const double truth = dialect.share_hashes * (kShares - 1) / (elapsed_ns / 1e9);

    // ps --json: the process's session, once all shares are in.
    nlohmann::json session;
    const auto ps_deadline = std::chrono::steady_clock::now() + 15s;
    while (std::chrono::steady_clock::now() < ps_deadline) {
        const auto ps = gpuguard::testing::run_command(
            {GPUGUARD_BINARY, "ps", "--socket", socket_path.string(), "--json"});
        ASSERT_EQ(ps.exit_code, 0) << ps.stderr_text;
        for (const auto& process : nlohmann::json::parse(ps.stdout_text)) {
            if (process["pid"] == miner && !process["stratum_sessions"].empty()) {
                session = process["stratum_sessions"][0];
            }
        }
        if (!session.is_null() && session["shares_submitted"] == kShares) break;
        std::this_thread::sleep_for(200ms);
    }
    ASSERT_FALSE(session.is_null()) << agent.stderr_text();
    EXPECT_EQ(session["protocol"], "stratum1");
    EXPECT_EQ(session["pool_address"], "127.0.0.1");
    EXPECT_EQ(session["pool_port"], port);
    EXPECT_EQ(session["shares_submitted"], kShares);
    EXPECT_EQ(session["shares_accepted"], kShares);
    ASSERT_TRUE(session["hash_rate"].is_number()) << session.dump();
    const double ps_rate = session["hash_rate"].get<double>();
    std::printf("ps hash rate %.6g H/s, truth %.6g H/s, error %+.2f %%\n", ps_rate, truth,
                (ps_rate - truth) / truth * 100);
    EXPECT_NEAR(ps_rate, truth, truth * 0.10);
    EXPECT_EQ(session.dump().find(wallet), std::string::npos) << "wallet in ps";
    const auto table =
        gpuguard::testing::run_command({GPUGUARD_BINARY, "ps", "--socket", socket_path.string()});
    EXPECT_NE(table.stdout_text.find("mining: stratum1 pool 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << table.stdout_text;
    EXPECT_NE(table.stdout_text.find("shares 11 sent 11 accepted 0 rejected, hash rate "),
              std::string::npos)
        << table.stdout_text;

    // /metrics: the same session's gauge.
    const std::string metrics = http_get(metrics_port, "/metrics");
    const std::string prefix = "gpuguard_stratum_hash_rate{pid=\"" + std::to_string(miner) + "\"";
    const auto at = metrics.find(prefix);
    ASSERT_NE(at, std::string::npos) << metrics.substr(0, 2000);
    const auto line_end = metrics.find('\n', at);
    const std::string line = metrics.substr(at, line_end - at);
    EXPECT_NE(line.find("protocol=\"stratum1\""), std::string::npos) << line;
    const double metrics_rate = std::strtod(line.substr(line.rfind(' ') + 1).c_str(), nullptr);
    EXPECT_NEAR(metrics_rate, truth, truth * 0.10) << line;

    close(done[1]);  // the miner disconnects and exits
    int status = 0;
    EXPECT_EQ(waitpid(miner, &status, 0), miner);
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

INSTANTIATE_TEST_SUITE_P(Hooks, PayloadTracingTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                             return info.param ? "syscall_tracepoints" : "socket_tracepoints";
                         });

// One pipeline (gpuguard/detect/pipeline.h): the live agent's detections of
// a real Stratum session come back byte for byte (wall-clock fields set
// aside) from `gpuguard replay` of (1) the events it printed with
// --print-events --event-types all, (2) the same stream without the stratum
// events it derived, so that replay must derive them from the raw payload
// samples itself, and (3) its journal.
TEST(StratumAgentTest, replay_of_the_raw_events_and_of_the_journal_gives_the_live_detections) {
    GG_REQUIRE_PRIVILEGED();
    using namespace std::chrono_literals;
    gpuguard::testing::TempDir dir("gg-one-pipeline");
    const std::string node = (dir / "gpu0").string();
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    const auto journal_dir = dir / "journal";
    const auto config = dir / "gpuguard.yaml";
    std::ofstream(config) << "sensor:\n  extra_gpu_devices: [\"1:7\"]\n  connect_loopback: true\n"
                          << "journal:\n  enabled: true\n  dir: " << journal_dir.string() << "\n"
                          << "  fsync_interval_ms: 50\n";
    gpuguard::testing::Subprocess agent({GPUGUARD_BINARY, "run", "--config", config.string(),
                                         "--json", "--print-events", "--event-types", "all"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    const Dialect dialect = dialects().front();
    TestServer pool("127.0.0.1", dialect.pool);
    ASSERT_TRUE(pool.ok());
    const uint16_t port = pool.port();
    std::vector<std::string> lines;
    for (const auto& line : dialect.login) lines.push_back(line + "\n");
    for (int i = 0; i < 4; ++i) lines.push_back(dialect.submit(i) + "\n");
    const pid_t miner = fork();
    ASSERT_GE(miner, 0);
    if (miner == 0) {
        prctl(PR_SET_NAME, "gg-raw-miner");
        const int gpu = open(node.c_str(), O_RDWR);
        const int fd = gpu < 0 ? -1 : connect_v4("127.0.0.1", port);
        if (fd < 0) _exit(2);
        for (size_t i = 0; i < lines.size(); ++i) {
            if (!write_all(fd, lines[i]) || !read_lines(fd, 1)) _exit(3);
            if (i + 1 == dialect.login.size()) {
                sleep_ns(20'000'000);
                drain_input(fd);
            }
        }
        _exit(0);
    }
    gpuguard::testing::ChildReaper reaper(miner);

    // Everything the agent prints until the session was judged and the miner is gone.
    std::vector<std::string> printed;
    bool judged = false;
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (!judged && std::chrono::steady_clock::now() < deadline) {
        const auto line = agent.read_stdout_line(200ms);
        if (!line) continue;
        printed.push_back(*line);
        const auto parsed = nlohmann::json::parse(*line, nullptr, false);
        judged = parsed.is_object() && parsed.contains("rule") &&
                 parsed["rule"]["id"] == "GG-CORR-0003" && parsed["process"]["pid"] == miner;
    }
    ASSERT_TRUE(judged) << agent.stderr_text();
    int status = 0;
    ASSERT_EQ(waitpid(miner, &status, 0), miner);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    std::this_thread::sleep_for(500ms);  // the exit and anything it raises
    while (auto line = agent.read_stdout_line(200ms)) printed.push_back(*line);
    ASSERT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();

    auto without_clock = [](const std::string& line) {
        static const std::regex wall_clock(R"re("(@timestamp|created)":"[^"]*")re");
        return std::regex_replace(line, wall_clock, "\"$1\":\"<wall clock>\"");
    };
    auto of_miner = [&](const std::string& text) {
        std::vector<std::string> out;
        std::istringstream in(text);
        for (std::string line; std::getline(in, line);) {
            const auto parsed = nlohmann::json::parse(line, nullptr, false);
            if (parsed.is_object() && parsed.contains("rule") && parsed["process"]["pid"] == miner)
                out.push_back(without_clock(line));
        }
        return out;
    };
    std::string live_text;
    std::ofstream all_events(dir / "events.jsonl");
    std::ofstream raw_events(dir / "raw.jsonl");
    size_t stratum_lines = 0, payload_lines = 0;
    for (const auto& line : printed) {
        const auto parsed = nlohmann::json::parse(line, nullptr, false);
        ASSERT_TRUE(parsed.is_object()) << line;
        if (parsed.contains("rule")) {
            live_text += line + "\n";
            continue;
        }
        all_events << line << "\n";
        if (parsed["type"] == "stratum") {
            ++stratum_lines;
            continue;
        }
        if (parsed["type"] == "net_payload" && parsed["process"]["pid"] == miner) ++payload_lines;
        raw_events << line << "\n";
    }
    all_events.close();
    raw_events.close();
    const auto live = of_miner(live_text);
    ASSERT_FALSE(live.empty());
    ASSERT_GT(stratum_lines, 0u) << "the agent derived no stratum event";
    ASSERT_GT(payload_lines, 0u) << "no payload sample of the miner was printed";

    for (const auto& source : {dir / "events.jsonl", dir / "raw.jsonl", journal_dir}) {
        const auto replayed = gpuguard::testing::run_command(
            {GPUGUARD_BINARY, "replay", "--stats", source.string()}, 60s);
        ASSERT_EQ(replayed.exit_code, 0) << source << ": " << replayed.stderr_text;
        EXPECT_EQ(of_miner(replayed.stdout_text), live) << source << "\n" << replayed.stderr_text;
        if (source == dir / "raw.jsonl") {
            EXPECT_NE(replayed.stderr_text.find(" stratum events derived from payloads"),
                      std::string::npos)
                << replayed.stderr_text;
            EXPECT_EQ(replayed.stderr_text.find(" 0 stratum events derived"), std::string::npos)
                << "replay of raw events derived nothing: " << replayed.stderr_text;
        }
    }
}

}  // namespace
}  // namespace gpuguard::agent
