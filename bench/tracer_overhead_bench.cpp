// Added cost per syscall of watching GPU use, for processes that do not use
// a GPU, in one run: no tracing (baseline), gpuguard's sensor in each
// attachment mode the kernel allows (sensor.attach), each mode's floor, an
// equivalent bpftrace script (same in-kernel filter: device number of the
// opened inode, per-pid GPU gate for ioctl/connect), and auditd with a watch
// on the GPU node plus a syscall rule on openat/ioctl/connect.
//
// Nothing in the measured loops matches any tool's filter, so no tool writes
// a record: what is measured is what every process on a GPU host pays.
// getppid is hooked by no tool: its row is each tool's cost on all the other
// syscalls of the host.
//
// A mode's floor is empty programs (bench/floor.bpf.c) attached exactly as
// gpuguard attaches in that mode: the three syscall tracepoints; raw
// sys_enter + sys_exit (tp_btf, or plain raw tracepoints: "raw_untyped");
// fentry/fexit on the three syscall functions. What the mechanism costs
// before any program logic runs; gpuguard's own logic is its figure minus
// the floor.
//
// "watchlists" is gpuguard (auto mode) with its watch lists holding entries
// (not the bench's process nor address): the added cost of the lists on
// every connect.
//
// Needs root, bpftrace and auditd (bench/run_tracer_bench.sh installs them).
// It changes the host's audit rules for the auditd round only, removes
// exactly the rules it added, and stops auditd again if it started it.
//
// Usage: tracer_overhead_bench [--rounds=N]
//                              [--only=none,floor,gpuguard,watchlists,bpftrace,auditd]
//                              [--modes=kernel_functions,raw_syscalls,raw_untyped,
//                                       syscall_tracepoints]
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
#include <bpf/libbpf.h>
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
#include "gpuguard/sensor/sensor_probe.h"
#include "gpuguard_floor_bpf.skel.h"

