// Who a process is, as the live agent names it (AgentDetectTest,
// agent_detect_fixture.h): an executable run from a memfd through
// /proc/self/fd/N and one deleted after its exec are named as /proc/PID/exe
// names them, in `gpuguard ps`, in the detection and in replay; and a kill
// whose process exited and whose pid a newcomer took leaves the newcomer be;
// a CPU miner already running when the agent starts is judged at its start;
// a command line longer than the exec record holds is read again and judged.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuguard/common/unique_fd.h"
#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/run_command.h"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::Clock;
using gpuguard::testing::LoopbackPool;
using gpuguard::testing::OwnChild;
using gpuguard::testing::ProgramTree;
using gpuguard::testing::run_command;
using gpuguard::testing::Subprocess;
using nlohmann::literals::operator""_json_pointer;

// Starts argv waiting on a pipe whose writing end goes to `writers` (a
// shell's `read line` keeps it alive, with no child of its own: an
// orphaned child would keep ctest's output pipe open after the test); -1
// when the pipe could not be made.
int spawn_waiting(std::vector<gpuguard::UniqueFd>& writers, std::vector<std::string> argv) {
    int input[2];
    if (pipe2(input, O_CLOEXEC) != 0) return -1;
    std::vector<char*> args;
    for (auto& arg : argv) args.push_back(arg.data());
    args.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(input[0], STDIN_FILENO);
        execv(args[0], args.data());
        _exit(127);
    }
    close(input[0]);
    writers.emplace_back(input[1]);
    return static_cast<int>(pid);
}

// Whether an evidence item of `detection` (an alert line) names `text`.
bool evidence_names(const nlohmann::json& detection, const std::string& text) {
    return detection["gpuguard"]["detection"]["evidence"].dump().find(text) != std::string::npos;
}

// The (pid, rule id) of each detection in `gpuguard replay`'s output.
std::vector<std::pair<int, std::string>> replayed_detections(const std::string& output) {
    std::vector<std::pair<int, std::string>> out;
    std::istringstream lines(output);
    for (std::string line; std::getline(lines, line);) {
        const auto record = nlohmann::json::parse(line, nullptr, false);
        if (!record.is_object()) continue;
        out.emplace_back(record.value("/process/pid"_json_pointer, 0),
                         record.value("/rule/id"_json_pointer, ""));
    }
    return out;
}

std::string exe_of(pid_t pid) {
    std::error_code ec;
    return fs::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec).string();
}

// The `gpuguard ps --json` entry of `pid`, or null.
nlohmann::json ps_entry(const std::string& socket, pid_t pid) {
    const auto listed = run_command({GPUGUARD_BINARY, "ps", "--json", "--socket", socket}, 10s);
    EXPECT_EQ(listed.exit_code, 0) << listed.stderr_text;
    const auto processes = nlohmann::json::parse(listed.stdout_text, nullptr, false);
    if (processes.is_discarded()) return nullptr;
    for (const auto& process : processes) {
        if (process["pid"] == pid) return process;
    }
    return nullptr;
}

