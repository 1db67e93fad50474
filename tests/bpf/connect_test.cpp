// connect(2): reported for GPU holders and watched ports, with address, port
// and result; silent for everyone else. Traffic stays on loopback.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/support/child_process.h"
#include "tests/support/privileged.h"
#include "tests/support/sensor_harness.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using gpuguard::testing::run_in_child;

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
        SensorOptions options;
        options.config.extra_gpu_devices = {GpuDeviceNumber{1, 7, "test"}};
        options.config.connect_loopback = true;  // the tests' traffic is loopback only
        options.config.watched_ports = {};
        const auto error = harness_.open(options);
        ASSERT_FALSE(error) << *error;
    }

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

TEST(ConnectAll, every_inet_connect_is_reported_and_unix_ones_are_not) {
    GG_REQUIRE_PRIVILEGED();
    Listener v4(AF_INET), v6(AF_INET6);
    ASSERT_TRUE(v4.ok() && v6.ok());
    gpuguard::testing::SensorHarness harness;
    SensorOptions options;
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

TEST(ConnectLoopbackFilter, loopback_is_excluded_unless_configured) {
    GG_REQUIRE_PRIVILEGED();
    gpuguard::testing::TempDir dir("gg-connect");
    const std::string node = (dir / "gpu0").string();
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    Listener v4(AF_INET);
    ASSERT_TRUE(v4.ok());
    gpuguard::testing::SensorHarness harness;
    SensorOptions options;
    options.config.extra_gpu_devices = {GpuDeviceNumber{1, 7, "test"}};
    options.config.watched_ports = {v4.port()};  // watched, but loopback still excluded
    const auto error = harness.open(options);
    ASSERT_FALSE(error) << *error;
    const pid_t child = run_in_child("gg-connect", [&] {
        if (open(node.c_str(), O_RDWR) < 0) return 1;
        return connect_to("127.0.0.1", v4.port());
    });
    EXPECT_TRUE(harness.of<Connect>(child, 0).empty());
}

}  // namespace
}  // namespace gpuguard::agent
