// The CPU sampler and the /proc readers it and the busy-process watch use,
// on fake proc trees: /proc/PID/stat's CPU fields, which readings become
// cpu_usage events (busy processes, and the one that stops), and the
// established TCP connections of a process (/proc/PID/net/tcp{,6} against
// the socket inodes of its fds), and who serves a loopback connection (a
// real socat forwarder).
#include "gpuguard/state/process_cpu.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <optional>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gpuguard/state/proc_parse.h"
#include "gpuguard/state/proc_sockets.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

// A /proc/PID/stat line with `utime`, `stime` (ticks), `threads` and `start`.
std::string stat_line(uint32_t pid, const std::string& comm, uint64_t utime, uint64_t stime,
                      uint32_t threads = 4, uint64_t start = 5000) {
    return std::to_string(pid) + " (" + comm + ") R 1 " + std::to_string(pid) + " " +
           std::to_string(pid) + " 0 -1 4194560 100 0 0 0 " + std::to_string(utime) + " " +
           std::to_string(stime) + " 0 0 20 0 " + std::to_string(threads) + " 0 " +
           std::to_string(start) + " 10000000 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 " +
           "0 17 1 0 0 0 0 0\n";
}

TEST(ProcStatCpu, FieldsAreCountedAfterTheLastParenthesis) {
    EXPECT_EQ(parse_proc_stat_cpu(stat_line(42, "worker", 1234, 56, 9, 777)),
              (ProcStatCpu{1234, 56, 9, 777}));
    // A name with blanks and parentheses cannot shift the fields.
    EXPECT_EQ(parse_proc_stat_cpu(stat_line(42, ") R 1 2 3 (x", 10, 20, 3, 99)),
              (ProcStatCpu{10, 20, 3, 99}));
    EXPECT_EQ(parse_proc_stat_cpu("42 (worker) R 1 2 3"), std::nullopt);  // cut short
    EXPECT_EQ(parse_proc_stat_cpu("42 worker R 1"), std::nullopt);
    EXPECT_EQ(parse_proc_stat_cpu(""), std::nullopt);
    std::string bad = stat_line(42, "worker", 1234, 56);
    bad.replace(bad.find("1234"), 4, "12x4");
    EXPECT_EQ(parse_proc_stat_cpu(bad), std::nullopt);
    // This process's own line parses.
    std::ifstream self("/proc/self/stat");
    const std::string line{std::istreambuf_iterator<char>(self), {}};
    const auto cpu = parse_proc_stat_cpu(line);
    ASSERT_TRUE(cpu.has_value()) << line;
    EXPECT_GE(cpu->threads, 1u);
    EXPECT_GT(cpu->start_time, 0u);
}

class ProcessCpuSamplerTest : public ::testing::Test {
  protected:
    void stat(uint32_t pid, uint64_t utime, uint64_t stime, uint64_t start = 5000) {
        const auto dir = proc_.path() / std::to_string(pid);
        std::filesystem::create_directories(dir);
        std::ofstream(dir / "stat")
            << stat_line(pid, "p" + std::to_string(pid), utime, stime, 4, start);
    }
    uint64_t ticks(double seconds) const {
        return static_cast<uint64_t>(seconds * static_cast<double>(sysconf(_SC_CLK_TCK)));
    }
    static constexpr uint64_t kSecond = 1'000'000'000;
    gpuguard::testing::TempDir proc_{"gg-proc-cpu"};
};

