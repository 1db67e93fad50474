// Detection-to-death latency of the enforcer, p50/p99 over N runs each,
// against what admins script today: a killer that polls /proc every second
// for the miner's name, measured the same way in the same run.
//
//   kernel kill_now (exec)      exec of a known-bad binary (a copy of sleep
//                               registered by inode) -> death by the
//                               sched_process_exec program's bpf_send_signal
//   user-space kill (connect)   a process holding the fake GPU node (1:7)
//                               connects to a miner port -> sensor connect
//                               event -> Enforcer::kill (pidfd SIGTERM) -> death
//   (of which exec hook -> exit hook: the kill_now event's and the exit
//    event's kernel timestamps, the part the BPF program controls)
//   baseline: /proc poll 1 s    exec of the same binary -> a loop that scans
//                               /proc/*/comm once a second and SIGKILLs it
//
// The start is stamped by the child itself (CLOCK_MONOTONIC, shared memory)
// right before execve()/connect(); the end is when the parent's waitpid or
// pidfd reports the death. Root only (loads BPF).
//
// Usage: enforce_bench [--runs=N] [--baseline-runs=N]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/enforce/enforcer.h"
#include "gpuguard/sensor/sensor.h"
#include "gpuguard/state/process_handle.h"

namespace {

// sensor.attach for the in-process sensor and the agent's config (--attach=).
gpuguard::agent::AttachMode g_attach = gpuguard::agent::AttachMode::kAuto;

using namespace gpuguard::agent;
using gpuguard::DetectionProcess;

uint64_t now_ns() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull + now.tv_nsec;
}

struct Stats {
    double p50_ms = 0, p99_ms = 0, max_ms = 0;
    size_t runs = 0;
};

Stats summarise(std::vector<uint64_t> samples) {
    Stats stats;
    stats.runs = samples.size();
    if (samples.empty()) return stats;
    std::sort(samples.begin(), samples.end());
    const auto at = [&](double q) {
        const size_t index = std::min(samples.size() - 1,
                                      static_cast<size_t>(q * static_cast<double>(samples.size())));
        return static_cast<double>(samples[index]) / 1e6;
    };
    stats.p50_ms = at(0.50);
    stats.p99_ms = at(0.99);
    stats.max_ms = static_cast<double>(samples.back()) / 1e6;
    return stats;
}

// One word of memory shared with the children: their start stamp.
volatile uint64_t* shared_stamp() {
    void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return page == MAP_FAILED ? nullptr : static_cast<volatile uint64_t*>(page);
}

pid_t exec_stamped(volatile uint64_t* stamp, const std::string& path, const char* name) {
    const pid_t pid = fork();
    if (pid == 0) {
        *stamp = now_ns();
        execl(path.c_str(), name, "30", static_cast<char*>(nullptr));
        _exit(127);
    }
    return pid;
}

// Waits for `pid` (bounded) and returns death - stamp, or 0 when it exited by itself.
uint64_t wait_death(pid_t pid, volatile uint64_t* stamp) {
    int status = 0;
    waitpid(pid, &status, 0);
    const uint64_t end = now_ns();
    if (!WIFSIGNALED(status)) return 0;
    return end - *stamp;
}

std::vector<uint64_t> run_kernel(Sensor& sensor, const std::string& miner, size_t runs,
                                 volatile uint64_t* stamp) {
    auto file = file_identity(miner);
    if (!file || !sensor.add_known_bad_file(file->dev, file->ino, 1)) return {};
    std::vector<uint64_t> samples;
    for (size_t i = 0; i < runs; ++i) {
        const pid_t pid = exec_stamped(stamp, miner, "gg-bench-miner");
        if (const uint64_t latency = wait_death(pid, stamp)) samples.push_back(latency);
        (void)sensor.poll(std::chrono::milliseconds(0));  // keep the ring buffer drained
    }
    (void)sensor.remove_known_bad_file(file->dev, file->ino);
    return samples;
}