TEST_F(AgentDetectTest, memfd_and_deleted_executables_are_named_as_the_kernel_runs_them) {
    ProgramTree programs("identity");
    use_control_socket();
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const pid_t parent = getpid();

    // Fileless: the idle helper copied into a memfd, exec'd through
    // /proc/self/fd/N (comm "N"), holding the fake GPU node.
    const int memfd = memfd_create("gg-fileless", 0);
    ASSERT_GE(memfd, 0) << strerror(errno);
    const std::string image = gpuguard::testing::file_bytes(GPUGUARD_IDLE_PROCESS);
    ASSERT_EQ(write(memfd, image.data(), image.size()), static_cast<ssize_t>(image.size()));
    const std::string fd_path = "/proc/self/fd/" + std::to_string(memfd);
    const std::string hold = "GG_HOLD=" + node_.string();
    char* const fileless_argv[] = {const_cast<char*>("gg-fileless"), nullptr};
    char* const fileless_env[] = {const_cast<char*>(hold.c_str()), nullptr};
    const pid_t fileless_pid = fork();
    if (fileless_pid == 0) {
        gpuguard::testing::end_with_parent(parent, SIGKILL);
        execve(fd_path.c_str(), fileless_argv, fileless_env);
        _exit(127);
    }
    OwnChild fileless(fileless_pid);
    close(memfd);

    // Deleted: a copy of bash, unlinked once it runs, then opening the node
    // and waiting on a FIFO nobody writes.
    const fs::path copy = programs.path / "gg-worker", fifo = programs.path / "wait";
    fs::copy_file("/bin/bash", copy);
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    const std::string script =
        "until [ ! -e \"$0\" ]; do :; done; exec 3<\"$1\"; read -r _ <\"$2\"";
    const pid_t deleted_pid = gpuguard::testing::spawn_process(
        copy.string(), {"gg-worker", "-c", script, copy.string(), node_.string(), fifo.string()},
        "/");
    ASSERT_GT(deleted_pid, 0) << strerror(errno);
    OwnChild deleted(deleted_pid);
    ASSERT_EQ(exe_of(deleted_pid), copy.string()) << "not exec'd yet";
    fs::remove(copy);

    const std::string memfd_exe = "/memfd:gg-fileless (deleted)";
    const std::string deleted_exe = copy.string() + " (deleted)";
    // Both GG-CORR-0005, in whichever order they come.
    std::map<pid_t, nlohmann::json> found;
    const auto deadline = Clock::now() + 5s;
    while (found.size() < 2 && Clock::now() < deadline) {
        auto line = agent.read_stdout_line(20ms);
        if (!line) continue;
        seen_.push_back(*line);
        auto record = nlohmann::json::parse(*line);
        const auto& pid_field = record["process"]["pid"];
        const pid_t pid = pid_field.is_number() ? pid_field.get<pid_t>() : 0;
        if (record["rule"]["id"] == "GG-CORR-0005" && (pid == fileless_pid || pid == deleted_pid)) {
            found.emplace(pid, record);
        }
    }
    EXPECT_EQ(found.count(fileless_pid), 1u) << "memfd: no GG-CORR-0005\n" << agent.stderr_text();
    EXPECT_EQ(found.count(deleted_pid), 1u) << "deleted: no GG-CORR-0005\n" << agent.stderr_text();
    if (found.count(fileless_pid)) {
        const auto& from_memfd = found[fileless_pid];
        EXPECT_EQ(from_memfd["process"]["executable"], memfd_exe) << from_memfd.dump();
        EXPECT_EQ(from_memfd["log"]["level"], "error") << "fileless: " << from_memfd.dump();
    }
    if (found.count(deleted_pid)) {
        const auto& from_deleted = found[deleted_pid];
        EXPECT_EQ(from_deleted["process"]["executable"], deleted_exe) << from_deleted.dump();
    }
    EXPECT_EQ(exe_of(fileless_pid), memfd_exe) << "the kernel's own name for it";

    const std::string socket = (dir_ / "control.sock").string();
    const auto listed_memfd = ps_entry(socket, fileless_pid);
    EXPECT_FALSE(listed_memfd.is_null());
    if (!listed_memfd.is_null()) {
        EXPECT_EQ(listed_memfd["exe"], memfd_exe) << listed_memfd.dump();
    }
    const auto listed_deleted = ps_entry(socket, deleted_pid);
    EXPECT_FALSE(listed_deleted.is_null());
    if (!listed_deleted.is_null()) {
        EXPECT_EQ(listed_deleted["exe"], deleted_exe) << listed_deleted.dump();
    }
    expect_whole_output(
        agent, {{"GG-CORR-0005", fileless_pid, "error"}, {"GG-CORR-0005", deleted_pid, "notice"}},
        {fileless_pid, deleted_pid});

    // The journal alone gives replay the same names: the exec's exe, the
    // first GPU use's snapshot.
    const auto replayed = replay_journal();
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    bool memfd_replayed = false, deleted_replayed = false;
    std::istringstream lines(replayed.stdout_text);
    for (std::string line; std::getline(lines, line);) {
        auto record = nlohmann::json::parse(line, nullptr, false);
        if (record.is_discarded() || record["rule"]["id"] != "GG-CORR-0005") continue;
        const auto pid = record["process"]["pid"];
        if (pid == fileless_pid) memfd_replayed = record["process"]["executable"] == memfd_exe;
        if (pid == deleted_pid) deleted_replayed = record["process"]["executable"] == deleted_exe;
    }
    EXPECT_TRUE(memfd_replayed) << replayed.stdout_text;
    EXPECT_TRUE(deleted_replayed) << replayed.stdout_text;
}

