// Added cost per syscall of watching GPU use, for processes that do not use
// a GPU, in one run: no tracing (baseline), gpuguard's sensor, an equivalent
// bpftrace script (same tracepoints, same in-kernel filter: device number of
// the opened inode, per-pid GPU gate for ioctl/connect), and auditd with a
// watch on the GPU node plus a syscall rule on openat/ioctl/connect.
//
// Nothing in the measured loops matches any tool's filter, so no tool writes
// a record: what is measured is what every process on a GPU host pays.
// getppid is hooked by no tool: its row is each tool's cost on all the other
// syscalls of the host.
//
// "floor" is bpftrace with empty programs on exactly the tracepoints
// gpuguard uses for these calls (sys_exit_openat, sys_enter_ioctl,
// sys_exit_connect): what the tracepoint mechanism costs before any program
// logic runs, the least any syscall-tracepoint sensor can add. gpuguard's
// own logic is its figure minus the floor.
//
// Needs root, bpftrace and auditd (bench/run_tracer_bench.sh installs them).
// It changes the host's audit rules for the auditd round only, removes
// exactly the rules it added, and stops auditd again if it started it.
//
// "watchlists" is gpuguard with its watch lists holding entries (not the
// bench's process nor address): the added cost of the lists on every connect.
//
// Usage: tracer_overhead_bench [--rounds=N]
//                              [--only=none,floor,gpuguard,watchlists,bpftrace,auditd]
//                              [google benchmark flags]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/sensor/sensor.h"

namespace {

using gpuguard::agent::GpuDeviceNumber;
using gpuguard::agent::Sensor;

struct Fixture {
    std::string regular_file;
    std::string gpu_node;  // 1:7, registered as the GPU in every tool
    int ioctl_fd = -1;     // /dev/null: a char device that is not a GPU
    int udp_fd = -1;
    sockaddr_in udp_peer{};
};
void BM_openat(benchmark::State& state, const Fixture& fixture) {
    for (auto _ : state) {
        const int fd = open(fixture.regular_file.c_str(), O_RDONLY);
        close(fd);
    }
}

void BM_ioctl(benchmark::State& state, const Fixture& fixture) {
    termios tio{};
    for (auto _ : state) benchmark::DoNotOptimize(ioctl(fixture.ioctl_fd, TCGETS, &tio));
}

// A syscall none of the tools hooks: what they cost every other syscall.
void BM_getppid(benchmark::State& state) {
    for (auto _ : state) benchmark::DoNotOptimize(getppid());
}

void BM_connect(benchmark::State& state, const Fixture& fixture) {
    // UDP connect sets the peer: a full connect(2) syscall with no packet sent.
    for (auto _ : state) {
        benchmark::DoNotOptimize(connect(fixture.udp_fd,
                                         reinterpret_cast<const sockaddr*>(&fixture.udp_peer),
                                         sizeof(fixture.udp_peer)));
    }
}

class CollectingReporter : public benchmark::ConsoleReporter {
  public:
    void ReportRuns(const std::vector<Run>& runs) override {
        for (const auto& run : runs) {
            if (run.run_type == Run::RT_Iteration) {
                times_ns[current_mode][run.benchmark_name()].push_back(run.GetAdjustedRealTime());
            }
        }
        ConsoleReporter::ReportRuns(runs);
    }
    std::string current_mode;
    std::map<std::string, std::map<std::string, std::vector<double>>> times_ns;
};

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values.empty() ? 0 : values[values.size() / 2];
}

int run_quiet(const std::string& command) {
    return std::system((command + " >/dev/null 2>&1").c_str());
}

