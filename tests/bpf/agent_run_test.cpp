// `gpuguard run` end to end: the binary loads, prints a JSON line for an
// open of a registered node, and leaves no program behind after SIGTERM.
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <bpf/bpf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/agent_config.h"
#include "tests/support/child_process.h"
#include "tests/support/fake_nvml_script.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::run_command;
using gpuguard::testing::Subprocess;
using gpuguard::testing::TempDir;

// Ids of loaded programs whose name starts with gg_ (all of ours do).
std::vector<uint32_t> gpuguard_program_ids() {
    std::vector<uint32_t> ids;
    uint32_t id = 0;
    while (bpf_prog_get_next_id(id, &id) == 0) {
        const int fd = bpf_prog_get_fd_by_id(id);
        if (fd < 0) continue;
        bpf_prog_info info{};
        uint32_t length = sizeof(info);
        if (bpf_obj_get_info_by_fd(fd, &info, &length) == 0 &&
            std::string(info.name).rfind("gg_", 0) == 0) {
            ids.push_back(id);
        }
        close(fd);
    }
    return ids;
}

bool wait_until_no_programs(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!gpuguard_program_ids().empty()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(20ms);
    }
    return true;
}

class AgentRunTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        ASSERT_TRUE(wait_until_no_programs(3s)) << "gg_ programs loaded before the test";
    }
    // Rules and journal in the test's directory, and (unless the test names
    // one) no control socket: an agent under test never touches the host's
    // paths, nor another test's agent running in parallel.
    std::string own_paths(bool with_control_socket = true) const {
        return std::string(with_control_socket ? "control:\n  socket: \"\"\n" : "") +
               gpuguard::testing::scratch_paths_config(dir_.path());
    }
    TempDir dir_{"gg-run"};
};

TEST_F(AgentRunTest, prints_json_line_for_registered_node_and_detaches_on_sigterm) {
    const auto node = dir_ / "gpu0";
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    const auto config = dir_ / "gpuguard.yaml";
    std::ofstream(config) << "sensor:\n  extra_gpu_devices: [\"1:7\"]\n" << own_paths();

    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config.string(), "--print-events"});
    ASSERT_TRUE(agent.wait_for_agent_ready(20s)) << agent.stderr_text();
    EXPECT_FALSE(gpuguard_program_ids().empty());

    const std::string path = node.string();
    const pid_t child = gpuguard::testing::run_in_child(
        "gg-cli-opener", [&] { return open(path.c_str(), O_RDWR) >= 0 ? 0 : 1; });

    std::optional<nlohmann::json> seen;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!seen && std::chrono::steady_clock::now() < deadline) {
        auto line = agent.read_stdout_line(500ms);
        if (!line) continue;
        auto event = nlohmann::json::parse(*line);  // every stdout line is one JSON object
        if (event["process"]["pid"] == child && event["type"] == "gpu_open") seen = event;
    }
    ASSERT_TRUE(seen) << agent.stderr_text();
    const auto& event = *seen;
    EXPECT_EQ(event["v"], 1);
    EXPECT_EQ(event["type"], "gpu_open");
    EXPECT_EQ(event["process"]["comm"], "gg-cli-opener");
    EXPECT_EQ(event["process"]["ppid"], getpid());
    EXPECT_EQ(event["gpu_open"]["device"], "1:7");
    EXPECT_EQ(event["gpu_open"]["path"], path);
    EXPECT_EQ(event["gpu_open"]["syscall"], "openat");
    EXPECT_EQ(event["gpu_open"]["flags"], "O_RDWR");
    EXPECT_TRUE(event["gpu_open"]["error"].is_null());
    EXPECT_TRUE(event["time"].is_string());

    const auto code = agent.stop(SIGTERM, 10s);
    ASSERT_TRUE(code.has_value()) << "agent did not exit on SIGTERM";
    EXPECT_EQ(*code, 0) << agent.stderr_text();
    EXPECT_NE(agent.stderr_text().find("stopping on SIGTERM"), std::string::npos);
    EXPECT_TRUE(wait_until_no_programs(3s)) << "programs left after SIGTERM";
}