namespace {

using gpuguard::agent::AttachMode;
using gpuguard::agent::GpuDeviceNumber;
using gpuguard::agent::Sensor;

// A mode as the bench names it: sensor.attach's name, or raw_untyped.
struct BenchMode {
    std::string name;
    AttachMode mode;
    bool untyped = false;  // raw_syscalls through plain raw tracepoints
};

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
    bool start(const BenchMode& mode, bool watch_lists = false) {
        gpuguard::agent::SensorOptions options;
        options.config.extra_gpu_devices = {GpuDeviceNumber{1, 7, "bench"}};
        options.config.attach = mode.mode;
        options.raw_syscalls_untyped = mode.untyped;
        auto sensor = Sensor::open(options, nullptr);
        if (!sensor) {
            std::fprintf(stderr, "gpuguard (%s): %s\n", mode.name.c_str(),
                         sensor.error().message.c_str());
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

// A mode's floor: its empty programs from bench/floor.bpf.c, attached.
class FloorTracer {
  public:
    bool start(const BenchMode& mode) {
        skeleton_ = gpuguard_floor_bpf__open();
        if (!skeleton_) return false;
        auto& p = skeleton_->progs;
        std::vector<bpf_program*> wanted;
        switch (mode.mode) {
            case AttachMode::kKernelFunctions:
                wanted = {p.floor_fn_openat, p.floor_fn_ioctl, p.floor_fn_connect};
                break;
            case AttachMode::kRawSyscalls:
                wanted = mode.untyped
                             ? std::vector<bpf_program*>{p.floor_raw_enter, p.floor_raw_exit}
                             : std::vector<bpf_program*>{p.floor_btf_enter, p.floor_btf_exit};
                break;
            default:
                wanted = {p.floor_tp_openat, p.floor_tp_ioctl, p.floor_tp_connect};
                break;
        }
        bpf_program* program = nullptr;
        bpf_object__for_each_program(program, skeleton_->obj) {
            bpf_program__set_autoload(
                program, std::find(wanted.begin(), wanted.end(), program) != wanted.end());
        }
        if (gpuguard_floor_bpf__load(skeleton_) != 0) {
            std::fprintf(stderr, "floor (%s): load refused\n", mode.name.c_str());
            return false;
        }
        for (bpf_program* hook : wanted) {
            bpf_link* link = bpf_program__attach(hook);
            if (!link) {
                std::fprintf(stderr, "floor (%s): attach refused\n", mode.name.c_str());
                return false;
            }
            links_.push_back(link);
        }
        return true;
    }
    void stop() {
        for (bpf_link* link : links_) bpf_link__destroy(link);
        links_.clear();
        if (skeleton_) gpuguard_floor_bpf__destroy(skeleton_);
        skeleton_ = nullptr;
    }
    ~FloorTracer() { stop(); }

  private:
    gpuguard_floor_bpf* skeleton_ = nullptr;
    std::vector<bpf_link*> links_;
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
    std::string mode_list = "kernel_functions,raw_syscalls,raw_untyped,syscall_tracepoints";
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strncmp(argv[i], "--rounds=", 9) == 0) {
            rounds = std::max(1, std::atoi(argv[i] + 9));
        } else if (std::strncmp(argv[i], "--only=", 7) == 0) {
            only = argv[i] + 7;
        } else if (std::strncmp(argv[i], "--modes=", 8) == 0) {
            mode_list = argv[i] + 8;
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

    // The modes asked for that this kernel allows (the probe decides, as for the agent).
    std::vector<BenchMode> modes;
    for (const BenchMode& candidate :
         {BenchMode{"kernel_functions", AttachMode::kKernelFunctions},
          BenchMode{"raw_syscalls", AttachMode::kRawSyscalls},
          BenchMode{"raw_untyped", AttachMode::kRawSyscalls, true},
          BenchMode{"syscall_tracepoints", AttachMode::kSyscallTracepoints}}) {
        if (mode_list.find(candidate.name) == std::string::npos) continue;
        const auto decision = gpuguard::agent::decide_attach_mode(candidate.mode, "");
        if (decision.mode == AttachMode::kAuto || (candidate.mode == AttachMode::kRawSyscalls &&
                                                   !candidate.untyped && !decision.raw_btf)) {
            std::printf("mode %s: not on this kernel (%s)\n", candidate.name.c_str(),
                        decision.reason.c_str());
            continue;
        }
        modes.push_back(candidate);
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
    const auto wanted = [&](const char* tool) { return only.find(tool) != std::string::npos; };
    const auto measure = [&](const std::string& key) {
        reporter.current_mode = key;
        benchmark::RunSpecifiedBenchmarks(&reporter);
    };
    bool failed = false;
    for (int round = 0; round < rounds && !failed; ++round) {
        if (wanted("none")) measure("none");
        for (const BenchMode& mode : modes) {
            if (wanted("floor")) {
                FloorTracer floor;
                if (!floor.start(mode)) {
                    failed = true;
                    break;
                }
                measure("floor:" + mode.name);
            }
            if (wanted("gpuguard")) {
                GpuguardTracer tracer;
                if (!tracer.start(mode)) {
                    failed = true;
                    break;
                }
                measure("gpuguard:" + mode.name);
                tracer.stop();
            }
        }
        if (wanted("watchlists")) {
            GpuguardTracer tracer;
            if (tracer.start(BenchMode{"auto", AttachMode::kAuto}, true)) {
                measure("watchlists");
            } else {
                failed = true;
            }
            tracer.stop();
        }
        if (wanted("bpftrace")) {
            BpftraceTracer tracer;
            if (tracer.start(kEquivalentProgram)) {
                measure("bpftrace");
            } else {
                failed = true;
            }
            tracer.stop();
        }
        if (wanted("auditd")) {
            AuditdTracer tracer;
            if (tracer.start(bench_fixture.gpu_node)) {
                measure("auditd");
            } else {
                failed = true;
            }
            tracer.stop();
        }
    }
    std::filesystem::remove_all(dir);

    auto& t = reporter.times_ns;
    const char* const calls[] = {"openat+close", "ioctl", "connect", "getppid"};
    // The fastest round of each: on a shared VM, noise (steal, neighbours)
    // only ever adds time, and it moves medians by more than the differences
    // measured here (a bare openat+close ranged 1.0-1.6 us between rounds).
    const auto fastest = [&](const std::string& key, const char* name) {
        const auto& times = t[key][name];
        return times.empty() ? 0.0 : *std::min_element(times.begin(), times.end());
    };
    const auto added = [&](const std::string& key, const char* call) {
        return t[key][call].empty() ? 0.0 : fastest(key, call) - fastest("none", call);
    };
    std::printf(
        "\nns per syscall, fastest of %d round(s) (medians at the end); added = tool - "
        "none\n",
        rounds);
    std::printf("%-13s %9s %11s %10s %11s\n", "syscall", "none", "bpftrace +", "auditd +",
                "watchlists +");
    for (const char* call : calls) {
        std::printf("%-13s %9.1f %11.1f %10.1f %11.1f\n", call, median(t["none"][call]),
                    added("bpftrace", call), added("auditd", call), added("watchlists", call));
    }
    for (const BenchMode& mode : modes) {
        std::printf("\nmode %s\n%-13s %9s %11s %9s %12s %10s\n", mode.name.c_str(), "syscall",
                    "floor +", "gpuguard +", "logic", "gg/bpftrace", "gg/auditd");
        for (const char* call : calls) {
            const double floor = added("floor:" + mode.name, call);
            const double gg = added("gpuguard:" + mode.name, call);
            const double bt = added("bpftrace", call);
            const double au = added("auditd", call);
            std::printf("%-13s %9.1f %11.1f %9.1f %11.2fx %9.2fx\n", call, floor, gg, gg - floor,
                        bt > 0 ? gg / bt : 0.0, au > 0 ? gg / au : 0.0);
        }
    }
    // Issue 27's goals, for raw_syscalls (what auto picks where fentry is refused).
    const std::string raw = "gpuguard:raw_syscalls";
    if (!t[raw].empty()) {
        struct Goal {
            const char* call;
            double most_ns;
        };
        std::printf("\ngoals, raw_syscalls:\n");
        for (const Goal goal :
             {Goal{"openat+close", 160}, Goal{"ioctl", 90}, Goal{"connect", 160}}) {
            const double gg = added(raw, goal.call);
            const double bt = added("bpftrace", goal.call);
            std::printf(
                "  %-13s +%.1f ns (goal <= %.0f): %s; %s\n", goal.call, gg, goal.most_ns,
                gg <= goal.most_ns ? "met" : "MISSED",
                bt <= 0 ? "no bpftrace round"
                : gg <= bt / 4
                    ? ("<= 1/4 of bpftrace (" + std::to_string(gg / bt) + "x): met").c_str()
                    : ("> 1/4 of bpftrace (" + std::to_string(gg / bt) + "x): MISSED").c_str());
        }
        const double over_floor = added(raw, "getppid") - added("floor:raw_syscalls", "getppid");
        std::printf("  getppid       +%.1f ns over the empty raw programs (goal <= 10): %s\n",
                    over_floor, over_floor <= 10 ? "met" : "MISSED");
    }
    std::printf("\nmedians, ns added (for comparison with the fastest rounds above):\n");
    for (const auto& [key, calls_of_key] : t) {
        if (key == "none") continue;
        std::printf("  %-28s", key.c_str());
        for (const char* call : calls) {
            const auto& times = t[key][call];
            std::printf(" %s %+.1f", call,
                        times.empty() ? 0.0 : median(times) - median(t["none"][call]));
        }
        std::printf("\n");
    }
    return failed ? 1 : 0;
}