// gpuguard: the sensor as `gpuguard run` loads it, consumer thread included.
// With `watch_lists`, its watch lists hold a process and an address (neither
// the bench's), as on a host where miners were seen: every connect then also
// pays the watched_tgids lookup and the address read and lookup.
class GpuguardTracer {
  public:
    bool start(bool watch_lists = false) {
        gpuguard::agent::SensorOptions options;
        options.config.extra_gpu_devices = {GpuDeviceNumber{1, 7, "bench"}};
        auto sensor = Sensor::open(options, nullptr);
        if (!sensor) {
            std::fprintf(stderr, "gpuguard: %s\n", sensor.error().message.c_str());
            return false;
        }
        sensor_.emplace(std::move(sensor).value());
        if (watch_lists && (!sensor_->watch_process(0x3ffffff0u) ||  // above pid_max
                            !sensor_->watch_address("192.0.2.1", 0))) {
            std::fprintf(stderr, "gpuguard: watch lists refused an entry\n");
            return false;
        }
        stop_ = false;
        consumer_ = std::thread([this] {
            while (!stop_) (void)sensor_->poll(std::chrono::milliseconds(50));
        });
        return true;
    }
    void stop() {
        stop_ = true;
        if (consumer_.joinable()) consumer_.join();
        sensor_.reset();
    }

  private:
    std::optional<Sensor> sensor_;
    std::atomic<bool> stop_{false};
    std::thread consumer_;
};

// Same filters as ours: device number of the opened inode, per-pid GPU
// gate, and the default watched ports for connects from any process: the
// same logic as bpf/open.bpf.c, ioctl.bpf.c, connect.bpf.c.
const char* const kEquivalentProgram = R"(
BEGIN { @watched[3333] = 1; @watched[3334] = 1; @watched[4444] = 1; @watched[5555] = 1;
        @watched[7777] = 1; @watched[14433] = 1; @watched[14444] = 1; @watched[45700] = 1; }
tracepoint:syscalls:sys_exit_openat /args->ret >= 0/ {
  $file = *(((struct task_struct *)curtask)->files->fdt->fd + args->ret);
  $inode = $file->f_inode;
  if (($inode->i_mode & 0xf000) == 0x2000 && $inode->i_rdev == 0x100007) { @gpu[pid] = 1; printf("gpu open %d\n", pid); }
}
tracepoint:syscalls:sys_enter_ioctl /@gpu[pid]/ {
  $file = *(((struct task_struct *)curtask)->files->fdt->fd + args->fd);
  if ($file->f_inode->i_rdev == 0x100007) { @ioctls[pid, args->cmd] = count(); }
}
tracepoint:syscalls:sys_enter_connect {
  $sa = (struct sockaddr_in *)args->uservaddr;
  $port = (($sa->sin_port & 0xff) << 8) | ($sa->sin_port >> 8);
  if (@gpu[pid] || @watched[$port]) { printf("connect %d %d\n", pid, $port); }
}
)";

// Nothing but the attachment: gpuguard's tracepoints for these three calls.
const char* const kFloorProgram = R"(
tracepoint:syscalls:sys_exit_openat { }
tracepoint:syscalls:sys_enter_ioctl { }
tracepoint:syscalls:sys_exit_connect { }
)";

// bpftrace running one of the programs above until stop().
class BpftraceTracer {
  public:
    bool start(const std::string& program) {
        int out[2];
        if (pipe(out) != 0) return false;
        pid_ = fork();
        if (pid_ == 0) {
            dup2(out[1], STDOUT_FILENO);
            dup2(out[1], STDERR_FILENO);
            close(out[0]);
            execlp("bpftrace", "bpftrace", "-e", program.c_str(), static_cast<char*>(nullptr));
            _exit(127);
        }
        close(out[1]);
        // bpftrace prints "Attaching N probes..." before attaching; give it a moment after.
        std::string seen;
        char buffer[256];
        pollfd entry{out[0], POLLIN, 0};
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (seen.find("Attaching") == std::string::npos &&
               std::chrono::steady_clock::now() < deadline && poll(&entry, 1, 1000) >= 0) {
            const ssize_t n = read(out[0], buffer, sizeof(buffer));
            if (n <= 0) break;
            seen.append(buffer, static_cast<size_t>(n));
        }
        output_fd_ = out[0];
        if (seen.find("Attaching") == std::string::npos) {
            std::fprintf(stderr, "bpftrace did not start: %s\n", seen.c_str());
            stop();
            return false;
        }
        std::this_thread::sleep_for(std::chrono::seconds(2));
        return true;
    }
    void stop() {
        if (pid_ > 0) {
            kill(pid_, SIGINT);
            waitpid(pid_, nullptr, 0);
            pid_ = -1;
        }
        if (output_fd_ >= 0) close(output_fd_);
        output_fd_ = -1;
    }