// A process that opened a GPU before the agent started is found by the /proc
// bootstrap; its later ioctls are counted; ps and status answer over the socket.
TEST_F(AgentRunTest, bootstrap_finds_earlier_gpu_holder_and_ps_shows_it) {
    const auto node = dir_ / "gpu0";
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    const auto socket = dir_ / "control.sock";
    const auto config = dir_ / "gpuguard.yaml";
    std::ofstream(config) << "sensor:\n  extra_gpu_devices: [\"1:7\"]\n"
                          << "control:\n  socket: " << socket.string() << "\n"
                          << "process_table:\n  ioctl_interval_ms: 100\n"
                          << own_paths(false);

    // The holder: opens the node three times (as a CUDA process holds many
    // fds on a few nodes), signals, waits for "go", issues 7 ioctls, waits
    // to be killed.
    int ready[2], go[2];
    ASSERT_EQ(pipe(ready), 0);
    ASSERT_EQ(pipe(go), 0);
    const pid_t holder = fork();
    ASSERT_GE(holder, 0);
    if (holder == 0) {
        const int fd = open(node.c_str(), O_RDWR);
        const bool more = open(node.c_str(), O_RDWR) >= 0 && open(node.c_str(), O_RDWR) >= 0;
        char byte = fd >= 0 && more ? 'y' : 'n';
        (void)!write(ready[1], &byte, 1);
        (void)!read(go[0], &byte, 1);
        for (int i = 0; i < 7; ++i) ioctl(fd, _IOWR('d', 0x44, 24), nullptr);
        pause();
        _exit(0);
    }
    char byte = 0;
    ASSERT_EQ(read(ready[0], &byte, 1), 1);
    ASSERT_EQ(byte, 'y');
    const gpuguard::testing::ChildReaper reaper(holder);

    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config.string()});
    ASSERT_TRUE(agent.wait_for_agent_ready(20s)) << agent.stderr_text();
    // >= 1: another process on the host may hold /dev/full (1:7) too.
    EXPECT_NE(agent.stderr_text().find("already holding a GPU"), std::string::npos)
        << agent.stderr_text();
    ASSERT_EQ(write(go[1], "g", 1), 1);

    // ps, until the aggregated ioctls show up (read every 100 ms).
    nlohmann::json found;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
        const auto ps = run_command({GPUGUARD_BINARY, "ps", "--socket", socket.string(), "--json"});
        ASSERT_EQ(ps.exit_code, 0) << ps.stderr_text;
        for (const auto& process : nlohmann::json::parse(ps.stdout_text)) {
            if (process["pid"] == holder) found = process;
        }
        if (!found.is_null() && found["ioctl_total"] == 7) break;
        std::this_thread::sleep_for(100ms);
    }
    ASSERT_FALSE(found.is_null()) << "bootstrap missed the holder";
    ASSERT_EQ(found["gpus"].size(), 3u) << found.dump();  // one per fd
    for (const auto& gpu : found["gpus"]) EXPECT_EQ(gpu["device"], "1:7");
    EXPECT_EQ(found["ioctl_total"], 7);
    ASSERT_EQ(found["ioctls"].size(), 1u);
    EXPECT_EQ(found["ioctls"][0]["count"], 7);
    EXPECT_EQ(found["user"], "root");

    const auto status =
        run_command({GPUGUARD_BINARY, "status", "--socket", socket.string(), "--json"});
    ASSERT_EQ(status.exit_code, 0) << status.stderr_text;
    const auto s = nlohmann::json::parse(status.stdout_text);
    EXPECT_GE(s["process_table"]["bootstrap"]["gpu_processes"].get<int>(), 1);
    EXPECT_EQ(s["events"]["gpu_ioctl"]["emitted"], 1);
    EXPECT_EQ(s["dropped"], 0);
    // The two raw dispatchers (or a hook per call) and the three sched hooks at least.
    EXPECT_GE(s["hooks"].size(), 5u) << s["hooks"];
    EXPECT_NE(s["attach_mode"], "auto") << "the mode in use, never auto";

    // The table names each device once, whatever the number of fds on it.
    const auto table = run_command({GPUGUARD_BINARY, "ps", "--socket", socket.string()});
    std::istringstream rows(table.stdout_text);
    std::string row;
    while (std::getline(rows, row) && !row.starts_with(std::to_string(holder) + " ")) {
    }
    ASSERT_TRUE(row.starts_with(std::to_string(holder) + " ")) << table.stdout_text;
    EXPECT_NE(row.find(" 1:7 "), std::string::npos) << row;
    EXPECT_EQ(row.find("1:7,"), std::string::npos) << row;

    const auto code = agent.stop(SIGTERM, 10s);
    ASSERT_TRUE(code.has_value());
    EXPECT_EQ(*code, 0);
    EXPECT_FALSE(std::filesystem::exists(socket)) << "socket removed on exit";
}

