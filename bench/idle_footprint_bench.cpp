// Idle footprint of the real agent: `gpuguard run` on the embedded default
// configuration (the full built-in pack: every signature, the YARA rules,
// the correlation rules, the journal with its look-back buffer, the 4 MiB
// ring buffer), left alone for --idle-seconds, then read from /proc:
//
//   /proc/PID/status   VmRSS, VmHWM, RssAnon/RssFile/RssShmem, Threads
//   /proc/PID/stat     utime+stime over the idle window -> % of one core
//   /proc/PID/smaps    RSS per part: malloc's main heap and thread arenas,
//                      thread stacks (found by each thread's stack pointer in
//                      /proc/PID/task/TID/syscall), BPF map mmaps (the ring
//                      buffer), the code and data of each library
//
// The goals (docs/operations.md, "Footprint"): RSS <= 64 MiB, idle CPU
// < 0.5 % of one core. The agent watches the whole host, so "idle" is the
// agent's, not the host's: the processes the host started during the window
// are printed with the CPU figure (each exec is judged and, by default,
// scanned by YARA).
//
// Host paths of the default configuration (control socket, rule directory,
// journal, BPF pin path) are moved into a directory of the bench's own, so
// that it neither reads a host's rules nor touches an installed agent.
// Root only (loads BPF).
//
// With --cpu-sampling-baseline the same agent first runs idle as long with
// process_table.cpu_interval_ms: 0 (no CPU sampling: the baseline), and the
// added idle CPU of reading every process's /proc/PID/stat every 2 s is
// printed with the ratio; --extra-processes=N starts N sleeping processes
// first (the host's process count is what that reading costs by).
//
// Usage: idle_footprint_bench [--idle-seconds=60] [--rss-goal-mb=64]
//                             [--cpu-goal-pct=0.5] [--config=FILE] [--keep-dir]
//                             [--agent=PATH (another build's gpuguard)]
//                             [--cpu-sampling-baseline] [--extra-processes=N]
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

struct Options {
    int idle_seconds = 60;
    double rss_goal_mb = 64;
    double cpu_goal_pct = 0.5;
    std::string config;                   // empty: the embedded default, host paths moved
    std::string agent = GPUGUARD_BINARY;  // another build's, to compare
    bool keep_dir = false;
    bool cpu_sampling_baseline = false;
    int extra_processes = 0;
};

bool parse_args(int argc, char** argv, Options& options) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        const auto value = [&](const char* name) -> std::optional<std::string> {
            const std::string prefix = std::string(name) + "=";
            if (arg.rfind(prefix, 0) != 0) return std::nullopt;
            return arg.substr(prefix.size());
        };
        if (auto v = value("--idle-seconds")) {
            options.idle_seconds = std::atoi(v->c_str());
        } else if (auto v = value("--rss-goal-mb")) {
            options.rss_goal_mb = std::atof(v->c_str());
        } else if (auto v = value("--cpu-goal-pct")) {
            options.cpu_goal_pct = std::atof(v->c_str());
        } else if (auto v = value("--config")) {
            options.config = *v;
        } else if (auto v = value("--agent")) {
            options.agent = *v;
        } else if (arg == "--keep-dir") {
            options.keep_dir = true;
        } else if (arg == "--cpu-sampling-baseline") {
            options.cpu_sampling_baseline = true;
        } else if (auto v = value("--extra-processes")) {
            options.extra_processes = std::atoi(v->c_str());
        } else {
            std::fprintf(stderr, "idle_footprint_bench: unknown argument %s\n", arg.c_str());
            return false;
        }
    }
    if (options.idle_seconds < 1) {
        std::fprintf(stderr, "idle_footprint_bench: --idle-seconds must be >= 1\n");
        return false;
    }
    return true;
}