// The "pool": a listener on 127.0.0.1:3333 (a miner port) whose address
// the children connect to; -1 (and a message) when the port is taken.
int listen_as_pool(sockaddr_in& address) {
    const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int on = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    address = sockaddr_in{};
    address.sin_family = AF_INET;
    address.sin_port = htons(3333);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        listen(listener, 256) != 0) {
        std::fprintf(stderr, "cannot listen on 127.0.0.1:3333: %s\n", std::strerror(errno));
        close(listener);
        return -1;
    }
    return listener;
}

// A child that opens the fake GPU node (a GPU holder from then on), stamps
// the time and connects to the pool; it waits at most 10 s to be killed.
pid_t start_gpu_connector(const std::string& node, const sockaddr_in& address,
                          volatile uint64_t* stamp) {
    const pid_t pid = fork();
    if (pid == 0) {
        const int gpu = open(node.c_str(), O_RDONLY);
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        *stamp = now_ns();
        (void)!connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
        for (int second = 0; second < 10; ++second) sleep(1);
        (void)gpu;
        _exit(0);
    }
    return pid;
}

std::vector<uint64_t> run_user_space(Sensor& sensor, uint32_t& connect_pid, const std::string& node,
                                     size_t runs, volatile uint64_t* stamp) {
    sockaddr_in address{};
    const int listener = listen_as_pool(address);
    if (listener < 0) return {};
    EnforcementConfig config;
    config.max_actions_per_minute = 0;
    config.grace_period_ms = 5000;
    Enforcer enforcer(config);
    std::vector<uint64_t> samples;
    for (size_t i = 0; i < runs; ++i) {
        const pid_t pid = start_gpu_connector(node, address, stamp);
        connect_pid = 0;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (connect_pid != static_cast<uint32_t>(pid) &&
               std::chrono::steady_clock::now() < deadline) {
            (void)sensor.poll(std::chrono::milliseconds(100));
        }
        if (connect_pid == static_cast<uint32_t>(pid)) {
            // The detection: a GPU holder connecting to a stratum port -> kill.
            DetectionProcess target;
            target.pid = connect_pid;
            (void)enforcer.kill(target, KillOptions{});
        } else {
            kill(pid, SIGKILL);
        }
        if (const uint64_t latency = wait_death(pid, stamp)) samples.push_back(latency);
        int client = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK);
        if (client >= 0) close(client);
    }
    close(listener);
    return samples;
}

// The whole agent as it runs on a host: `gpuguard run` with a rule that
// kills a GPU holder connecting to a miner port (GG-PORT-0001, action kill),
// so the path is sensor -> process table -> correlator -> enforcer worker ->
// pidfd SIGTERM, in another process. Its own sensor, started for this row.
std::vector<uint64_t> run_full_agent(const std::filesystem::path& dir, const std::string& node,
                                     size_t runs, volatile uint64_t* stamp) {
    std::filesystem::create_directories(dir / "rules.d");
    std::FILE* rules = std::fopen((dir / "rules.d/10-kill.yaml").c_str(), "w");
    std::FILE* config = std::fopen((dir / "gpuguard.yaml").c_str(), "w");
    if (!rules || !config) return {};
    std::fputs("signatures:\n  override:\n    - id: GG-PORT-0001\n      action: kill\n", rules);
    std::fclose(rules);
    std::fprintf(config,
                 "sensor:\n  attach: %s\n  extra_gpu_devices: [\"1:7\"]\n  connect_loopback: "
                 "true\n"
                 "control:\n  socket: %s/control.sock\n"
                 "rules:\n  main_file: %s/miner-rules.yaml\n  drop_in_dir: %s/rules.d\n"
                 "journal:\n  enabled: false\n"
                 "enforcement:\n  dry_run: false\n  max_actions_per_minute: 0\n",
                 std::string(attach_mode_name(g_attach)).c_str(), dir.c_str(), dir.c_str(),
                 dir.c_str());
    std::fclose(config);
    const std::string log = dir / "agent.log";
    const pid_t agent = fork();
    if (agent == 0) {
        const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(out, STDERR_FILENO);
        dup2(out, STDOUT_FILENO);
        execl(GPUGUARD_BINARY, "gpuguard", "run", "--config", (dir / "gpuguard.yaml").c_str(),
              static_cast<char*>(nullptr));
        _exit(127);
    }
    // Ready once it says so (sensor attached, rules loaded).
    bool ready = false;
    for (int i = 0; i < 600 && !ready; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        std::FILE* in = std::fopen(log.c_str(), "r");
        char line[1024];
        while (in && std::fgets(line, sizeof(line), in))
            ready |= std::strstr(line, "] ready") != nullptr;
        if (in) std::fclose(in);
    }
    std::vector<uint64_t> samples;
    sockaddr_in address{};
    const int listener = listen_as_pool(address);
    if (!ready || listener < 0) {
        std::fprintf(stderr, "enforce_bench: the agent is not ready (%s) or no pool\n",
                     log.c_str());
        runs = 0;
    }
    for (size_t i = 0; i < runs; ++i) {
        const pid_t pid = start_gpu_connector(node, address, stamp);
        if (const uint64_t latency = wait_death(pid, stamp)) samples.push_back(latency);
        int client = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK);
        if (client >= 0) close(client);
    }
    close(listener);
    kill(agent, SIGTERM);
    waitpid(agent, nullptr, 0);
    return samples;
}