TEST_F(ProcessCpuSamplerTest, BusyProcessesGetReadingsAndTheOneThatStopsGetsALastOne) {
    ProcessCpuSampler sampler(proc_.path(), 50, /*idle_stride=*/1);
    stat(10, 0, 0);                                                    // a miner
    stat(11, 0, 0);                                                    // idle
    stat(12, 0, 0);                                                    // just under half a core
    EXPECT_TRUE(sampler.sample({10, 11, 12}, 100 * kSecond).empty());  // baselines only
    stat(10, ticks(3), ticks(1));  // 4 s of CPU in 2 s: two cores
    stat(12, ticks(0.98), 0);
    auto readings = sampler.sample({10, 11, 12}, 102 * kSecond);
    ASSERT_EQ(readings.size(), 1u);
    EXPECT_EQ(readings[0].first, 10u);
    EXPECT_EQ(readings[0].second.cpu_ns, 4 * kSecond);
    EXPECT_EQ(readings[0].second.interval_ns, 2 * kSecond);
    EXPECT_EQ(readings[0].second.threads, 4u);
    EXPECT_DOUBLE_EQ(readings[0].second.cores(), 2.0);
    EXPECT_TRUE(sampler.busy(10));
    EXPECT_FALSE(sampler.busy(12));
    // Exactly half a core is busy.
    stat(12, ticks(1.98), 0);
    stat(10, ticks(3), ticks(1));  // stopped
    readings = sampler.sample({10, 11, 12}, 104 * kSecond);
    ASSERT_EQ(readings.size(), 2u);
    EXPECT_EQ(readings[0].first, 10u);  // its last reading, the one that says it stopped
    EXPECT_EQ(readings[0].second.cpu_ns, 0u);
    EXPECT_EQ(readings[1].first, 12u);
    EXPECT_FALSE(sampler.busy(10));
    EXPECT_EQ(sampler.busy_pids(), (std::unordered_set<uint32_t>{12}));
    // Idle after that: no reading at all.
    stat(12, ticks(1.98), 0);
    EXPECT_EQ(sampler.sample({10, 11, 12}, 106 * kSecond).size(), 1u);  // 12 stopping
    EXPECT_TRUE(sampler.sample({10, 11, 12}, 108 * kSecond).empty());
}

TEST_F(ProcessCpuSamplerTest, ARecycledPidOrAGoneProcessStartsOver) {
    ProcessCpuSampler sampler(proc_.path(), 50, /*idle_stride=*/1);
    stat(20, ticks(100), 0);
    sampler.sample({20}, 100 * kSecond);
    // Another process under the same pid: its own baseline, not 100 s of CPU less.
    stat(20, ticks(1), 0, 9000);
    EXPECT_TRUE(sampler.sample({20}, 102 * kSecond).empty());
    stat(20, ticks(3), 0, 9000);
    EXPECT_EQ(sampler.sample({20}, 104 * kSecond).size(), 1u);
    // Gone: no reading, forgotten; back under the same pid later: a baseline first.
    std::filesystem::remove_all(proc_.path() / "20");
    EXPECT_TRUE(sampler.sample({20}, 106 * kSecond).empty());
    EXPECT_FALSE(sampler.busy(20));
    stat(20, ticks(50), 0, 9000);
    EXPECT_TRUE(sampler.sample({20}, 108 * kSecond).empty());
    // A process not listed is forgotten too.
    EXPECT_TRUE(sampler.sample({}, 110 * kSecond).empty());
    stat(20, ticks(60), 0, 9000);
    EXPECT_TRUE(sampler.sample({20}, 112 * kSecond).empty());
}

TEST_F(ProcessCpuSamplerTest, AnIdleProcessIsReadOnItsTurnOnlyABusyOneEveryTime) {
    ProcessCpuSampler sampler(proc_.path(), 50);  // every 4th pass for idle ones
    for (uint32_t pid : {40, 41, 42, 43}) stat(pid, 0, 0);
    EXPECT_TRUE(sampler.sample({40, 41, 42, 43}, 100 * kSecond).empty());  // baselines: all read
    // All four turn busy now; each is seen on its turn, over the time since its last reading.
    for (uint32_t pid : {40, 41, 42, 43}) stat(pid, ticks(100), 0);
    std::vector<uint32_t> seen;
    for (uint64_t pass = 1; pass <= 4; ++pass) {
        for (const auto& [pid, usage] :
             sampler.sample({40, 41, 42, 43}, (100 + 2 * pass) * kSecond)) {
            if (std::find(seen.begin(), seen.end(), pid) != seen.end()) continue;  // read again
            EXPECT_EQ(usage.interval_ns, 2 * pass * kSecond) << pid;  // since its baseline
            seen.push_back(pid);
        }
        EXPECT_EQ(seen.size(), pass) << "one more process a pass";
    }
    EXPECT_EQ(seen, (std::vector<uint32_t>{43, 42, 41, 40}));
    // A busy one is read at every pass (40, busy since pass 4); idle ones on their turn.
    for (uint64_t pass = 5; pass <= 7; ++pass) {
        stat(40, ticks(100 + 2 * static_cast<double>(pass)), 0);
        const auto readings = sampler.sample({40, 41, 42, 43}, (100 + 2 * pass) * kSecond);
        ASSERT_EQ(readings.size(), 1u) << pass;
        EXPECT_EQ(readings[0].first, 40u);
        EXPECT_EQ(readings[0].second.interval_ns, 2 * kSecond);
    }
}