  private:
    pid_t pid_ = -1;
    int output_fd_ = -1;
};

// auditd with a watch on the GPU node and a syscall rule for the three calls,
// filtered to a uid the benchmark does not run as (audit cannot filter on a
// device number or a per-process GPU mark, so this is its closest equivalent).
class AuditdTracer {
  public:
    bool start(const std::string& gpu_node) {
        watch_ = "-w " + gpu_node + " -p rwa -k gpuguard_bench";
        rule_ = "always,exit -F arch=b64 -S openat,ioctl,connect -F uid=65534 -k gpuguard_bench";
        if (run_quiet("pgrep -x auditd") != 0) {
            if (run_quiet("auditd") != 0) {
                std::fprintf(stderr, "auditd: cannot start it\n");
                return false;
            }
            started_daemon_ = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
        if (run_quiet("auditctl -a " + rule_) != 0 || run_quiet("auditctl " + watch_) != 0) {
            std::fprintf(stderr, "auditd: auditctl refused the rules\n");
            stop();
            return false;
        }
        return true;
    }
    void stop() {
        // Only the rules we added, never the host's others.
        run_quiet("auditctl -d " + rule_);
        std::string unwatch = watch_;
        unwatch.replace(0, 2, "-W");
        run_quiet("auditctl " + unwatch);
        if (started_daemon_) {
            run_quiet("pkill -x auditd");
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            run_quiet("auditctl -e 0");
            started_daemon_ = false;
        }
    }

  private:
    std::string watch_, rule_;
    bool started_daemon_ = false;
};

}  // namespace