std::string read_text(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// `gpuguard config default` with its host paths replaced; empty (and a
// message) when one of them is not where the bench expects it, so a changed
// default cannot make the bench run on a host's paths unnoticed.
std::string default_config_in(const std::string& agent, const fs::path& dir) {
    const std::string command = agent + " config default";
    std::FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) return {};
    std::string text;
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) text.append(buffer, n);
    if (pclose(pipe) != 0) return {};
    const std::pair<std::string, std::string> moves[] = {
        {"socket: /run/gpuguard/control.sock", "socket: " + (dir / "control.sock").string()},
        {"main_file: /etc/gpuguard/", "main_file: " + (dir / "etc").string() + "/"},
        {"drop_in_dir: /etc/gpuguard/", "drop_in_dir: " + (dir / "etc").string() + "/"},
        {"dir: /var/lib/gpuguard/journal", "dir: " + (dir / "journal").string()},
        {"pin_path: /sys/fs/bpf/gpuguard",
         "pin_path: /sys/fs/bpf/gpuguard-bench-" + std::to_string(getpid())},
    };
    for (const auto& [from, to] : moves) {
        const size_t at = text.find("\n  " + from);
        if (at == std::string::npos) {
            std::fprintf(stderr, "idle_footprint_bench: the default config has no '%s'\n",
                         from.c_str());
            return {};
        }
        text.replace(at + 3, from.size(), to);
    }
    return text;
}

// The agent, its output in `log`; dies with the bench (PR_SET_PDEATHSIG).
pid_t start_agent(const std::string& agent, const fs::path& config, const fs::path& log) {
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (out < 0) _exit(127);
        dup2(out, STDOUT_FILENO);
        dup2(out, STDERR_FILENO);
        execl(agent.c_str(), "gpuguard", "run", "--config", config.c_str(),
              static_cast<char*>(nullptr));
        _exit(127);
    }
    return pid;
}

bool alive(pid_t pid) {
    int status = 0;
    return waitpid(pid, &status, WNOHANG) == 0;
}

