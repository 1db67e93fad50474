// connect(2): reported for GPU holders, watched ports, watched processes and
// watched addresses, with address, port and result; silent for everyone
// else. Traffic stays on loopback.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "gpuguard/common/clock.h"
#include "tests/support/child_process.h"
#include "tests/support/privileged.h"
#include "tests/support/sensor_harness.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using gpuguard::testing::run_in_child;

void prctl_name(const char* name) { prctl(PR_SET_NAME, name, 0, 0, 0); }

// A TCP listener on a loopback address and an ephemeral port.
class Listener {
  public:
    explicit Listener(int family) {
        fd_ = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_storage address{};
        socklen_t length = 0;
        if (family == AF_INET) {
            auto* in = reinterpret_cast<sockaddr_in*>(&address);
            in->sin_family = AF_INET;
            in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            length = sizeof(*in);
        } else {
            auto* in6 = reinterpret_cast<sockaddr_in6*>(&address);
            in6->sin6_family = AF_INET6;
            in6->sin6_addr = in6addr_loopback;
            length = sizeof(*in6);
        }
        if (bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd_, 16) != 0) {
            close(fd_);
            fd_ = -1;
            return;
        }
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
        port_ = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&address)->sin_port
                                        : reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
    }
    ~Listener() {
        if (fd_ >= 0) close(fd_);
    }
    bool ok() const { return fd_ >= 0; }
    uint16_t port() const { return port_; }

  private:
    int fd_ = -1;
    uint16_t port_ = 0;
};

// connect() from a child-safe context: returns 0 or errno.
int connect_to(const char* address, uint16_t port, bool v4_mapped_socket = false) {
    sockaddr_storage storage{};
    socklen_t length = 0;
    int family = AF_INET;
    if (strchr(address, ':') || v4_mapped_socket) {
        family = AF_INET6;
        auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        inet_pton(AF_INET6, address, &in6->sin6_addr);
        length = sizeof(*in6);
    } else {
        auto* in = reinterpret_cast<sockaddr_in*>(&storage);
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        inet_pton(AF_INET, address, &in->sin_addr);
        length = sizeof(*in);
    }
    const int fd = socket(family, SOCK_STREAM, 0);
    const int rc = connect(fd, reinterpret_cast<sockaddr*>(&storage), length);
    const int err = rc == 0 ? 0 : errno;
    close(fd);
    return err;
}

class ConnectTracingTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        ASSERT_TRUE(v4_.ok() && v6_.ok());
        node_ = (dir_ / "gpu0").string();
        ASSERT_EQ(mknod(node_.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
        SensorOptions options = gpuguard::testing::test_sensor_options(true);
        options.config.extra_gpu_devices = {GpuDeviceNumber{1, 7, "test"}};
        options.config.connect_loopback = true;  // the tests' traffic is loopback only
        options.config.watched_ports = {};
        tune(options);
        const auto error = harness_.open(options);
        ASSERT_FALSE(error) << *error;
    }
    virtual void tune(SensorOptions&) {}

    gpuguard::testing::TempDir dir_{"gg-connect"};
    std::string node_;
    Listener v4_{AF_INET};
    Listener v6_{AF_INET6};
    gpuguard::testing::SensorHarness harness_;
};

TEST_F(ConnectTracingTest, gpu_holder_connects_are_reported_v4_v6_and_v4_mapped) {
    const pid_t child = run_in_child("gg-connect", [&] {
        if (open(node_.c_str(), O_RDWR) < 0) return 1;
        if (connect_to("127.0.0.1", v4_.port()) != 0) return 2;
        if (connect_to("::1", v6_.port()) != 0) return 3;
        if (connect_to("::ffff:127.0.0.1", v4_.port(), true) != 0) return 4;
        return 0;
    });
    const auto connects = harness_.of<Connect>(child, 3);
    ASSERT_EQ(connects.size(), 3u);

    EXPECT_EQ(connects[0].second.ip_version, 4);
    EXPECT_EQ(connects[0].second.address, "127.0.0.1");
    EXPECT_EQ(connects[0].second.port, v4_.port());
    EXPECT_EQ(connects[0].second.result, 0);
    EXPECT_TRUE(connects[0].second.gpu_holder);
    EXPECT_TRUE(connects[0].second.loopback);
    EXPECT_FALSE(connects[0].second.v4_mapped);
    EXPECT_EQ(connects[0].first.task.comm, "gg-connect");

    EXPECT_EQ(connects[1].second.ip_version, 6);
    EXPECT_EQ(connects[1].second.address, "::1");
    EXPECT_EQ(connects[1].second.port, v6_.port());
    EXPECT_EQ(connects[1].second.result, 0);

    EXPECT_EQ(connects[2].second.ip_version, 4);
    EXPECT_EQ(connects[2].second.address, "127.0.0.1");
    EXPECT_TRUE(connects[2].second.v4_mapped);
    EXPECT_EQ(connects[2].second.port, v4_.port());
}