int main(int argc, char** argv) {
    int rounds = 3;
    std::string only = "none,floor,gpuguard,watchlists,bpftrace,auditd";
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strncmp(argv[i], "--rounds=", 9) == 0) {
            rounds = std::max(1, std::atoi(argv[i] + 9));
        } else if (std::strncmp(argv[i], "--only=", 7) == 0) {
            only = argv[i] + 7;
        } else {
            args.push_back(argv[i]);
        }
    }
    int bench_argc = static_cast<int>(args.size());
    benchmark::Initialize(&bench_argc, args.data());
    gpuguard::set_log_level("warn");
    if (geteuid() != 0) {
        std::fprintf(stderr, "tracer_overhead_bench: run as root\n");
        return 1;
    }

    char dir_template[] = "/tmp/gg-tracer-bench-XXXXXX";
    if (!mkdtemp(dir_template)) return 1;
    const std::filesystem::path dir = dir_template;
    Fixture bench_fixture;
    bench_fixture.regular_file = (dir / "regular").string();
    bench_fixture.gpu_node = (dir / "gpu0").string();
    std::ofstream(bench_fixture.regular_file) << "x";
    if (mknod(bench_fixture.gpu_node.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) return 1;
    bench_fixture.ioctl_fd = open("/dev/null", O_RDONLY);
    bench_fixture.udp_fd = socket(AF_INET, SOCK_DGRAM, 0);
    bench_fixture.udp_peer.sin_family = AF_INET;
    bench_fixture.udp_peer.sin_port = htons(9);  // discard: loopback, not a watched port
    bench_fixture.udp_peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

    const Fixture& fixture = bench_fixture;
    benchmark::RegisterBenchmark("openat+close",
                                 [&](benchmark::State& s) { BM_openat(s, fixture); });
    benchmark::RegisterBenchmark("ioctl", [&](benchmark::State& s) { BM_ioctl(s, fixture); });
    benchmark::RegisterBenchmark("connect", [&](benchmark::State& s) { BM_connect(s, fixture); });
    benchmark::RegisterBenchmark("getppid", BM_getppid);

    CollectingReporter reporter;
    const auto wanted = [&](const char* mode) { return only.find(mode) != std::string::npos; };
    // One round of the benchmarks with bpftrace running `program`.
    const auto run_under_bpftrace = [&](const char* mode, const char* program) {
        BpftraceTracer tracer;
        const bool started = tracer.start(program);
        if (started) {
            reporter.current_mode = mode;
            benchmark::RunSpecifiedBenchmarks(&reporter);
        }
        tracer.stop();
        return started;
    };
    bool failed = false;
    for (int round = 0; round < rounds && !failed; ++round) {
        if (wanted("none")) {
            reporter.current_mode = "none";
            benchmark::RunSpecifiedBenchmarks(&reporter);
        }
        if (wanted("floor")) failed |= !run_under_bpftrace("floor", kFloorProgram);
        for (const char* mode : {"gpuguard", "watchlists"}) {
            if (!wanted(mode)) continue;
            GpuguardTracer tracer;
            if (!tracer.start(std::string_view(mode) == "watchlists")) {
                failed = true;
                break;
            }
            reporter.current_mode = mode;
            benchmark::RunSpecifiedBenchmarks(&reporter);
            tracer.stop();
        }
        if (wanted("bpftrace")) failed |= !run_under_bpftrace("bpftrace", kEquivalentProgram);
        if (wanted("auditd")) {
            AuditdTracer tracer;
            if (tracer.start(bench_fixture.gpu_node)) {
                reporter.current_mode = "auditd";
                benchmark::RunSpecifiedBenchmarks(&reporter);
            } else {
                failed = true;
            }
            tracer.stop();
        }
    }
    std::filesystem::remove_all(dir);

    auto& t = reporter.times_ns;
    std::printf("\nns per syscall, median of %d round(s); added = tool - none\n", rounds);
    std::printf("%-13s %9s %9s %12s %12s %12s %10s %11s %11s %13s\n", "syscall", "none", "floor +",
                "gpuguard +", "watchlists +", "bpftrace +", "auditd +", "gg/bpftrace", "gg/auditd",
                "floor/auditd");
    for (const char* name : {"openat+close", "ioctl", "connect", "getppid"}) {
        const double none = median(t["none"][name]);
        const double floor = median(t["floor"][name]) - none;
        const double gg = median(t["gpuguard"][name]) - none;
        const double lists = median(t["watchlists"][name]) - none;
        const double bt = median(t["bpftrace"][name]) - none;
        const double au = median(t["auditd"][name]) - none;
        std::printf("%-13s %9.1f %9.1f %12.1f %12.1f %12.1f %10.1f %10.2fx %10.2fx %12.2fx\n", name,
                    none, floor, gg, lists, bt, au, bt > 0 ? gg / bt : 0.0, au > 0 ? gg / au : 0.0,
                    au > 0 ? floor / au : 0.0);
    }
    // A loaded host moves medians by more than the watch lists cost; the
    // fastest round of each is the least disturbed.
    const auto fastest = [&](const char* mode, const char* name) {
        const auto& times = t[mode][name];
        return times.empty() ? 0.0 : *std::min_element(times.begin(), times.end());
    };
    std::printf("fastest round, ns: connect none %.1f, gpuguard +%.1f, watchlists +%.1f\n",
                fastest("none", "connect"),
                fastest("gpuguard", "connect") - fastest("none", "connect"),
                fastest("watchlists", "connect") - fastest("none", "connect"));
    return failed ? 1 : 0;
}