// GPU telemetry reaches `ps`: the fake NVML (loaded through the real dlopen)
// reports 1 GiB for a process the sensor knows holds a GPU fd.
TEST_F(AgentRunTest, ps_joins_per_process_gpu_memory_from_the_backends) {
    const auto node = dir_ / "gpu0";
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const pid_t holder = fork();
    ASSERT_GE(holder, 0);
    if (holder == 0) {
        const int fd = open(node.c_str(), O_RDWR);
        char byte = fd >= 0 ? 'y' : 'n';
        (void)!write(ready[1], &byte, 1);
        pause();
        _exit(0);
    }
    const gpuguard::testing::ChildReaper reaper(holder);
    char byte = 0;
    ASSERT_EQ(read(ready[0], &byte, 1), 1);
    ASSERT_EQ(byte, 'y');

    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script(
        {.processes = {{holder, 1ull << 30}}});
    const auto socket = dir_ / "control.sock";
    const auto config = dir_ / "gpuguard.yaml";
    std::ofstream(config) << "sensor:\n  extra_gpu_devices: [\"1:7\"]\n"
                          << "control:\n  socket: " << socket.string() << "\n"
                          << "backends:\n  interval_ms: 200\n  nvml_library: \""
                          << GPUGUARD_FAKE_NVML_PATH << "\"\n"
                          << own_paths(false);
    Subprocess agent({"/usr/bin/env", "GPUGUARD_FAKE_NVML_SCRIPT=" + script.string(),
                      GPUGUARD_BINARY, "run", "--config", config.string()});
    ASSERT_TRUE(agent.wait_for_agent_ready(20s)) << agent.stderr_text();

    nlohmann::json usage;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (usage.is_null() && std::chrono::steady_clock::now() < deadline) {
        const auto ps = run_command({GPUGUARD_BINARY, "ps", "--socket", socket.string(), "--json"});
        ASSERT_EQ(ps.exit_code, 0) << ps.stderr_text;
        for (const auto& process : nlohmann::json::parse(ps.stdout_text)) {
            if (process["pid"] == holder && !process["gpu_usage"].empty()) {
                usage = process["gpu_usage"][0];
            }
        }
        if (usage.is_null()) std::this_thread::sleep_for(200ms);
    }
    ASSERT_FALSE(usage.is_null()) << agent.stderr_text();
    EXPECT_EQ(usage["memory_bytes"], 1073741824ull);
    EXPECT_EQ(usage["source"], "nvml");
    EXPECT_EQ(usage["model"], "NVIDIA H100 80GB HBM3");
    const auto table = run_command({GPUGUARD_BINARY, "ps", "--socket", socket.string()});
    EXPECT_NE(table.stdout_text.find("1024MiB"), std::string::npos) << table.stdout_text;
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0);
}