TEST_F(ConnectTracingTest, refused_connect_carries_its_errno) {
    uint16_t closed_port = 0;
    {
        Listener temporary(AF_INET);
        closed_port = temporary.port();
    }  // closed: connecting is refused
    const pid_t child = run_in_child("gg-connect", [&] {
        if (open(node_.c_str(), O_RDWR) < 0) return 1;
        return connect_to("127.0.0.1", closed_port) == ECONNREFUSED ? 0 : 2;
    });
    const auto connects = harness_.of<Connect>(child, 1);
    ASSERT_EQ(connects.size(), 1u);
    EXPECT_EQ(connects[0].second.result, -ECONNREFUSED);
    EXPECT_EQ(connects[0].second.port, closed_port);
}

// A non-blocking connect returns EINPROGRESS: loopback's SYN-ACK waits in
// the socket's backlog until connect() releases the socket, so the call
// always returns before the handshake completes. The event carries it.
TEST_F(ConnectTracingTest, non_blocking_connect_reports_einprogress) {
    const pid_t child = run_in_child("gg-connect", [&] {
        if (open(node_.c_str(), O_RDWR) < 0) return 1;
        const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        sockaddr_in peer{};
        peer.sin_family = AF_INET;
        peer.sin_port = htons(v4_.port());
        peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) == 0) return 2;
        if (errno != EINPROGRESS) return 3;
        pollfd ready{fd, POLLOUT, 0};
        if (poll(&ready, 1, 5000) != 1) return 4;  // bounded: the handshake completes
        int error = -1;
        socklen_t length = sizeof(error);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
        close(fd);
        return error == 0 ? 0 : 5;
    });
    const auto connects = harness_.of<Connect>(child, 1);
    ASSERT_EQ(connects.size(), 1u);
    EXPECT_EQ(connects[0].second.result, -EINPROGRESS);
    EXPECT_EQ(connects[0].second.address, "127.0.0.1");
    EXPECT_EQ(connects[0].second.port, v4_.port());
    EXPECT_TRUE(connects[0].second.gpu_holder);
}

TEST_F(ConnectTracingTest, non_gpu_process_to_unwatched_port_is_silent) {
    const pid_t child = run_in_child("gg-connect", [&] {
        return connect_to("127.0.0.1", v4_.port()) == 0 && connect_to("::1", v6_.port()) == 0 ? 0
                                                                                              : 1;
    });
    EXPECT_TRUE(harness_.of<Connect>(child, 0).empty());
}

TEST_F(ConnectTracingTest, watched_port_is_reported_from_any_process) {
    ASSERT_TRUE(harness_.sensor().set_watched_ports({v4_.port()}).ok());
    const pid_t child = run_in_child("gg-connect", [&] {
        return connect_to("127.0.0.1", v4_.port()) == 0 && connect_to("::1", v6_.port()) == 0 ? 0
                                                                                              : 1;
    });
    const auto connects = harness_.of<Connect>(child, 1);
    ASSERT_EQ(connects.size(), 1u) << "only the watched port";
    EXPECT_EQ(connects[0].second.port, v4_.port());
    EXPECT_TRUE(connects[0].second.watched_port);
    EXPECT_FALSE(connects[0].second.gpu_holder);
}