// Ready once it says so (sensor attached, rules compiled, table bootstrapped).
bool wait_ready(pid_t pid, const fs::path& log, std::chrono::seconds bound) {
    const auto end = std::chrono::steady_clock::now() + bound;
    while (std::chrono::steady_clock::now() < end && alive(pid)) {
        if (read_text(log).find("[agent] ready") != std::string::npos) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

void stop_agent(pid_t pid) {
    kill(pid, SIGTERM);
    for (int i = 0; i < 100; ++i) {
        if (waitpid(pid, nullptr, WNOHANG) == pid) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
}

// utime + stime of the whole process, in clock ticks.
std::optional<unsigned long long> cpu_ticks(pid_t pid) {
    const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) return std::nullopt;
    std::istringstream fields(stat.substr(paren + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    // After "pid (comm) ": state is field 3; utime and stime are 14 and 15.
    for (int index = 3; index <= 15 && fields >> field; ++index) {
        if (index == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
        if (index == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
    }
    if (!fields) return std::nullopt;
    return utime + stime;
}

// Processes the host has started since boot (/proc/stat "processes").
unsigned long long host_forks() {
    std::istringstream stat(read_text("/proc/stat"));
    for (std::string line; std::getline(stat, line);) {
        if (line.rfind("processes ", 0) == 0) return std::strtoull(line.c_str() + 10, nullptr, 10);
    }
    return 0;
}

// "Key:   value kB" lines of a /proc file, in kB (or a count), added to `fields`.
void read_fields(const std::string& path, std::map<std::string, long>& fields) {
    std::istringstream text(read_text(path));
    for (std::string line; std::getline(text, line);) {
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        char* end = nullptr;
        const long value = std::strtol(line.c_str() + colon + 1, &end, 10);
        if (end != line.c_str() + colon + 1) fields[line.substr(0, colon)] = value;
    }
}

// /proc/PID/status, and Pss from smaps_rollup: RSS with each shared page
// split among the processes (and mappings) that map it.
std::map<std::string, long> status_fields(pid_t pid) {
    std::map<std::string, long> fields;
    read_fields("/proc/" + std::to_string(pid) + "/status", fields);
    std::map<std::string, long> rollup;
    read_fields("/proc/" + std::to_string(pid) + "/smaps_rollup", rollup);
    if (rollup.contains("Pss")) fields["Pss (smaps_rollup)"] = rollup.at("Pss");
    return fields;
}

// Each thread's stack pointer: /proc/PID/task/TID/syscall ends "... sp pc"
// for a thread blocked in a system call (all of them, at idle).
std::vector<unsigned long> thread_stack_pointers(pid_t pid) {
    std::vector<unsigned long> pointers;
    std::error_code ec;
    for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
        std::istringstream words(read_text(task.path() / "syscall"));
        std::vector<std::string> fields;
        for (std::string word; words >> word;) fields.push_back(word);
        if (fields.size() >= 3)
            pointers.push_back(std::strtoul(fields[fields.size() - 2].c_str(), nullptr, 16));
    }
    return pointers;
}

struct Mapping {
    unsigned long start = 0, end = 0;
    std::string perms, name;
    long rss_kb = 0, anon_kb = 0;
};

std::vector<Mapping> read_smaps(pid_t pid) {
    std::vector<Mapping> mappings;
    std::istringstream smaps(read_text("/proc/" + std::to_string(pid) + "/smaps"));
    for (std::string line; std::getline(smaps, line);) {
        const size_t dash = line.find('-');
        const size_t space = line.find(' ');
        if (dash != std::string::npos && space != std::string::npos && dash < space &&
            std::isxdigit(static_cast<unsigned char>(line[0])) && line.find(':') > space) {
            Mapping mapping;
            mapping.start = std::strtoul(line.c_str(), nullptr, 16);
            mapping.end = std::strtoul(line.c_str() + dash + 1, nullptr, 16);
            std::istringstream words(line.substr(space + 1));
            std::string offset, device, inode;
            words >> mapping.perms >> offset >> device >> inode;
            std::getline(words >> std::ws, mapping.name);
            mappings.push_back(mapping);
        } else if (!mappings.empty() && line.rfind("Rss:", 0) == 0) {
            mappings.back().rss_kb = std::strtol(line.c_str() + 4, nullptr, 10);
        } else if (!mappings.empty() && line.rfind("Anonymous:", 0) == 0) {
            mappings.back().anon_kb = std::strtol(line.c_str() + 10, nullptr, 10);
        }
    }
    return mappings;
}

// glibc's thread arenas are heaps of HEAP_MAX_SIZE (64 MiB on 64-bit)
// reserved at that alignment, of which the used part is read-write.
constexpr unsigned long kArenaHeapAlign = 64ul << 20;

std::string part_of(const Mapping& mapping, const std::vector<unsigned long>& stack_pointers) {
    if (mapping.name == "[heap]") return "malloc main arena ([heap])";
    if (mapping.name == "[stack]") return "thread stacks";
    if (mapping.name.find("bpf-map") != std::string::npos ||
        mapping.name.find("bpf_ringbuf") != std::string::npos)
        return "BPF maps mmapped (ring buffer, data pages mapped twice)";
    if (mapping.name.empty() || mapping.name[0] == '[') {
        for (const unsigned long sp : stack_pointers) {
            if (sp >= mapping.start && sp < mapping.end) return "thread stacks";
        }
        if (mapping.start % kArenaHeapAlign == 0 && mapping.perms.rfind("rw", 0) == 0)
            return "malloc thread arenas";
        return "other anonymous (large malloc blocks, library buffers)";
    }
    const std::string file = fs::path(mapping.name).filename().string();
    if (file == "gpuguard") return "gpuguard binary (code, data)";
    for (const char* library : {"libhs", "libyara", "libcrypto", "libstdc++", "libc.so",
                                "libgnutls", "libbpf", "libnftables"}) {
        if (file.rfind(library, 0) == 0) return std::string(library) + " (code, data)";
    }
    return "other shared libraries";
}

struct Part {
    long rss_kb = 0, anon_kb = 0;
    int mappings = 0;
};

double mib(long kb) { return static_cast<double>(kb) / 1024.0; }

void print_parts(const std::vector<Mapping>& mappings,
                 const std::vector<unsigned long>& stack_pointers) {
    std::map<std::string, Part> parts;
    for (const auto& mapping : mappings) {
        if (mapping.rss_kb == 0) continue;
        Part& part = parts[part_of(mapping, stack_pointers)];
        part.rss_kb += mapping.rss_kb;
        part.anon_kb += mapping.anon_kb;
        ++part.mappings;
    }
    std::vector<std::pair<std::string, Part>> sorted(parts.begin(), parts.end());
    std::sort(sorted.begin(), sorted.end(),
              [](const auto& a, const auto& b) { return a.second.rss_kb > b.second.rss_kb; });
    std::printf("\n%-56s %9s %9s %8s\n", "RSS by part (smaps)", "RSS MiB", "anon MiB", "mappings");
    long total = 0;
    for (const auto& [name, part] : sorted) {
        std::printf("%-56s %9.1f %9.1f %8d\n", name.c_str(), mib(part.rss_kb), mib(part.anon_kb),
                    part.mappings);
        total += part.rss_kb;
    }
    std::printf("%-56s %9.1f\n", "total", mib(total));
}

}  // namespace

int main(int argc, char** argv) {
    Options options;
    if (!parse_args(argc, argv, options)) return 2;
    if (geteuid() != 0) {
        std::fprintf(stderr, "idle_footprint_bench: needs root (the agent loads BPF)\n");
        return 2;
    }
    const fs::path dir =
        fs::temp_directory_path() / ("gpuguard-footprint-" + std::to_string(getpid()));
    fs::create_directories(dir);
    // The directory goes with the bench, whatever way it ends.
    struct RemoveDir {
        const fs::path& dir;
        bool keep;
        ~RemoveDir() {
            std::error_code ec;
            if (!keep) fs::remove_all(dir, ec);
        }
    } remove_dir{dir, options.keep_dir};
    fs::path config = options.config;
    if (config.empty()) {
        const std::string text = default_config_in(options.agent, dir);
        if (text.empty()) return 2;
        config = dir / "gpuguard.yaml";
        std::ofstream(config) << text;
    }
    // Sleeping processes of the bench's own, gone with it.
    std::vector<pid_t> sleepers;
    for (int i = 0; i < options.extra_processes; ++i) {
        const pid_t child = fork();
        if (child == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            for (;;) pause();
        }
        if (child > 0) sleepers.push_back(child);
    }
    struct ReapSleepers {
        const std::vector<pid_t>& pids;
        ~ReapSleepers() {
            for (const pid_t pid : pids) kill(pid, SIGKILL);
            for (const pid_t pid : pids) waitpid(pid, nullptr, 0);
        }
    } reap_sleepers{sleepers};
    std::optional<double> baseline_pct;
    if (options.cpu_sampling_baseline) {
        // The same agent and configuration without CPU sampling, idle as long.
        std::string text = read_text(config);
        const std::string key = "\n  cpu_interval_ms: ";
        const size_t at = text.find(key);
        if (at == std::string::npos) {
            std::fprintf(stderr, "idle_footprint_bench: the config has no cpu_interval_ms\n");
            return 2;
        }
        text.replace(at + key.size(), text.find('\n', at + 1) - at - key.size(), "0");
        const fs::path baseline_config = dir / "baseline.yaml";
        std::ofstream(baseline_config) << text;
        const fs::path baseline_log = dir / "baseline.log";
        const pid_t baseline = start_agent(options.agent, baseline_config, baseline_log);
        if (!wait_ready(baseline, baseline_log, std::chrono::seconds(60))) {
            std::fprintf(stderr, "idle_footprint_bench: the baseline did not get ready:\n%s\n",
                         read_text(baseline_log).c_str());
            stop_agent(baseline);
            return 1;
        }
        const auto before = cpu_ticks(baseline);
        const auto start = std::chrono::steady_clock::now();
        std::this_thread::sleep_for(std::chrono::seconds(options.idle_seconds));
        const auto after = cpu_ticks(baseline);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        stop_agent(baseline);
        if (!before || !after) {
            std::fprintf(stderr, "idle_footprint_bench: the baseline died while idle\n");
            return 1;
        }
        baseline_pct = static_cast<double>(*after - *before) /
                       static_cast<double>(sysconf(_SC_CLK_TCK)) / seconds * 100.0;
    }
    const fs::path log = dir / "agent.log";
    const pid_t agent = start_agent(options.agent, config, log);
    if (!wait_ready(agent, log, std::chrono::seconds(60))) {
        std::fprintf(stderr, "idle_footprint_bench: the agent did not get ready; its log:\n%s\n",
                     read_text(log).c_str());
        stop_agent(agent);
        return 1;
    }
    const auto ready_status = status_fields(agent);
    const auto ticks_before = cpu_ticks(agent);
    const unsigned long long forks_before = host_forks();
    const auto idle_start = std::chrono::steady_clock::now();
    const auto idle_end = idle_start + std::chrono::seconds(options.idle_seconds);
    while (std::chrono::steady_clock::now() < idle_end && alive(agent)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    const auto ticks_after = cpu_ticks(agent);
    const double window_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - idle_start).count();
    const unsigned long long forks = host_forks() - forks_before;
    const auto status = status_fields(agent);
    const auto mappings = read_smaps(agent);
    const auto stack_pointers = thread_stack_pointers(agent);
    if (!ticks_before || !ticks_after || !status.contains("VmRSS")) {
        std::fprintf(stderr, "idle_footprint_bench: the agent died while idle; its log:\n%s\n",
                     read_text(log).c_str());
        stop_agent(agent);
        return 1;
    }
    stop_agent(agent);

    const double cpu_pct = static_cast<double>(*ticks_after - *ticks_before) /
                           static_cast<double>(sysconf(_SC_CLK_TCK)) / window_s * 100.0;
    std::printf(
        "%s run, %s, idle %.0f s (the host started %llu processes meanwhile)\n",
        options.agent.c_str(),
        options.config.empty() ? "embedded default config (full pack)" : options.config.c_str(),
        window_s, forks);
    std::printf("\n%-24s %10s %10s\n", "/proc/PID/status", "at ready", "after idle");
    for (const char* key :
         {"VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "VmSwap", "Pss (smaps_rollup)"}) {
        const auto at = [&](const std::map<std::string, long>& fields) {
            const auto it = fields.find(key);
            return it == fields.end() ? 0.0 : mib(it->second);
        };
        std::printf("%-24s %7.1f MiB %7.1f MiB\n", key, at(ready_status), at(status));
    }
    std::printf("%-24s %10ld %10ld\n", "Threads",
                ready_status.count("Threads") ? ready_status.at("Threads") : 0,
                status.at("Threads"));
    print_parts(mappings, stack_pointers);

    const double rss_mb = mib(status.at("VmRSS"));
    const bool rss_ok = rss_mb <= options.rss_goal_mb;
    const bool cpu_ok = cpu_pct < options.cpu_goal_pct;
    std::printf("\nidle CPU: %.3f %% of one core over %.0f s\n", cpu_pct, window_s);
    if (baseline_pct) {
        std::printf(
            "CPU sampling (every process's /proc/PID/stat every 2 s, %d extra processes): "
            "baseline without it %.3f %%, with it %.3f %%, added %.3f %% of one core "
            "(ratio with/without %.2f)\n",
            options.extra_processes, *baseline_pct, cpu_pct, cpu_pct - *baseline_pct,
            *baseline_pct > 0 ? cpu_pct / *baseline_pct : 0.0);
    }
    std::printf("goals: RSS %.1f MiB <= %.0f MiB: %s; idle CPU %.3f %% < %.2f %%: %s\n", rss_mb,
                options.rss_goal_mb, rss_ok ? "met" : "MISSED", cpu_pct, options.cpu_goal_pct,
                cpu_ok ? "met" : "MISSED");
    if (options.keep_dir) std::printf("agent's directory kept: %s\n", dir.c_str());
    return rss_ok && cpu_ok ? 0 : 1;
}