TEST_F(AgentRunTest, ps_without_agent_says_so_and_standalone_works) {
    const auto missing =
        run_command({GPUGUARD_BINARY, "ps", "--socket", (dir_ / "none.sock").string()});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.stderr_text.find("no gpuguard agent answers"), std::string::npos);
    const auto standalone = run_command({GPUGUARD_BINARY, "ps", "--standalone", "--json"});
    EXPECT_EQ(standalone.exit_code, 0) << standalone.stderr_text;
    EXPECT_TRUE(nlohmann::json::parse(standalone.stdout_text).is_array());
}

TEST_F(AgentRunTest, event_types_choose_what_is_printed) {
    const auto config = dir_ / "gpuguard.yaml";
    std::ofstream(config) << own_paths();
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config.string(), "--print-events",
                      "--event-types", "exec,exit"});
    ASSERT_TRUE(agent.wait_for_agent_ready(20s)) << agent.stderr_text();
    const pid_t child = gpuguard::testing::run_in_child("gg-exec-print", [] {
        execl("/bin/true", "true", "--gpuguard-test", static_cast<char*>(nullptr));
        return 127;
    });
    std::set<std::string> types_seen;
    bool saw_child_exec = false;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!saw_child_exec && std::chrono::steady_clock::now() < deadline) {
        auto line = agent.read_stdout_line(500ms);
        if (!line) continue;
        const auto event = nlohmann::json::parse(*line);
        types_seen.insert(event["type"].get<std::string>());
        if (event["type"] == "exec" && event["process"]["pid"] == child) {
            saw_child_exec = true;
            EXPECT_EQ(event["exec"]["argv"], nlohmann::json({"true", "--gpuguard-test"}));
        }
    }
    EXPECT_TRUE(saw_child_exec) << agent.stderr_text();
    for (const auto& type : types_seen) EXPECT_TRUE(type == "exec" || type == "exit") << type;
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0);

    const auto bad = run_command({GPUGUARD_BINARY, "run", "--event-types", "exec,bogus"});
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.stderr_text.find("unknown event type 'bogus'"), std::string::npos)
        << bad.stderr_text;
    // Every event type can be chosen: the agent-made ones too.
    const auto all_types =
        run_command({GPUGUARD_BINARY, "run", "--event-types",
                     "kill_now,exe_scan,net_payload,stratum,process_snapshot,process_io,bogus"});
    EXPECT_NE(all_types.stderr_text.find("unknown event type 'bogus' (gpu_open,"),
              std::string::npos)
        << all_types.stderr_text;
}

// The agent with stdout and stderr on the given fds (the tests' Subprocess
// always reads both pipes, which is what these tests must not do), printing
// every event.
pid_t start_printing_agent(const std::filesystem::path& config, int out_fd, int err_fd) {
    return gpuguard::testing::spawn_with_output(
        {GPUGUARD_BINARY, "run", "--config", config.string(), "--print-events", "--event-types",
         "all"},
        out_fd, err_fd);
}

// waitpid() within `timeout`; past it the process is killed and nullopt
// returned. The wait status otherwise.
std::optional<int> reap_within(pid_t pid, std::chrono::milliseconds timeout) {
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
            return std::nullopt;
        }
        std::this_thread::sleep_for(20ms);
    }
    return status;
}

// Thousands of fork and exit events, several times what a pipe holds.
void fork_storm() {
    for (int i = 0; i < 3000; ++i) {
        const pid_t child = fork();
        if (child == 0) _exit(0);
        if (child > 0) waitpid(child, nullptr, 0);
    }
}