TEST(ProcNetTcp, RowsGiveTheRemoteEndStateAndInode) {
    const std::string tcp =
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100007F:0277 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        "
        "0 15512 1 0000000000000000 100 0 0 10 0\n"
        "   1: 0F02000A:D2F0 0764A8C6:01BB 01 00000000:00000000 02:000AFD1F 00000000  1000        "
        "0 42424 2 0000000000000000 20 4 30 10 -1\n"
        "   2: garbage\n";
    const auto rows = parse_proc_net_tcp(tcp, false);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].remote_address, "0.0.0.0");
    EXPECT_EQ(rows[0].state, 0x0a);  // LISTEN
    EXPECT_EQ(rows[1].remote_address, "198.168.100.7");
    EXPECT_EQ(rows[1].remote_port, 443);
    EXPECT_EQ(rows[1].state, 1);
    EXPECT_EQ(rows[1].inode, 42424u);
    EXPECT_EQ(rows[1].ip_version, 4);

    const std::string tcp6 =
        "  sl  local_address                         remote_address                        st "
        "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 00000000000000000000000001000000:1F90 B80D0120000000000000000001000000:0D05 01 "
        "00000000:00000000 00:00000000 00000000  1000        0 777 1 0000000000000000 20 4 0 10 "
        "-1\n"
        "   1: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000764A8C6:115C 01 "
        "00000000:00000000 00:00000000 00000000  1000        0 778 1 0000000000000000 20 4 0 10 "
        "-1\n";
    const auto rows6 = parse_proc_net_tcp(tcp6, true);
    ASSERT_EQ(rows6.size(), 2u);
    EXPECT_EQ(rows6[0].remote_address, "2001:db8::1");
    EXPECT_EQ(rows6[0].remote_port, 3333);
    EXPECT_EQ(rows6[0].ip_version, 6);
    EXPECT_EQ(rows6[1].remote_address, "198.168.100.7");  // v4-mapped
    EXPECT_TRUE(rows6[1].v4_mapped);
    EXPECT_EQ(rows6[1].ip_version, 4);
    EXPECT_EQ(rows6[1].remote_port, 4444);
    EXPECT_TRUE(parse_proc_net_tcp("", false).empty());
    EXPECT_TRUE(parse_proc_net_tcp(tcp, true).empty());  // v4 rows are not v6 ones
}

