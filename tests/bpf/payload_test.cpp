// Payload sampling (payload.bpf.c) end to end on loopback: a child holding
// a fake GPU node mines against a test pool in this process, speaking each
// dialect; the captured samples go through NetIntel and the correlator as in
// the agent. Also: a loopback DNS responder naming the pool, a non-mining
// JSON-RPC client, and an unwatched process that is not sampled at all.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
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
#include "tests/bpf/stratum_test_pool.h"
#include "tests/support/child_process.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/sensor_harness.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using gpuguard::testing::connect_v4;
using gpuguard::testing::Dialect;
using gpuguard::testing::dialects;
using gpuguard::testing::dns_query;
using gpuguard::testing::DnsResponder;
using gpuguard::testing::drain_input;
using gpuguard::testing::free_loopback_port;
using gpuguard::testing::id_of;
using gpuguard::testing::kShareIntervalNs;
using gpuguard::testing::kShares;
using gpuguard::testing::read_lines;
using gpuguard::testing::run_in_child;
using gpuguard::testing::sleep_ns;
using gpuguard::testing::TestServer;
using gpuguard::testing::write_all;

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
        // (6.3+). The probe loads programs on them; the kernel's own list of
        // tracepoints (tracefs) says whether it has them, and the probe must
        // agree. Where they are missing, the sensor asked for the socket
        // layer must run the syscall variant, and the tests run on that.
        const FeatureStatus socket_layer = probe_socket_layer("");
        node_ = (dir_ / "gpu0").string();
        ASSERT_EQ(mknod(node_.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
        SensorOptions options = gpuguard::testing::test_sensor_options(true);
        options.config.extra_gpu_devices = {GpuDeviceNumber{1, 7, "test"}};
        options.config.connect_loopback = true;  // the tests' traffic is loopback only
        options.config.watched_ports = {};
        options.config.payload_syscall_hooks = GetParam();
        const auto error = harness_.open(options);  // tracefs is mounted from here on
        ASSERT_FALSE(error) << *error;
        const std::string sock_events = ProbeOptions{}.tracefs_dir + "/events/sock/";
        const bool kernel_has = std::filesystem::exists(sock_events + "sock_send_length") &&
                                std::filesystem::exists(sock_events + "sock_recv_length");
        EXPECT_EQ(socket_layer.available, kernel_has) << socket_layer.detail;
        if (!socket_layer.available) {
            EXPECT_NE(socket_layer.detail.find("sock_"), std::string::npos) << socket_layer.detail;
        }
        const auto hooks = harness_.sensor().attached_hooks();
        const bool socket_hooks =
            std::find(hooks.begin(), hooks.end(), "tp_btf/sock_send_length") != hooks.end();
        EXPECT_EQ(harness_.sensor().payload_hooks(), socket_hooks ? "socket_layer" : "syscalls");
        const bool syscall_hooks = harness_.sensor().payload_hooks() == "syscalls";
        ASSERT_TRUE(syscall_hooks != socket_hooks);
        EXPECT_EQ(socket_hooks, !GetParam() && kernel_has);
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

// Receive accounting: every receive that returned data on an INET socket of
// a GPU process adds to its gpu_tgids entry too, past the sampling budget;
// the sampler reports it as the process_io's receive counters.
TEST_P(PayloadTracingTest, gpu_process_receives_are_counted) {
    constexpr size_t kAnswer = 300;  // a line of 299 bytes and the newline the server adds
    TestServer pool("127.0.0.1", [](const std::string&) {
        return std::vector<std::string>{std::string(kAnswer - 1, 'j')};
    });
    ASSERT_TRUE(pool.ok());
    const auto child = gpuguard::testing::start_io_worker(
        {.comm = "gg-recv", .gpu_node = node_, .file = "", .tcp_port = pool.port()});
    Sensor& sensor = harness_.sensor();
    ASSERT_EQ(child->ask('c'), 0);
    ASSERT_EQ(child->ask('q'), 0);  // before its GPU open: not counted
    const auto pid = static_cast<uint32_t>(child->pid());
    ASSERT_EQ(child->ask('g'), 0);
    for (int i = 0; i < 6; ++i) ASSERT_EQ(child->ask('q'), 0);  // past the 4-message budget
    const auto counted = sensor.net_sends(pid);
    ASSERT_TRUE(counted);
    EXPECT_EQ(counted->received_bytes, 6 * kAnswer);
    EXPECT_GE(counted->receives, 6u);  // a line may come in more than one read
    EXPECT_EQ(counted->calls, 6u);
    EXPECT_EQ(counted->bytes, 6 * 5u);
    ProcessIoSampler io("/proc", [&](uint32_t of) { return sensor.net_sends(of); });
    const ProcessIo read = io.read(pid);
    EXPECT_EQ(read.net_recv_bytes, 6 * kAnswer);
    EXPECT_EQ(read.net_recvs, counted->receives);
}

// The shape of a GPU process's flow (flow_shapes, bpf/payload.h): three
// questions, the second answered 1.3 s late (a push: the peer spoke a
// second or more after the latest send), the third asked at once after it
// (a reply); messages a second apart are bursts, closer ones are not.
TEST_P(PayloadTracingTest, gpu_process_flow_shapes_are_counted) {
    constexpr size_t kAnswer = 300;
    std::atomic<int> lines{0};
    TestServer pool("127.0.0.1", [&](const std::string&) {
        if (++lines == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1300));
        return std::vector<std::string>{std::string(kAnswer - 1, 'j')};
    });
    ASSERT_TRUE(pool.ok());
    const auto child = gpuguard::testing::start_io_worker(
        {.comm = "gg-shape", .gpu_node = node_, .file = "", .tcp_port = pool.port()});
    Sensor& sensor = harness_.sensor();
    ASSERT_EQ(child->ask('c'), 0);
    const auto pid = static_cast<uint32_t>(child->pid());
    ASSERT_EQ(child->ask('g'), 0);
    ASSERT_EQ(child->ask('q'), 0);  // answered at once
    std::this_thread::sleep_for(std::chrono::milliseconds(1300));
    ASSERT_EQ(child->ask('q'), 0);  // answered 1.3 s later: a push
    ASSERT_EQ(child->ask('q'), 0);  // asked at once: a reply
    std::vector<FlowReading> mine;
    for (const FlowReading& reading : sensor.read_flow_shapes()) {
        if (reading.pid == pid) mine.push_back(reading);
    }
    ASSERT_EQ(mine.size(), 1u) << "one flow";
    const Flow& flow = mine[0].counts;
    EXPECT_EQ(flow.address, "127.0.0.1");
    EXPECT_EQ(flow.port, pool.port());
    EXPECT_EQ(flow.sends, 3u);
    EXPECT_EQ(flow.bytes_out, 3 * 5u);
    EXPECT_EQ(flow.bytes_in, 3 * kAnswer);
    EXPECT_GE(flow.receives, 3u);
    EXPECT_EQ(flow.send_bursts, 3u);
    EXPECT_EQ(flow.receive_bursts, 2u) << "the third answer came within a second of the second";
    EXPECT_EQ(flow.pushes, 1u);
    EXPECT_EQ(flow.replies, 1u);
    EXPECT_EQ(flow.send_gaps, (std::vector<FlowGap>{{1, 2}}));
    EXPECT_EQ(flow.receive_gaps, (std::vector<FlowGap>{{2, 1}}));
    EXPECT_GT(mine[0].first_ns, 0u);
    EXPECT_GE(mine[0].last_receive_ns, mine[0].last_send_ns);
    // A process the kernel does not watch has no flow counted.
    for (const FlowReading& reading : sensor.read_flow_shapes()) {
        EXPECT_NE(reading.pid, static_cast<uint32_t>(getpid()));
    }
}

INSTANTIATE_TEST_SUITE_P(Hooks, PayloadTracingTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                             return info.param ? "syscall_tracepoints" : "socket_tracepoints";
                         });

}  // namespace
}  // namespace gpuguard::agent