// Every thread of `pid` stopped (state T), within `timeout`.
bool all_threads_stopped(pid_t pid, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    const fs::path tasks = "/proc/" + std::to_string(pid) + "/task";
    while (Clock::now() < deadline) {
        bool all = true;
        std::error_code ec;
        for (const auto& task : fs::directory_iterator(tasks, ec)) {
            const std::string stat = gpuguard::testing::file_bytes(task.path() / "stat");
            const auto close = stat.rfind(')');
            all &= close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'T';
        }
        if (all && !ec) return true;
        std::this_thread::sleep_for(5ms);
    }
    return false;
}

// Field 22 of /proc/PID/stat: the start time in clock ticks after boot.
uint64_t start_ticks(pid_t pid) {
    const std::string stat =
        gpuguard::testing::file_bytes("/proc/" + std::to_string(pid) + "/stat");
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; ++i) {
    }
    return std::stoull(field);
}

uint64_t boottime_ticks() {
    timespec now{};
    clock_gettime(CLOCK_BOOTTIME, &now);
    const auto hz = static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
    return static_cast<uint64_t>(now.tv_sec) * hz +
           static_cast<uint64_t>(now.tv_nsec) / (1'000'000'000ull / hz);
}

// clone3(2) with set_tid (Linux 5.5): a child with exactly pid `pid`, which
// waits for a signal. -1 with errno (EEXIST: the pid is taken).
pid_t start_with_pid(pid_t pid, pid_t parent) {
    struct {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
            set_tid_size;
    } args{};
    pid_t wanted = pid;
    args.exit_signal = SIGCHLD;
    args.set_tid = reinterpret_cast<uint64_t>(&wanted);
    args.set_tid_size = 1;
    const long started = syscall(SYS_clone3, &args, sizeof(args));
    if (started == 0) {
        gpuguard::testing::end_with_parent(parent, SIGKILL);
        while (true) pause();
    }
    return static_cast<pid_t>(started);
}

// A real pid reuse: the miner the detection names has exited and a newcomer
// holds its pid (clone3 with set_tid, in the namespace the agent sees pids
// in) by the time the enforcer acts. The agent is stopped meanwhile, so it
// reads the miner's events only then. The kill is withheld; the newcomer lives.
TEST_F(AgentDetectTest, a_kill_after_the_pid_was_reused_leaves_the_newcomer_alone) {
    LoopbackPool pool;
    ASSERT_GE(pool.fd, 0) << "no free miner port on loopback";
    const auto alerts = dir_ / "alerts.jsonl";
    kill_on_pool_port(alerts);
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    ASSERT_EQ(kill(agent.pid(), SIGSTOP), 0);
    struct Resume {  // an assertion that ends the test early leaves it running
        pid_t pid;
        bool done = false;
        ~Resume() {
            if (!done) kill(pid, SIGCONT);
        }
    } resume{agent.pid()};
    ASSERT_TRUE(all_threads_stopped(agent.pid(), 5s));

    // The miner: the GPU node, then the pool's port; then it is gone.
    pid_t miner_pid = -1;
    uint64_t miner_start = 0;
    {
        gpuguard::testing::IoWorkerOptions options;
        options.comm = "gg-miner";
        options.gpu_node = node_.string();
        options.tcp_port = pool.port;
        options.program = GPUGUARD_IO_WORKER;  // no fork of this test binary
        auto miner = gpuguard::testing::start_io_worker(options);
        ASSERT_EQ(miner->ask('g'), 0);
        ASSERT_EQ(miner->ask('c'), 0);
        miner_pid = miner->pid();
        miner_start = start_ticks(miner_pid);
    }  // SIGKILLed and reaped: its pid is free
    // A start time of its own: /proc counts in clock ticks.
    const auto deadline = Clock::now() + 1s;
    while (boottime_ticks() <= miner_start + 1 && Clock::now() < deadline) {
        std::this_thread::sleep_for(2ms);
    }
    const pid_t newcomer_pid = start_with_pid(miner_pid, getpid());
    ASSERT_EQ(newcomer_pid, miner_pid) << strerror(errno);
    OwnChild newcomer(newcomer_pid);
    ASSERT_GT(start_ticks(newcomer_pid), miner_start);

    ASSERT_EQ(kill(agent.pid(), SIGCONT), 0);
    resume.done = true;
    const auto detection = wait_for_detection(agent, miner_pid, "GG-CORR-0002", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["event"]["action"], "kill");
    EXPECT_EQ((*detection)["process"]["name"], "gg-miner") << detection->dump();
    const auto outcome = wait_for_outcome(alerts, miner_pid, "kill");
    ASSERT_TRUE(outcome) << agent.stderr_text();
    EXPECT_EQ((*outcome)["gpuguard"]["enforcement"]["outcome"], "withheld") << outcome->dump();
    EXPECT_NE((*outcome)["event"]["reason"].get<std::string>().find("another process"),
              std::string::npos)
        << outcome->dump();
    EXPECT_FALSE(newcomer.wait_exit(100ms))
        << "the newcomer was signalled: status " << newcomer.status;
    // Nothing else either: no scan of the newcomer's executable is the
    // miner's (the scan is asked for the start time the agent knows).
    expect_whole_output(agent, {{"GG-CORR-0002", miner_pid, "error"}}, {miner_pid});
}

// A miner started before the agent (or while it was down) holds no GPU and
// never execs again: the agent judges what it finds running at its start,
// as at an exec, and the journal carries it (process_snapshot), so replay
// raises the same detection. A shell beside it with ordinary arguments is
// judged too, and raises nothing; so does the real grep with a pool's URL in
// its arguments (an exempt name, the file its package installed), while a
// copy of sh named curl with the same URL is judged after all.
TEST_F(AgentDetectTest, a_cpu_miner_running_before_the_agent_started_is_judged_at_its_start) {
    std::vector<gpuguard::UniqueFd> stdin_writers;
    const auto spawn = [&stdin_writers](std::vector<std::string> argv) {
        return spawn_waiting(stdin_writers, std::move(argv));
    };
    // sh stays (read is a builtin): its argv is the miner's.
    const pid_t miner = spawn({"/bin/sh", "-c", "read line", "xmrig", "-o",
                               "stratum+tcp://pool.example:3333", "-u", "wallet"});
    const pid_t worker = spawn({"/bin/sh", "-c", "read line", "worker", "--port", "8080"});
    // A look-alike with a miner's text: the real grep (an exempt name, the
    // file its package installed) looking for a pool URL in what it reads.
    const pid_t stats = spawn({"/usr/bin/grep", "-e", "stratum+tcp://pool.supportxmr.com:3333"});
    // A miner's text under an exempt name, from an executable nobody
    // installed (a copy of sh named curl): the name exempts nothing.
    const auto curl = dir_ / "curl";
    std::filesystem::copy_file("/bin/sh", curl);
    const pid_t fake_curl = spawn({curl.string(), "-c", "read line", "curl", "-o",
                                   "stratum+tcp://pool.supportxmr.com:3333", "-u", "WALLET"});
    ASSERT_GT(miner, 0);
    ASSERT_GT(worker, 0);
    ASSERT_GT(stats, 0);
    ASSERT_GT(fake_curl, 0);
    gpuguard::testing::ChildReaper reap_miner(miner), reap_worker(worker), reap_stats(stats),
        reap_fake_curl(fake_curl);
    // All have exec'd before the agent starts.
    const auto exec_done = [](pid_t pid, const char* text_of_argv) {
        std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
        std::string text((std::istreambuf_iterator<char>(cmdline)), {});
        return text.find(text_of_argv) != std::string::npos;
    };
    const auto all_done = [&] {
        return exec_done(miner, "read line") && exec_done(worker, "read line") &&
               exec_done(stats, "supportxmr") && exec_done(fake_curl, "read line");
    };
    for (const auto deadline = Clock::now() + 5s; Clock::now() < deadline && !all_done();) {
        std::this_thread::sleep_for(10ms);
    }
    ASSERT_TRUE(all_done());

    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const auto detection = wait_for_detection(agent, miner, "GG-CORR-0012", 5s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_TRUE(evidence_names(*detection, "stratum+tcp://pool.example:3333")) << detection->dump();
    EXPECT_EQ((*detection)["log"]["level"], "error") << detection->dump();
    // The copy named curl: judged once its scan says no package owns it.
    const auto unowned = wait_for_detection(agent, fake_curl, "GG-CORR-0012", 5s);
    ASSERT_TRUE(unowned) << agent.stderr_text();
    EXPECT_NE((*unowned)["gpuguard"]["detection"]["evidence"].dump().find(
                  "name 'curl' is exempt (not_comm curl), but its executable " + curl.string() +
                  " is owned by no package"),
              std::string::npos)
        << unowned->dump();
    // The worker and grep (judged in the same start-up pass, before the copy
    // named curl, the last pid) raise nothing at warning or above; the
    // worker nothing at all.
    // (The copy named curl runs from the test's directory under /tmp: critical.)
    expect_whole_output(agent,
                        {{"GG-CORR-0012", miner, "error"}, {"GG-CORR-0012", fake_curl, "critical"}},
                        {miner, worker, stats, fake_curl});
    for (const auto& record : ledger().of(worker)) ADD_FAILURE() << record.dump();

    const auto replayed = replay_journal();
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    bool replayed_miner = false, replayed_fake_curl = false;
    for (const auto& [pid, rule] : replayed_detections(replayed.stdout_text)) {
        EXPECT_NE(pid, worker) << rule;
        replayed_miner = replayed_miner || (pid == miner && rule == "GG-CORR-0012");
        replayed_fake_curl = replayed_fake_curl || (pid == fake_curl && rule == "GG-CORR-0012");
    }
    EXPECT_TRUE(replayed_miner) << replayed.stdout_text;
    EXPECT_TRUE(replayed_fake_curl) << "the scan's package check is journaled";
}

// The agent's own ancestors are not judged at its start (who controls its
// launcher controls the agent): a launcher whose command line names a pool
// (bash starting the agent and passing its stop on) raises nothing, while a
// process beside it with the same words is GG-CORR-0012.
TEST_F(AgentDetectTest, the_agents_own_launcher_is_not_judged_at_its_start) {
    const std::vector<std::string> miner_words = {"xmrig", "-o", "stratum+tcp://pool.example:3333",
                                                  "-u", "wallet"};
    std::vector<gpuguard::UniqueFd> stdin_writers;
    std::vector<std::string> beside_argv = {"/bin/sh", "-c", "read line"};
    beside_argv.insert(beside_argv.end(), miner_words.begin(), miner_words.end());
    const pid_t beside = spawn_waiting(stdin_writers, beside_argv);
    ASSERT_GT(beside, 0);
    gpuguard::testing::ChildReaper reap_beside(beside);
    for (const auto deadline = Clock::now() + 5s;
         gpuguard::testing::file_bytes("/proc/" + std::to_string(beside) + "/cmdline")
                 .find("read line") == std::string::npos &&
         Clock::now() < deadline;) {
        std::this_thread::sleep_for(5ms);
    }
    // bash -c SCRIPT xmrig -o URL -u wallet AGENT...: the words are $0..$4;
    // it stays the agent's parent (no exec of its last command: `&`, wait).
    std::vector<std::string> launcher_argv = {"/bin/bash", "-c",
                                              "shift 4; \"$@\" & wait $!; exit $?"};
    launcher_argv.insert(launcher_argv.end(), miner_words.begin(), miner_words.end());
    launcher_argv.insert(launcher_argv.end(),
                         {GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    Subprocess launcher(launcher_argv);
    ASSERT_TRUE(launcher.wait_for_agent_ready(30s)) << launcher.stderr_text();
    const auto detection = wait_for_detection(launcher, beside, "GG-CORR-0012", 5s);
    ASSERT_TRUE(detection) << launcher.stderr_text();
    // The agent is stopped by this test, not through the launcher (a signal
    // from it would make it a sender the agent reads anew); the start-up
    // pass judged both, and its whole output names only the one beside.
    const std::string children =
        gpuguard::testing::file_bytes("/proc/" + std::to_string(launcher.pid()) + "/task/" +
                                      std::to_string(launcher.pid()) + "/children");
    const pid_t agent_pid = static_cast<pid_t>(std::strtol(children.c_str(), nullptr, 10));
    ASSERT_GT(agent_pid, 0) << children;
    ASSERT_EQ(kill(agent_pid, SIGTERM), 0);
    expect_whole_output(launcher, {{"GG-CORR-0012", beside, "error"}}, {beside, launcher.pid()},
                        /*signo=*/0);
}

// A command line longer than the exec record holds (sensor.argv_max_bytes
// cut to 64 here): a miner's pool and wallet after a padding argument are
// read again from /proc right after the exec (a cmdline event) and judged,
// GG-CORR-0012 naming the pool, live and in replay of the journal; the same
// padding before ordinary options raises nothing.
TEST_F(AgentDetectTest, a_command_line_cut_in_the_exec_record_is_read_again_and_judged) {
    replace_in_config("  connect_loopback: true\n",
                      "  connect_loopback: true\n  argv_max_bytes: 64\n");
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    std::vector<gpuguard::UniqueFd> stdin_writers;
    const std::string padding = "--title=" + std::string(80, 'x');
    // The worker first: its command line is read again before the miner's,
    // so the miner's detection comes once the worker was judged.
    const pid_t worker = spawn_waiting(
        stdin_writers, {"/bin/sh", "-c", "read line", "helper", padding, "--port", "8080"});
    const pid_t miner =
        spawn_waiting(stdin_writers, {"/bin/sh", "-c", "read line", "helper", padding, "-o",
                                      "stratum+tcp://pool.example:3333", "-u", "wallet"});
    ASSERT_GT(miner, 0);
    ASSERT_GT(worker, 0);
    gpuguard::testing::ChildReaper reap_miner(miner), reap_worker(worker);
    const auto detection = wait_for_detection(agent, miner, "GG-CORR-0012", 5s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_TRUE(evidence_names(*detection, "stratum+tcp://pool.example:3333")) << detection->dump();
    // The alert's command line is the whole one, not the exec record's 64 bytes.
    EXPECT_NE((*detection)["process"]["command_line"].get<std::string>().find("-u wallet"),
              std::string::npos)
        << detection->dump();
    expect_whole_output(agent, {{"GG-CORR-0012", miner, "error"}}, {miner, worker});
    for (const auto& record : ledger().of(worker)) ADD_FAILURE() << record.dump();

    // The journal keeps the read: replay raises the same without /proc.
    const auto replayed = replay_journal();
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    const auto detections = replayed_detections(replayed.stdout_text);
    EXPECT_NE(std::find(detections.begin(), detections.end(),
                        std::pair<int, std::string>{miner, "GG-CORR-0012"}),
              detections.end())
        << replayed.stdout_text;
}

}  // namespace