// A child that connects to 127.0.0.1:`port` on 'c' and then sends a
// JSON-RPC line on that connection (answers 0, or the errno). The line is
// sent from a page the process maps just before and has never touched, as a
// freshly started miner's login string often is: the kernel faults it in
// only while the send copies it, so a sensor reading it at the syscall's
// entry cannot (bpf_probe_read_user does not fault).
std::unique_ptr<gpuguard::testing::RequestChild> start_connector(uint16_t port) {
    return std::make_unique<gpuguard::testing::RequestChild>(
        [port, fd = -1](char request) mutable {
            if (request != 'c') return EINVAL;
            static const char kLine[] = "{\"id\":1,\"method\":\"login\"}\n";
            const int text = memfd_create("gg-line", MFD_CLOEXEC);
            if (text < 0 || write(text, kLine, sizeof(kLine) - 1) < 0) return errno;
            void* line = mmap(nullptr, sizeof(kLine) - 1, PROT_READ, MAP_PRIVATE, text, 0);
            close(text);
            if (line == MAP_FAILED) return errno;
            fd = socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in peer{};
            peer.sin_family = AF_INET;
            peer.sin_port = htons(port);
            peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            if (connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) != 0) return errno;
            return write(fd, line, sizeof(kLine) - 1) < 0 ? errno : 0;
        },
        [] { prctl_name("gg-connect"); });
}

// A watched process's connect is reported on an unwatched port and its first
// send sampled; another process doing the same is not.
void expect_watched_process_sampled(gpuguard::testing::SensorHarness& harness, uint16_t port) {
    auto watched = start_connector(port);
    auto other = start_connector(port);
    ASSERT_TRUE(harness.sensor().watch_process(watched->pid()).ok());
    EXPECT_TRUE(harness.sensor().process_watched(watched->pid()));
    ASSERT_EQ(watched->ask('c'), 0);
    ASSERT_EQ(other->ask('c'), 0);

    const auto connects = harness.of<Connect>(watched->pid(), 1);
    ASSERT_EQ(connects.size(), 1u);
    EXPECT_TRUE(connects[0].second.watched_tgid);
    EXPECT_FALSE(connects[0].second.watched_addr);
    EXPECT_FALSE(connects[0].second.watched_port);
    EXPECT_FALSE(connects[0].second.gpu_holder);
    EXPECT_EQ(connects[0].second.port, port);
    const auto payloads = harness.of<NetPayload>(watched->pid(), 1);
    ASSERT_FALSE(payloads.empty()) << "a watched process's first payloads are sampled";
    EXPECT_TRUE(payloads[0].second.data.starts_with("{\"id\":1"))
        << payloads.size() << " payload(s), the first " << payloads[0].second.data.size()
        << " bytes, direction " << static_cast<int>(payloads[0].second.direction) << ": "
        << payloads[0].second.data;

    EXPECT_TRUE(harness.matching<Connect>(other->pid()).empty()) << "not watched: silent";
    EXPECT_TRUE(harness.matching<NetPayload>(other->pid()).empty());
    const auto counts = harness.sensor().watch_stats().processes;
    EXPECT_EQ(counts.entries, 1u);
    EXPECT_EQ(counts.added, 1u);
    EXPECT_EQ(counts.capacity, 4096u);  // sensor.watch_processes_max's default
}

TEST_F(ConnectTracingTest, watched_process_is_reported_on_any_port_and_sampled) {
    expect_watched_process_sampled(harness_, v4_.port());
}

// The same with payloads sampled at the send system calls (the variant of
// kernels without the socket layer's tracepoints, such as Debian 12's 6.1):
// the line is sent from a page the sender never touched before.
class ConnectSyscallPayloadTest : public ConnectTracingTest {
  protected:
    void tune(SensorOptions& options) override { options.config.payload_syscall_hooks = true; }
};

TEST_F(ConnectSyscallPayloadTest, a_first_send_from_an_untouched_page_is_sampled_whole) {
    expect_watched_process_sampled(harness_, v4_.port());
}

