// SOC alert feed throughput, with baselines in the same run:
//
//   BM_Siem_format_<fmt>      alerts/s through each formatter (ECS JSON, CEF,
//                             LEEF, OCSF, RFC 5424 around ECS)
//   BM_Siem_tcp_memory_queue  alerts/s from publish() until rsyslogd on
//                             loopback has acknowledged them (TCP sink,
//                             in-memory queue: the baseline)
//   BM_Siem_tcp_disk_queue    the same with the disk queue (segment files,
//                             CRC, fdatasync per batch); must keep >= 50 %
//                             of the baseline (exit 1 otherwise)
//
// rsyslogd (Debian package) is started on a free loopback port with its own
// config and temp dir, writing to a file, and stopped at the end.
//
// Usage: siem_bench [--alerts=N] [--format-seconds=S] [--min-ratio=R]
// (--min-ratio=0 for smoke runs on a busy machine, where timings are noise)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/siem/siem.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace gpuguard;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

HostInfo host() {
    return {"gpu-node-7", "6f1c9a0e-0b2d-4c53-9b57-7d1f2c3a4b5c", "6.18.0", "0.1.0"};
}

Detection detection(int n) {
    Detection d;
    d.id = fmt::format("bench-{:08}", n);
    d.rule_id = "miner.xmrig.cmdline";
    d.rule_name = "XMRig miner started";
    d.ruleset = "gpuguard-correlation";
    d.description = "xmrig command line and stratum connect from a GPU process";
    d.severity = Severity::kCritical;
    d.confidence = 0.95;
    d.mitre_technique_id = "T1496";
    d.mitre_technique_name = "Resource Hijacking";
    d.mitre_tactic = "Impact";
    d.time_unix_ns = 1714564800250000000 + n;
    d.process.pid = 4242;
    d.process.comm = "xmrig";
    d.process.executable = "/tmp/.x/xmrig";
    d.process.argv = {"/tmp/.x/xmrig", "-o", "stratum+tcp://pool.example:3333", "--cuda"};
    d.process.command_line = "/tmp/.x/xmrig -o stratum+tcp://pool.example:3333 --cuda";
    d.process.user = "alice";
    DetectionGpu gpu;
    gpu.major = 195;
    gpu.device = "/dev/nvidia0";
    gpu.vendor = "nvidia";
    gpu.utilization_percent = 99.5;
    d.gpus.push_back(gpu);
    d.peer = DetectionPeer{"203.0.113.7", 3333, "pool.example", "stratum1"};
    d.signature_ids = {"cmdline.xmrig", "pool.port.3333"};
    d.evidence.push_back({1000, "signature", "", "cmdline.xmrig", "cmdline", "xmrig -o"});
    d.action = "kill";
    return d;
}

template <typename F>
double format_rate(F&& format, double seconds) {
    const Detection d = detection(1);
    const auto start = Clock::now();
    size_t count = 0, bytes = 0;
    while (seconds_since(start) < seconds) {
        for (int i = 0; i < 256; ++i) bytes += format(d).size();
        count += 256;
    }
    if (bytes == 0) std::printf("?");
    return static_cast<double>(count) / seconds_since(start);
}

uint16_t free_port() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    close(fd);
    return ntohs(addr.sin_port);
}

bool port_accepts(uint16_t port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    return ok;
}

// Starts rsyslogd on `port` writing to dir/received.log; returns its pid or -1.
pid_t start_rsyslog(const std::filesystem::path& dir, uint16_t port) {
    std::filesystem::create_directories(dir / "spool");
    {
        std::ofstream conf(dir / "rsyslog.conf");
        conf << fmt::format(
            "global(workDirectory=\"{0}/spool\" maxMessageSize=\"64k\")\n"
            "module(load=\"imtcp\")\n"
            "ruleset(name=\"in\") {{ action(type=\"omfile\" file=\"{0}/received.log\") }}\n"
            "input(type=\"imtcp\" port=\"{1}\" ruleset=\"in\")\n",
            dir.string(), port);
    }
    const std::string conf = (dir / "rsyslog.conf").string();
    const std::string pidfile = (dir / "rsyslogd.pid").string();
    const pid_t pid = fork();
    if (pid == 0) {
        execl("/usr/sbin/rsyslogd", "rsyslogd", "-n", "-f", conf.c_str(), "-i", pidfile.c_str(),
              static_cast<char*>(nullptr));
        _exit(127);
    }
    for (int i = 0; i < 500 && !port_accepts(port); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!port_accepts(port)) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        return -1;
    }
    return pid;
}