TEST(EstablishedConnects, OnlyTheOutboundEstablishedNonLoopbackSocketsOfTheProcess) {
    gpuguard::testing::TempDir proc{"gg-proc-sockets"};
    const auto dir = proc.path() / "77";
    std::filesystem::create_directories(dir / "fd");
    std::filesystem::create_directories(dir / "net");
    std::filesystem::create_symlink("socket:[42424]", dir / "fd" / "5");  // its pool
    std::filesystem::create_symlink("socket:[15512]", dir / "fd" / "6");  // a listener
    std::filesystem::create_symlink("socket:[99]", dir / "fd" / "7");     // to loopback
    std::filesystem::create_symlink("socket:[777]", dir / "fd" / "8");    // v6
    std::filesystem::create_symlink("socket:[888]", dir / "fd" / "9");    // accepted on :631
    std::filesystem::create_symlink("/dev/null", dir / "fd" / "0");
    const std::string header = "  sl  local_address rem_address   st\n";
    std::ofstream(dir / "net" / "tcp")
        << header
        << "   0: 0100007F:0277 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 15512\n"
        << "   1: 0F02000A:D2F0 0764A8C6:01BB 01 00000000:00000000 00:00000000 00000000 0 0 42424\n"
        << "   2: 0100007F:D2F0 0100007F:0438 01 00000000:00000000 00:00000000 00000000 0 0 99\n"
        << "   3: 0F02000A:D2F1 0864A8C6:01BB 01 00000000:00000000 00:00000000 00000000 0 0 5555\n"
        // A server's client: its local port (631) is one a socket listens on.
        << "   4: 00000000:0277 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1\n"
        << "   5: 0F02000A:0277 0964A8C6:C350 01 00000000:00000000 00:00000000 00000000 0 0 888\n";
    std::ofstream(dir / "net" / "tcp6")
        << header
        << "   0: 00000000000000000000000001000000:1F90 B80D0120000000000000000001000000:0D05 01 "
           "00000000:00000000 00:00000000 00000000 0 0 777\n";
    const auto connects = established_connects(proc.path(), 77);
    ASSERT_EQ(connects.size(), 2u);
    EXPECT_EQ(connects[0].address, "198.168.100.7");
    EXPECT_EQ(connects[0].port, 443);
    EXPECT_EQ(connects[0].fd, 5);
    EXPECT_EQ(connects[0].result, 0);
    EXPECT_TRUE(connects[0].established);
    EXPECT_TRUE(connects[0].watched_tgid);
    EXPECT_FALSE(connects[0].loopback);
    EXPECT_EQ(connects[1].address, "2001:db8::1");
    EXPECT_EQ(connects[1].ip_version, 6);
    EXPECT_EQ(connects[1].fd, 8);
    EXPECT_TRUE(established_connects(proc.path(), 78).empty());  // no such process
}

// With real processes: a socat forwarder on loopback that forks a child per
// connection. Before the test connects, the listener serves the port; once
// connected, the child holding the accepted socket does, and the test's own
// connection is among its established loopback ones.
TEST(ServerOf, TheProcessThatAcceptedALoopbackConnectionElseTheListener) {
    const int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    ASSERT_EQ(bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    ASSERT_EQ(getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length), 0);
    const uint16_t port = ntohs(address.sin_port);
    close(probe);
    const pid_t socat = gpuguard::testing::spawn_process(
        "/usr/bin/socat",
        {"socat", "TCP-LISTEN:" + std::to_string(port) + ",bind=127.0.0.1,fork,reuseaddr",
         "EXEC:cat"},
        "/");
    ASSERT_GT(socat, 0);
    gpuguard::testing::ChildReaper reap(socat);
    const uint32_t self = static_cast<uint32_t>(getpid());
    std::optional<uint32_t> server;
    for (int i = 0; i < 200 && server != static_cast<uint32_t>(socat); ++i) {
        server = server_of("/proc", self, port);
        if (server != static_cast<uint32_t>(socat)) usleep(10'000);
    }
    EXPECT_EQ(server, static_cast<uint32_t>(socat)) << "the listener, before any connection";

    const int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    const auto loopback = established_loopback_connects("/proc", self);
    EXPECT_TRUE(std::any_of(loopback.begin(), loopback.end(), [&](const Connect& connect) {
        return connect.port == port && connect.loopback && connect.address == "127.0.0.1";
    }));
    const auto off_host = established_connects("/proc", self);
    EXPECT_TRUE(std::none_of(off_host.begin(), off_host.end(),
                             [&](const Connect& connect) { return connect.port == port; }));
    // socat forks the child that serves the connection after accepting it.
    for (int i = 0; i < 200 && server == static_cast<uint32_t>(socat); ++i) {
        usleep(10'000);
        server = server_of("/proc", self, port);
    }
    ASSERT_TRUE(server);
    EXPECT_NE(*server, static_cast<uint32_t>(socat));
    std::ifstream status("/proc/" + std::to_string(*server) + "/status");
    const std::string text{std::istreambuf_iterator<char>(status), {}};
    EXPECT_EQ(proc_status_field(text, "PPid"), static_cast<uint32_t>(socat)) << text;
    close(client);
    EXPECT_FALSE(server_of("/proc", self, 1));  // nothing listens on port 1
}

}  // namespace
}  // namespace gpuguard::agent