TEST_F(ConnectTracingTest, watched_address_is_reported_from_any_process_until_it_expires) {
    // 127.0.0.1 as IPv4 covers the v4-mapped form too; ::1 is not watched yet.
    ASSERT_TRUE(
        harness_.sensor().watch_address("127.0.0.1", monotonic_ns() + 60'000'000'000ull).ok());
    const auto connect_all_three = [&] {
        if (connect_to("127.0.0.1", v4_.port()) != 0) return 1;
        if (connect_to("::ffff:127.0.0.1", v4_.port(), true) != 0) return 2;
        return connect_to("::1", v6_.port()) == 0 ? 0 : 3;
    };
    pid_t child = run_in_child("gg-connect", connect_all_three);
    auto connects = harness_.of<Connect>(child, 2);
    ASSERT_EQ(connects.size(), 2u) << "the IPv4 address in both forms, not ::1";
    EXPECT_FALSE(connects[0].second.v4_mapped);
    EXPECT_TRUE(connects[1].second.v4_mapped);
    for (const auto& [event, connect] : connects) {
        EXPECT_EQ(connect.address, "127.0.0.1");
        EXPECT_TRUE(connect.watched_addr);
        EXPECT_FALSE(connect.watched_tgid);
    }

    ASSERT_TRUE(harness_.sensor().watch_address("::1", monotonic_ns() + 1).ok());
    EXPECT_FALSE(harness_.sensor().watch_address("not-an-address", 0).ok());
    child = run_in_child("gg-connect", [&] { return connect_to("::1", v6_.port()); });
    connects = harness_.of<Connect>(child, 1);
    ASSERT_EQ(connects.size(), 1u);
    EXPECT_EQ(connects[0].second.address, "::1");
    EXPECT_TRUE(connects[0].second.watched_addr);

    // ::1's time is over; 127.0.0.1's is not.
    EXPECT_EQ(harness_.sensor().expire_watched_addresses(monotonic_ns()), 1u);
    child = run_in_child("gg-connect", connect_all_three);
    EXPECT_EQ(harness_.of<Connect>(child, 2).size(), 2u) << "::1 expired";
    const auto counts = harness_.sensor().watch_stats().addresses;
    EXPECT_EQ(counts.entries, 1u);
    EXPECT_EQ(counts.added, 2u);
    EXPECT_EQ(counts.expired, 1u);
}

TEST(ConnectWatchList, a_full_list_evicts_its_oldest_entry_and_counts_it) {
    GG_REQUIRE_PRIVILEGED();
    Listener v4(AF_INET);
    ASSERT_TRUE(v4.ok());
    gpuguard::testing::SensorHarness harness;
    SensorOptions options = gpuguard::testing::test_sensor_options(true);
    options.config.connect_loopback = true;
    options.config.watched_ports = {};
    options.config.watch_processes_max = 2;
    options.config.watch_addresses_max = 1;
    const auto error = harness.open(options);
    ASSERT_FALSE(error) << *error;
    Sensor& sensor = harness.sensor();

    auto first = start_connector(v4.port());
    auto second = start_connector(v4.port());
    ASSERT_TRUE(sensor.watch_process(first->pid()).ok());
    ASSERT_TRUE(sensor.watch_process(second->pid()).ok());
    ASSERT_TRUE(sensor.watch_process(first->pid()).ok());  // a refresh: first is now the newest
    ASSERT_TRUE(sensor.watch_process(0x3ffffff0u).ok());   // above pid_max: nobody's
    EXPECT_FALSE(sensor.process_watched(second->pid())) << "the oldest went";
    EXPECT_TRUE(sensor.process_watched(first->pid()));
    ASSERT_EQ(first->ask('c'), 0);
    ASSERT_EQ(second->ask('c'), 0);
    EXPECT_EQ(harness.of<Connect>(first->pid(), 1).size(), 1u);
    EXPECT_TRUE(harness.matching<Connect>(second->pid()).empty()) << "evicted from the kernel map";
    auto counts = sensor.watch_stats().processes;
    EXPECT_EQ(counts.capacity, 2u);
    EXPECT_EQ(counts.entries, 2u);
    EXPECT_EQ(counts.added, 3u);
    EXPECT_EQ(counts.evicted, 1u);

    ASSERT_TRUE(sensor.watch_address("127.0.0.1", 0).ok());
    ASSERT_TRUE(sensor.watch_address("192.0.2.1", 0).ok());  // TEST-NET-1: pushes 127.0.0.1 out
    const pid_t child =
        run_in_child("gg-connect", [&] { return connect_to("127.0.0.1", v4.port()); });
    EXPECT_TRUE(harness.of<Connect>(child, 0).empty());
    counts = sensor.watch_stats().addresses;
    EXPECT_EQ(counts.capacity, 1u);
    EXPECT_EQ(counts.entries, 1u);
    EXPECT_EQ(counts.evicted, 1u);
}

TEST(ConnectAll, every_inet_connect_is_reported_and_unix_ones_are_not) {
    GG_REQUIRE_PRIVILEGED();
    Listener v4(AF_INET), v6(AF_INET6);
    ASSERT_TRUE(v4.ok() && v6.ok());
    gpuguard::testing::SensorHarness harness;
    SensorOptions options = gpuguard::testing::test_sensor_options(true);
    options.config.connect_all = true;
    options.config.connect_loopback = true;
    options.config.watched_ports = {};
    const auto error = harness.open(options);
    ASSERT_FALSE(error) << *error;
    gpuguard::testing::TempDir dir("gg-connect");
    const std::string unix_path = (dir / "sock").string();
    const pid_t child = run_in_child("gg-connect", [&] {
        // No GPU, no watched port: only connect_all reports these.
        if (connect_to("127.0.0.1", v4.port()) != 0) return 1;
        if (connect_to("::1", v6.port()) != 0) return 2;
        const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", unix_path.c_str());
        connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));  // ENOENT: traced
        close(fd);
        return 0;
    });
    const auto connects = harness.of<Connect>(child, 2);
    ASSERT_EQ(connects.size(), 2u) << "the two INET connects, not the AF_UNIX one";
    EXPECT_EQ(connects[0].second.port, v4.port());
    EXPECT_EQ(connects[1].second.port, v6.port());
    for (const auto& [event, connect] : connects) {
        EXPECT_TRUE(connect.all);
        EXPECT_FALSE(connect.gpu_holder);
        EXPECT_FALSE(connect.watched_port);
        EXPECT_EQ(connect.result, 0);
    }
}