std::vector<uint64_t> run_baseline(const std::string& miner, size_t runs,
                                   volatile uint64_t* stamp) {
    std::atomic<bool> stop{false};
    std::thread poller([&] {
        while (!stop) {
            std::error_code ec;
            for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
                const std::string name = entry.path().filename().string();
                if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
                const uint32_t pid = static_cast<uint32_t>(std::stoul(name));
                auto stat = read_proc_stat(pid);
                if (stat && stat->comm == "gg-bench-base") kill(static_cast<pid_t>(pid), SIGKILL);
            }
            for (int i = 0; i < 100 && !stop; ++i) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
        }
    });
    std::vector<uint64_t> samples;
    unsigned seed = 12345;
    for (size_t i = 0; i < runs; ++i) {
        // Start at a random phase of the poll period, as a real miner would.
        std::this_thread::sleep_for(std::chrono::milliseconds(rand_r(&seed) % 1000));
        const pid_t pid = exec_stamped(stamp, miner, "gg-bench-base");
        if (const uint64_t latency = wait_death(pid, stamp)) samples.push_back(latency);
    }
    stop = true;
    poller.join();
    return samples;
}

size_t flag_value(int argc, char** argv, const char* name, size_t fallback) {
    const std::string prefix = std::string("--") + name + "=";
    for (int i = 1; i < argc; ++i) {
        if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
            return std::stoul(argv[i] + prefix.size());
        }
    }
    return fallback;
}

}  // namespace