// stdout is a pipe nobody reads (a stalled consumer): the agent keeps
// running, drops and counts what it cannot print, and still stops on
// SIGTERM. It used to block in write(2) inside its event loop for good.
TEST_F(AgentRunTest, unread_stdout_costs_counted_lines_not_a_stalled_agent) {
    const auto config = dir_ / "gpuguard.yaml";
    std::ofstream(config) << own_paths();
    const auto log = dir_ / "agent.log";
    int out[2];
    ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
    const int err = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(err, 0);
    const pid_t agent = start_printing_agent(config, out[1], err);
    ASSERT_GE(agent, 0);
    close(err);
    close(out[1]);  // out[0] stays open and is never read
    const auto log_text = [&] {
        std::ifstream in(log);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const auto wait_for_log = [&](const std::string& text, std::chrono::seconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (log_text().find(text) == std::string::npos) {
            if (std::chrono::steady_clock::now() >= deadline) return false;
            std::this_thread::sleep_for(50ms);
        }
        return true;
    };
    ASSERT_TRUE(wait_for_log("[agent] ready", 20s)) << log_text();
    fork_storm();
    kill(agent, SIGTERM);
    const auto status = reap_within(agent, 15s);
    close(out[0]);
    ASSERT_TRUE(status.has_value()) << "the agent did not stop on SIGTERM: " << log_text();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << log_text();
    EXPECT_NE(log_text().find("lines not printed in all"), std::string::npos) << log_text();
    EXPECT_TRUE(wait_until_no_programs(3s)) << "programs left after SIGTERM";
}

// Whoever read stdout and stderr goes away (`gpuguard run 2>&1 | head`): the
// agent must go on watching and enforcing, and stop cleanly when told. It
// used to die of SIGPIPE at its next log line.
TEST_F(AgentRunTest, closed_stdout_and_stderr_cost_output_not_the_agent) {
    const auto config = dir_ / "gpuguard.yaml";
    std::ofstream(config) << own_paths();
    int out[2], err[2];
    ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
    ASSERT_EQ(pipe2(err, O_CLOEXEC), 0);
    const pid_t agent = start_printing_agent(config, out[1], err[1]);
    ASSERT_GE(agent, 0);
    close(out[1]);
    close(err[1]);
    // The log up to "ready", read as `head` would, then both readers gone.
    std::string log;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (log.find("[agent] ready") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
        pollfd readable{err[0], POLLIN, 0};
        if (poll(&readable, 1, 100) <= 0) continue;
        char buffer[4096];
        const ssize_t got = read(err[0], buffer, sizeof(buffer));
        if (got <= 0) break;
        log.append(buffer, static_cast<size_t>(got));
    }
    close(out[0]);
    close(err[0]);
    ASSERT_NE(log.find("[agent] ready"), std::string::npos) << log;
    fork_storm();  // events to print and drops to log, into closed pipes
    std::this_thread::sleep_for(500ms);
    int status = 0;
    const pid_t early = waitpid(agent, &status, WNOHANG);
    EXPECT_EQ(early, 0) << "the agent ended on its own: "
                        << (WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exit");
    if (early != 0) return;
    kill(agent, SIGTERM);
    const auto stopped = reap_within(agent, 15s);
    ASSERT_TRUE(stopped.has_value()) << "the agent did not stop on SIGTERM";
    EXPECT_TRUE(WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0)
        << (WIFSIGNALED(*stopped) ? strsignal(WTERMSIG(*stopped)) : "exit status");
    EXPECT_TRUE(wait_until_no_programs(3s)) << "programs left after SIGTERM";
}

TEST_F(AgentRunTest, sigint_also_detaches) {
    // --log-level may follow the subcommand and wins over the config's log.level.
    Subprocess agent({GPUGUARD_BINARY, "run", "--log-level", "debug"});
    ASSERT_TRUE(agent.wait_for_agent_ready(20s)) << agent.stderr_text();
    EXPECT_NE(agent.stderr_text().find("debug"), std::string::npos);
    const auto code = agent.stop(SIGINT, 10s);
    ASSERT_TRUE(code.has_value());
    EXPECT_EQ(*code, 0);
    EXPECT_TRUE(wait_until_no_programs(3s));
}

// Built with ASan (GCC says so with a macro, clang with __has_feature).
#if defined(__SANITIZE_ADDRESS__)
#define GG_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GG_ADDRESS_SANITIZER 1
#endif
#endif
#ifndef GG_ADDRESS_SANITIZER
#define GG_ADDRESS_SANITIZER 0
#endif

// docs/operations.md, "Footprint": 2 arenas and a fixed mmap threshold
// unless the environment sets them, start-up's free memory returned once
// ready (bench/idle_footprint_bench measures what that saves).
TEST_F(AgentRunTest, start_up_memory_is_returned_and_the_environment_keeps_its_malloc_settings) {
    const auto config = dir_ / "gpuguard.yaml";
    std::ofstream(config) << own_paths();
    {
        Subprocess agent({GPUGUARD_BINARY, "run", "--config", config.string()});
        ASSERT_TRUE(agent.wait_for_agent_ready(20s)) << agent.stderr_text();
        const std::string log = agent.stderr_text();
        EXPECT_NE(log.find("start-up memory returned: RSS "), std::string::npos) << log;
#if GG_ADDRESS_SANITIZER
        // ASan's malloc, not glibc's: it refuses mallopt, and the agent says so.
        const char* const tuned =
            "arenas: left to this allocator, which refuses M_ARENA_MAX; mmap threshold: left to "
            "this allocator";
#else
        const char* const tuned = "arenas: at most 2; blocks of 128 KiB and more mmapped";
#endif
        EXPECT_NE(log.find(tuned), std::string::npos) << log;
    }
    ASSERT_EQ(setenv("MALLOC_ARENA_MAX", "4", 1), 0);
    ASSERT_EQ(setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536", 1), 0);
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config.string()});
    unsetenv("MALLOC_ARENA_MAX");
    unsetenv("GLIBC_TUNABLES");
    ASSERT_TRUE(agent.wait_for_agent_ready(20s)) << agent.stderr_text();
    EXPECT_NE(agent.stderr_text().find("arenas: as the environment sets them; mmap threshold: as "
                                       "the environment sets it"),
              std::string::npos)
        << agent.stderr_text();
}

TEST_F(AgentRunTest, bad_btf_path_fails_with_one_clear_line) {
    const auto result = run_command({GPUGUARD_BINARY, "run", "--btf", "/nonexistent/vmlinux"});
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_NE(result.stderr_text.find("BTF file /nonexistent/vmlinux (sensor.btf) does not exist"),
              std::string::npos)
        << result.stderr_text;
    EXPECT_TRUE(result.stdout_text.empty());
}

TEST_F(AgentRunTest, unprivileged_run_fails_with_one_clear_line) {
    const auto result = run_command({GPUGUARD_BINARY, "run"}, 30s, 65534);
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_NE(result.stderr_text.find("cannot start the sensor: not running as root"),
              std::string::npos)
        << result.stderr_text;
    // One line: no libbpf noise, no tracefs confusion.
    EXPECT_EQ(std::count(result.stderr_text.begin(), result.stderr_text.end(), '\n'), 2)
        << result.stderr_text;  // the "starting" line and the error
}

TEST_F(AgentRunTest, unknown_log_level_is_rejected) {
    const auto result = run_command({GPUGUARD_BINARY, "--log-level", "loud", "run"});
    EXPECT_NE(result.exit_code, 0);
    EXPECT_NE(result.stderr_text.find("loud"), std::string::npos) << result.stderr_text;
    EXPECT_TRUE(gpuguard_program_ids().empty());
}

TEST_F(AgentRunTest, bad_config_names_file_line_and_key) {
    const auto config = dir_ / "bad.yaml";
    std::ofstream(config) << "sensor:\n  ring_buffer_kb: 4096\n  extra_gpu_devices: [\"195\"]\n";
    const auto result = run_command({GPUGUARD_BINARY, "run", "--config", config.string()});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_NE(result.stderr_text.find(config.string() + ":3:"), std::string::npos)
        << result.stderr_text;
    EXPECT_NE(result.stderr_text.find("sensor.extra_gpu_devices[0]"), std::string::npos);
    EXPECT_TRUE(gpuguard_program_ids().empty());
}

}  // namespace