// Alerts/s from the first publish() until all are acknowledged by rsyslog.
double tcp_rate(uint16_t port, const std::filesystem::path& queue_dir, int alerts) {
    siem::SinkConfig sink;
    sink.name = "rsyslog";
    sink.type = siem::SinkType::kTcp;
    sink.address = fmt::format("127.0.0.1:{}", port);
    sink.queue_dir = queue_dir;
    sink.queue_max_bytes = 1ull << 30;
    siem::RouterOptions options;
    options.host = host();
    options.sinks.push_back(sink);
    options.inbox_max = static_cast<size_t>(alerts) + 1;
    std::vector<Detection> records;
    for (int n = 0; n < alerts; ++n) records.push_back(detection(n));
    auto router = siem::AlertRouter::start(options);
    if (!router) {
        std::fprintf(stderr, "siem_bench: %s\n", router.error().message.c_str());
        return 0;
    }
    const auto start = Clock::now();
    for (const auto& d : records) (*router)->publish(d);
    if (!(*router)->flush(std::chrono::seconds(120))) {
        std::fprintf(stderr, "siem_bench: not delivered in time: %s\n",
                     (*router)->counters()[0].last_error.c_str());
        return 0;
    }
    const double elapsed = seconds_since(start);
    const auto counters = (*router)->counters()[0];
    if (counters.sent != static_cast<uint64_t>(alerts)) {
        std::fprintf(stderr, "siem_bench: sent %llu of %d\n",
                     static_cast<unsigned long long>(counters.sent), alerts);
    }
    return alerts / elapsed;
}

}  // namespace

int main(int argc, char** argv) {
    int alerts = 50000;
    double format_seconds = 0.5;
    double min_ratio = 0.5;
    for (int i = 1; i < argc; ++i) {
        if (std::strncmp(argv[i], "--alerts=", 9) == 0) {
            alerts = std::atoi(argv[i] + 9);
        } else if (std::strncmp(argv[i], "--format-seconds=", 17) == 0) {
            format_seconds = std::atof(argv[i] + 17);
        } else if (std::strncmp(argv[i], "--min-ratio=", 12) == 0) {
            min_ratio = std::atof(argv[i] + 12);
        } else {
            std::fprintf(stderr,
                         "usage: siem_bench [--alerts=N] [--format-seconds=S] [--min-ratio=R]\n");
            return 2;
        }
    }
    gpuguard::set_log_level("warn");
    const HostInfo h = host();
    siem::SyslogOptions syslog;
    std::printf("%-28s %14s\n", "case", "alerts/s");
    const auto row = [](const char* name, double rate) {
        std::printf("%-28s %14.0f\n", name, rate);
    };
    row("BM_Siem_format_ecs_json",
        format_rate([&](const Detection& d) { return siem::format_ecs_json(d, h); },
                    format_seconds));
    row("BM_Siem_format_cef",
        format_rate([&](const Detection& d) { return siem::format_cef(d, h); }, format_seconds));
    row("BM_Siem_format_leef",
        format_rate([&](const Detection& d) { return siem::format_leef(d, h); }, format_seconds));
    row("BM_Siem_format_ocsf",
        format_rate([&](const Detection& d) { return siem::format_ocsf(d, h); }, format_seconds));
    row("BM_Siem_format_rfc5424_ecs", format_rate(
                                          [&](const Detection& d) {
                                              return siem::format_syslog(siem::Framing::kRfc5424,
                                                                         siem::Format::kEcsJson, d,
                                                                         h, syslog);
                                          },
                                          format_seconds));

    char pattern[] = "/tmp/gpuguard-siem-bench-XXXXXX";
    if (mkdtemp(pattern) == nullptr) return 2;
    const std::filesystem::path dir = pattern;
    const uint16_t port = free_port();
    const pid_t rsyslog = start_rsyslog(dir / "rsyslog", port);
    int rc = 0;
    if (rsyslog < 0) {
        std::fprintf(stderr, "siem_bench: cannot start /usr/sbin/rsyslogd (apt install rsyslog)\n");
        rc = 2;
    } else {
        const double memory = tcp_rate(port, "", alerts);
        const double disk = tcp_rate(port, dir / "queue", alerts);
        row("BM_Siem_tcp_memory_queue", memory);
        row("BM_Siem_tcp_disk_queue", disk);
        const double ratio = memory > 0 ? disk / memory : 0;
        std::printf("disk/memory queue throughput: %.2f (must be >= %.2f): %s\n", ratio, min_ratio,
                    ratio >= min_ratio ? "ok" : "FAIL");
        if (ratio < min_ratio || memory <= 0 || disk <= 0) rc = 1;
        kill(rsyslog, SIGTERM);
        waitpid(rsyslog, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return rc;
}