// Loopback connects are left out, except a GPU holder's (or a watched
// process's): a proxy on this host may carry its traffic. A watched port
// alone does not bring a loopback connect in.
TEST(ConnectLoopbackFilter, loopback_is_reported_for_gpu_holders_only_unless_configured) {
    GG_REQUIRE_PRIVILEGED();
    gpuguard::testing::TempDir dir("gg-connect");
    const std::string node = (dir / "gpu0").string();
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    Listener v4(AF_INET);
    ASSERT_TRUE(v4.ok());
    gpuguard::testing::SensorHarness harness;
    SensorOptions options = gpuguard::testing::test_sensor_options(true);
    options.config.extra_gpu_devices = {GpuDeviceNumber{1, 7, "test"}};
    options.config.watched_ports = {v4.port()};  // watched, but loopback still excluded
    const auto error = harness.open(options);
    ASSERT_FALSE(error) << *error;
    const pid_t holder = run_in_child("gg-connect", [&] {
        if (open(node.c_str(), O_RDWR) < 0) return 1;
        return connect_to("127.0.0.1", v4.port());
    });
    const pid_t other =
        run_in_child("gg-connect", [&] { return connect_to("127.0.0.1", v4.port()); });
    const auto reported = harness.of<Connect>(holder, 1);
    ASSERT_EQ(reported.size(), 1u);
    const Connect& connect = reported[0].second;
    EXPECT_TRUE(connect.loopback);
    EXPECT_TRUE(connect.gpu_holder);
    EXPECT_EQ(connect.address, "127.0.0.1");
    EXPECT_EQ(connect.port, v4.port());
    EXPECT_TRUE(harness.of<Connect>(other, 0).empty());
}

}  // namespace
}  // namespace gpuguard::agent