int main(int argc, char** argv) {
    gpuguard::set_log_level("warn");
    const size_t runs = flag_value(argc, argv, "runs", 100);
    const size_t baseline_runs = flag_value(argc, argv, "baseline-runs", 100);
    if (geteuid() != 0) {
        std::fprintf(stderr, "enforce_bench: needs root (loads BPF)\n");
        return 1;
    }
    char dir_template[] = "/tmp/gg-enforce-bench-XXXXXX";
    if (!mkdtemp(dir_template)) return 1;
    const std::filesystem::path dir = dir_template;
    const std::string miner = dir / "gg-bench-miner";
    const std::string base = dir / "gg-bench-base";
    const std::string node = dir / "gpu0";
    std::filesystem::copy_file("/bin/sleep", miner);
    std::filesystem::copy_file("/bin/sleep", base);
    std::filesystem::permissions(miner, std::filesystem::perms::owner_all);
    std::filesystem::permissions(base, std::filesystem::perms::owner_all);
    mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7));

    volatile uint64_t* stamp = shared_stamp();
    uint32_t connect_pid = 0;
    std::map<uint32_t, uint64_t> kill_ts, exit_ts;  // kernel timestamps per pid
    SensorOptions options;
    options.config.extra_gpu_devices = {GpuDeviceNumber{1, 7, "bench"}};
    options.config.connect_loopback = true;
    // --attach=MODE: sensor.attach (auto by default), to compare modes.
    for (int i = 1; i < argc; ++i) {
        if (std::strncmp(argv[i], "--attach=", 9) != 0) continue;
        const auto mode = gpuguard::agent::parse_attach_mode(argv[i] + 9);
        if (!mode) {
            std::fprintf(stderr, "enforce_bench: %s is not a sensor.attach mode\n", argv[i] + 9);
            return 2;
        }
        options.config.attach = *mode;
        g_attach = *mode;
    }
    auto sensor = Sensor::open(options, [&](const Event& event) {
        if (const auto* connect = std::get_if<Connect>(&event.data)) {
            if (connect->gpu_holder && connect->port == 3333) connect_pid = event.task.pid;
        } else if (std::holds_alternative<KillNow>(event.data)) {
            kill_ts[event.task.pid] = event.ts_ns;
        } else if (std::holds_alternative<Exit>(event.data)) {
            exit_ts[event.task.pid] = event.ts_ns;
        }
    });
    if (!sensor) {
        std::fprintf(stderr, "enforce_bench: %s\n", sensor.error().message.c_str());
        return 1;
    }
    std::optional<Sensor> held(std::move(sensor).value());
    std::printf("sensor attach mode: %s\n",
                std::string(attach_mode_name(held->attach_mode())).c_str());
    const Stats kernel = summarise(run_kernel(*held, miner, runs, stamp));
    (void)held->poll(std::chrono::milliseconds(200));
    std::vector<uint64_t> in_kernel;
    for (const auto& [pid, ts] : kill_ts) {
        if (const auto it = exit_ts.find(pid); it != exit_ts.end() && it->second >= ts) {
            in_kernel.push_back(it->second - ts);
        }
    }
    const Stats signal_to_exit = summarise(in_kernel);
    const Stats user = summarise(run_user_space(*held, connect_pid, node, runs, stamp));
    held.reset();  // the agent below attaches its own
    const Stats agent = summarise(run_full_agent(dir / "agent", node, runs, stamp));
    const Stats baseline = summarise(run_baseline(base, baseline_runs, stamp));
    std::filesystem::remove_all(dir);

    std::printf("%-34s %6s %10s %10s %10s\n", "path (detection -> death)", "runs", "p50 ms",
                "p99 ms", "max ms");
    const auto row = [](const char* name, const Stats& stats) {
        std::printf("%-34s %6zu %10.3f %10.3f %10.3f\n", name, stats.runs, stats.p50_ms,
                    stats.p99_ms, stats.max_ms);
    };
    row("kernel kill_now (execve -> reaped)", kernel);
    row("  of which exec hook -> exit hook", signal_to_exit);
    row("user-space kill (GPU + connect)", user);
    row("  same, whole agent (gpuguard run)", agent);
    row("baseline: /proc poll every 1 s", baseline);
    if (kernel.p50_ms > 0 && user.p50_ms > 0) {
        std::printf("baseline / kernel kill_now: p50 %.0fx, p99 %.0fx\n",
                    baseline.p50_ms / kernel.p50_ms, baseline.p99_ms / kernel.p99_ms);
        std::printf("baseline / user-space kill: p50 %.0fx, p99 %.0fx\n",
                    baseline.p50_ms / user.p50_ms, baseline.p99_ms / user.p99_ms);
    }
    std::printf("goals: kernel < 1 ms: %s; user space p99 < 50 ms: %s (whole agent: %s)\n",
                kernel.runs && kernel.p99_ms < 1.0 ? "met" : "NOT met",
                user.runs && user.p99_ms < 50.0 ? "met" : "NOT met",
                agent.runs && agent.p99_ms < 50.0 ? "met" : "NOT met");
    const bool complete = kernel.runs == runs && user.runs == runs && agent.runs == runs &&
                          baseline.runs == baseline_runs;
    if (!complete) std::fprintf(stderr, "enforce_bench: some runs did not end in a kill\n");
    return complete ? 0 : 1;
}
