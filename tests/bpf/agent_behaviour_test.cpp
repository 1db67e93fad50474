// Behaviour and precision in the running agent. The quiet-miner rule (GG-CORR-0013): a
// process that keeps its GPU busy, throttled to 60 % (the fake NVML), writes nothing, and sends
// small periodic messages of a protocol gpuguard does not recognise to an address no DNS answer
// named is reported with each signal in its evidence; the same worker talking to loopback (a local
// service) and one that writes files are not. The peer is a namespace of the test's own behind a
// veth pair. The rule is the built-in one with its 2-minute windows cut to 2 s (same id,
// `rules.correlation_files`); the windows themselves are the scenarios'.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/fake_nvml_script.h"
#include "tests/support/netns.h"
#include "tests/support/run_command.h"
#include "tests/support/time_bound.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::Clock;
using gpuguard::testing::LoopbackPool;
using gpuguard::testing::Subprocess;
using gpuguard::testing::time_bound;

constexpr uint16_t kOpaquePort = 8443;  // not a miner's port: the address alone is suspect

TEST_F(AgentDetectTest, quiet_gpu_miner_talking_to_an_unnamed_peer_is_detected_by_behaviour) {
    LoopbackPool local;
    ASSERT_GE(local.fd, 0);
    const gpuguard::testing::DiskScratchFile file("gg-quiet-writer");
    std::unique_ptr<gpuguard::testing::RequestChild> quiet, chatty_local, writer;
    std::optional<gpuguard::testing::VethPeer> peer;
    {
        // The workers are forked inside a namespace of the test's own, whose
        // veth peer 10.67.0.2 listens; the agent stays on the host.
        gpuguard::testing::NetnsScope netns;
        ASSERT_EQ(netns.error(), "");
        peer.emplace(kOpaquePort, /*hold_connections=*/true);
        ASSERT_EQ(peer->error(), "");
        const auto worker = [&](const std::string& comm, const std::string& address,
                                uint16_t port) {
            return gpuguard::testing::start_io_worker({.comm = comm,
                                                       .gpu_node = node_.string(),
                                                       .file = file.path(),
                                                       .tcp_port = port,
                                                       .tcp_address = address});
        };
        quiet = worker("gg-quiet", "10.67.0.2", kOpaquePort);
        writer = worker("gg-writer", "10.67.0.2", kOpaquePort);
    }
    chatty_local = gpuguard::testing::start_io_worker({.comm = "gg-local",
                                                       .gpu_node = node_.string(),
                                                       .file = file.path(),
                                                       .tcp_port = local.port});
    for (auto* child : {quiet.get(), writer.get(), chatty_local.get()}) {
        ASSERT_EQ(child->ask('g'), 0);
    }
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script(
        {.gpu_utilization = 70,
         .memory_utilization = 40,
         .memory_used = 6ull << 30,
         // Throttled to 60 %: never "every sample above 90 %".
         .processes = {{quiet->pid(), 2ull << 30, 60},
                       {writer->pid(), 2ull << 30, 60},
                       {chatty_local->pid(), 2ull << 30, 60}}});
    const auto rules = dir_ / "quiet.yaml";
    std::ofstream(rules) << R"(rules:
  - id: GG-CORR-0013
    name: Quiet GPU miner by its behaviour (the built-in rule with 2 s windows)
    severity: warning
    action: alert
    window: 1h
    when:
      gpu_held: true
      sustained_utilization: {above_percent: 40, by: p20, for: 2s, max_connects: 3,
                              min_connects: 1}
      quiet_io: {for: 2s, max_file_write_bytes: 256KB, max_net_send_bytes: 64KB,
                 max_bytes_per_send: 1KB, max_send_gap: 1s}
      opaque_peer: true
    supporting:
      severity: error
      signals:
        - name: no file writes at all
          quiet_io: {for: 2s, max_file_write_bytes: 0, max_net_send_bytes: 64KB,
                     max_bytes_per_send: 1KB, max_send_gap: 1s}
)";
    use_fake_gpu(rules);
    auto started = start_agent_playing(script);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    for (auto* child : {quiet.get(), writer.get(), chatty_local.get()}) {
        ASSERT_EQ(child->ask('c'), 0);
    }
    const auto work = [&] {
        for (auto* child : {quiet.get(), writer.get(), chatty_local.get()}) {
            ASSERT_EQ(child->ask('s'), 0);
        }
        ASSERT_EQ(writer->ask('f'), 0);
    };
    std::optional<nlohmann::json> detection;
    for (const auto deadline = Clock::now() + time_bound(15s);
         !detection && Clock::now() < deadline;) {
        work();
        detection = wait_for_detection(agent, quiet->pid(), "GG-CORR-0013", 200ms);
    }
    ASSERT_TRUE(detection) << agent.stderr_text();
    const std::string text = detection->dump();
    EXPECT_NE(text.find("10.67.0.2:8443 (no DNS answer named it)"), std::string::npos) << text;
    EXPECT_NE(text.find("a protocol gpuguard does not recognise"), std::string::npos) << text;
    EXPECT_NE(text.find("compute p20 60% (mean 60%, lowest 60%) above 40%"), std::string::npos)
        << text;
    EXPECT_NE(text.find("no file writes at all: "), std::string::npos) << text;
    EXPECT_EQ((*detection)["log"]["level"], "error") << "raised by its supporting signal";
    // The loopback talker and the writer, pegged and sending the same, never
    // are: neither in these rounds nor in any line an earlier wait read.
    for (int i = 0; i < 15; ++i) {
        work();
        EXPECT_FALSE(wait_for_detection(agent, writer->pid(), "GG-CORR-0013", 200ms)) << i;
        EXPECT_FALSE(wait_for_detection(agent, chatty_local->pid(), "GG-CORR-0013", 1ms)) << i;
    }
    // (The workers are forks of this test binary, whose own miner strings
    // YARA knows, so other rules may name them: the behaviour rule may not.)
    for (const auto& line : detections_for({writer->pid(), chatty_local->pid()}, "GG-CORR-0013")) {
        ADD_FAILURE() << "a benign worker was reported: " << line;
    }
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

// A process NVML lists on the GPU that the sensor never saw open one (it
// got its fds some other way) becomes a GPU holder on NVML's word and is
// reported (GG-CORR-0025, its wait cut to 1 s); the one beside it that
// opened the test's GPU node as usual is not.
TEST_F(AgentDetectTest, a_gpu_process_only_nvml_lists_is_reported_and_judged_as_a_gpu_holder) {
    const auto worker = [&](const std::string& comm) {
        return gpuguard::testing::start_io_worker(
            {.comm = comm, .gpu_node = node_.string(), .file = "", .tcp_port = 0});
    };
    auto seen = worker("gg-opened");
    auto unseen = worker("gg-handed");
    ASSERT_EQ(seen->ask('g'), 0);
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script(
        {.gpu_utilization = 60,
         .memory_utilization = 30,
         .memory_used = 4ull << 30,
         .processes = {{seen->pid(), 1ull << 30, 30}, {unseen->pid(), 1ull << 30, 30}}});
    const auto rules = dir_ / "unseen.yaml";
    std::ofstream(rules) << R"(rules:
  - id: GG-CORR-0025
    name: GPU in use with no open the sensor saw (the built-in rule with a 1 s wait)
    severity: warning
    action: alert
    when:
      gpu_unseen: {for: 1s}
)";
    use_fake_gpu(rules);
    auto started = start_agent_playing(script);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const auto detection =
        wait_for_detection(agent, unseen->pid(), "GG-CORR-0025", time_bound(15s));
    ASSERT_TRUE(detection) << agent.stderr_text();
    const std::string text = detection->dump();
    EXPECT_NE(text.find("but no open of a GPU device was seen"), std::string::npos) << text;
    EXPECT_EQ((*detection)["log"]["level"], "warning");
    // Another second of samples: the process that opened its node never is.
    EXPECT_FALSE(wait_for_detection(agent, seen->pid(), "GG-CORR-0025", 1500ms));
    EXPECT_TRUE(detections_for({seen->pid()}, "GG-CORR-0025").empty());
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

// The GPU software a process runs on, read from its maps at its first GPU
// use: a worker that maps a runtime compiler (a copy of a library named
// libnvrtc.so.12) before it opens the GPU is "runtime_only", one that maps
// an ML framework (named libtorch_cuda.so) is not; a rule on the stack
// tells them apart, and the journal carries the gpu_libraries events.
TEST_F(AgentDetectTest, the_gpu_stack_mapped_at_first_gpu_use_is_read_and_judged) {
    const auto nvrtc = dir_ / "libnvrtc.so.12";
    const auto torch = dir_ / "libtorch_cuda.so";
    std::filesystem::copy_file(GPUGUARD_FAKE_NVML_PATH, nvrtc);
    std::filesystem::copy_file(GPUGUARD_FAKE_NVML_PATH, torch);
    const auto worker = [&](const std::string& comm, const std::filesystem::path& library) {
        return std::make_unique<gpuguard::testing::RequestChild>(
            [library, node = node_.string()](char request) -> int {
                if (request == 'l') return dlopen(library.c_str(), RTLD_NOW) ? 0 : ENOENT;
                if (request == 'g') return open(node.c_str(), O_RDWR | O_CLOEXEC) >= 0 ? 0 : errno;
                return EINVAL;
            },
            [comm] {
                prctl(PR_SET_NAME, comm.c_str(), 0, 0, 0);
                prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
            });
    };
    auto kernels = worker("gg-kernels", nvrtc);
    auto trainer = worker("gg-trainer", torch);
    const auto rules = dir_ / "stack.yaml";
    std::ofstream(rules) << R"(rules:
  - id: TEST-STACK-0001
    name: GPU process with no ML framework
    severity: warning
    action: alert
    when:
      gpu_held: true
      gpu_stack: [runtime_only, driver_only]
)";
    std::ofstream(config_, std::ios::app) << "  correlation_files: [" << rules.string() << "]\n";
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    for (auto* child : {kernels.get(), trainer.get()}) {
        ASSERT_EQ(child->ask('l'), 0);
        ASSERT_EQ(child->ask('g'), 0);
    }
    const auto detection = wait_for_detection(agent, kernels->pid(), "TEST-STACK-0001", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_NE(detection->dump().find("GPU stack runtime_only: libnvrtc.so.12; no ML framework"),
              std::string::npos)
        << detection->dump();
    EXPECT_FALSE(wait_for_detection(agent, trainer->pid(), "TEST-STACK-0001", 1s));
    EXPECT_TRUE(detections_for({trainer->pid()}, "TEST-STACK-0001").empty());
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
    const auto journal =
        gpuguard::testing::run_command({GPUGUARD_BINARY, "journal", "export", "--dir",
                                        (dir_ / "journal").string(), "--type", "gpu_libraries"},
                                       30s);
    EXPECT_NE(journal.stdout_text.find("\"stack\":\"ml_framework\",\"frameworks\":[\"PyTorch\"]"),
              std::string::npos)
        << journal.stdout_text << journal.stderr_text;
}

}  // namespace

namespace {

// Precision, live: GPU programs the agent finds running (its /proc
// bootstrap) from a temporary directory and from an executable a package
// upgrade replaced. The first is a notice and nothing more; the second,
// "/usr/local/lib/... (deleted)" where only a package manager writes, is
// nothing at all. The "package" lives on a tmpfs in a mount namespace of the
// child's own, so the host's /usr is never touched.
TEST_F(AgentDetectTest, temp_dir_and_upgraded_gpu_programs_are_at_most_a_notice) {
    // A CI job's freshly built GPU test binary, run from /tmp.
    const auto runner = dir_ / "gpu-runner";
    std::filesystem::copy_file("/usr/bin/sleep", runner);
    gpuguard::testing::OwnChild from_tmp(start_child("gpu-runner", {runner.string(), "60"}));

    // Daemons whose binaries were replaced while they ran, each in a mount
    // namespace of its own (tmpfs over the directory, never the host's):
    // one under /usr/games that the namespace's dpkg database owns (an
    // upgrade: nothing), one under /usr/local, which no package owns (a
    // deleted executable: a notice).
    const std::string node = node_.string();
    // The child's pid (-1 when fork failed); `started` once it runs replaced.
    const auto replaced_daemon = [&](const std::string& dir, bool listed, bool& started) {
        started = false;
        int ready[2];
        if (pipe(ready) != 0) return pid_t{-1};
        const std::string exe = dir + "/gg-upgraded-daemon";
        const pid_t pid = fork();
        if (pid == 0) {
            close(ready[0]);
            if (unshare(CLONE_NEWNS) != 0 ||
                mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) ||
                mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=16m") != 0 ||
                (listed && mount("tmpfs", "/var/lib/dpkg/info", "tmpfs", 0, "size=1m") != 0)) {
                _exit(2);
            }
            if (listed) std::ofstream("/var/lib/dpkg/info/gg-upgraded:amd64.list") << exe << "\n";
            std::error_code ec;
            std::filesystem::copy_file("/usr/bin/sleep", exe, ec);
            if (ec || open(node.c_str(), O_RDWR) < 0) _exit(3);
            prctl(PR_SET_NAME, "gg-upgraded-dae");
            (void)!write(ready[1], "x", 1);
            close(ready[1]);
            execl(exe.c_str(), "gg-upgraded-daemon", "60", nullptr);
            _exit(4);
        }
        close(ready[1]);
        char byte = 0;
        started = pid > 0 && read(ready[0], &byte, 1) == 1;
        close(ready[0]);
        if (!started) return pid;
        std::this_thread::sleep_for(100ms);  // past its execl
        // The upgrade: a new file renamed over the running one.
        const std::string in_root = "/proc/" + std::to_string(pid) + "/root" + dir + "/";
        std::filesystem::copy_file("/usr/bin/sleep", in_root + "gg-upgraded-daemon.new");
        std::filesystem::rename(in_root + "gg-upgraded-daemon.new", in_root + "gg-upgraded-daemon");
        return pid;
    };
    bool started = false;
    gpuguard::testing::OwnChild upgraded(replaced_daemon("/usr/games", true, started));
    ASSERT_TRUE(started) << "the upgraded daemon's mount namespace could not be made";
    gpuguard::testing::OwnChild local(replaced_daemon("/usr/local/lib", false, started));
    ASSERT_TRUE(started) << "the /usr/local daemon's mount namespace could not be made";
    std::error_code ec;
    EXPECT_EQ(std::filesystem::read_symlink("/proc/" + std::to_string(upgraded.pid) + "/exe", ec),
              "/usr/games/gg-upgraded-daemon (deleted)");

    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const auto notice = wait_for_detection(agent, from_tmp.pid, "GG-CORR-0005", 5s);
    ASSERT_TRUE(notice) << agent.stderr_text();
    EXPECT_EQ((*notice)["log"]["level"], "notice") << notice->dump();
    const auto deleted = wait_for_detection(agent, local.pid, "GG-CORR-0005", 5s);
    ASSERT_TRUE(deleted) << "a deleted executable under /usr/local is no upgrade";
    EXPECT_EQ((*deleted)["log"]["level"], "notice") << deleted->dump();
    // Nothing else about either, within a second more.
    wait_for_detection(agent, 0, "none", 1s);
    for (const auto& line : seen_) {
        const auto record = nlohmann::json::parse(line);
        const auto pid = record["process"]["pid"];
        if (pid == upgraded.pid) ADD_FAILURE() << "the upgraded daemon was reported: " << line;
        if ((pid == from_tmp.pid || pid == local.pid) && record["log"]["level"] != "notice") {
            ADD_FAILURE() << "more than a notice for the temp-dir runner: " << line;
        }
    }
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

}  // namespace

namespace {

// GPU memory hoarding (the built-in GG-CORR-0008: more than 20 GB within
// 5 minutes at no more than 20 % compute), live on the fake NVML's memory
// ramp: three children of the test hold 1 GiB each until the step file
// moves the GPU on. Then the hoarder holds 20.5 GiB (19.5 GiB more: 20.9 GB,
// over 20 GB but under 20 GiB) at 3 % compute and is reported; one that
// took 18.5 GiB (19.9 GB, under 20 GB) and one that took as much as the
// hoarder while computing at 85 % are not. A canary rule (a fourth child
// over 1 GiB) says when the agent has judged a reading of the first step.
TEST_F(AgentDetectTest, gpu_memory_hoarding_fires_on_a_20_GB_ramp_at_low_compute_only) {
    gpuguard::testing::OwnChild hoard(start_child("gg-hoard", {}));
    gpuguard::testing::OwnChild almost(start_child("gg-almost", {}));
    gpuguard::testing::OwnChild busy(start_child("gg-busy", {}));
    gpuguard::testing::OwnChild canary(start_child("gg-canary", {}));
    for (pid_t pid : {hoard.pid, almost.pid, busy.pid, canary.pid}) ASSERT_GT(pid, 0);
    const auto step_file = dir_ / "nvml-step";
    std::ofstream(step_file) << "0\n";
    const auto ramp = [&](uint64_t hoarded, uint64_t almost_hoarded) {
        return gpuguard::testing::FakeH100{
            .gpu_utilization = 30,
            .memory_utilization = 60,
            .memory_used = hoarded * 2 + almost_hoarded + (2ull << 30),
            .processes = {{hoard.pid, hoarded, 3},
                          {almost.pid, almost_hoarded, 3},
                          {busy.pid, hoarded, 85},
                          {canary.pid, 2ull << 30, 3}}};
    };
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script(
        {ramp(1ull << 30, 1ull << 30), ramp(41ull << 29, 39ull << 29)}, step_file.string());
    const auto rules = dir_ / "canary.yaml";
    std::ofstream(rules) << R"(rules:
  - id: SITE-CANARY
    name: Over 1 GiB (the test's canary)
    severity: notice
    window: 1h
    when:
      gpu_held: true
      gpu_memory_above: 1GiB
)";
    use_fake_gpu(rules);
    auto started = start_agent_playing(script);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    ASSERT_TRUE(wait_for_detection(agent, canary.pid, "SITE-CANARY", 10s)) << agent.stderr_text();

    std::ofstream(step_file) << "1\n";
    const auto detection = wait_for_detection(agent, hoard.pid, "GG-CORR-0008", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_NE(detection->dump().find(
                  "GPU memory grew from 1.0 GiB to 20.5 GiB within 300s, compute at most 3%"),
              std::string::npos)
        << detection->dump();
    // Ten readings more (2 s): neither of the others.
    wait_for_detection(agent, 0, "none", 2s);
    for (const auto& line : seen_) {
        const auto record = nlohmann::json::parse(line);
        if (record["rule"]["id"] != "GG-CORR-0008") continue;
        EXPECT_EQ(record["process"]["pid"], hoard.pid) << line;
    }
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

// GG-CORR-0026 (its 3 minutes cut to 2 s): the fake GPU at 95 % with its
// one process listed at 93 % raises nothing; the same load with that
// process at 3 % is the GPU's own detection, naming no process (pid 0) and
// the GPU, with the holder it knows in the evidence; the holder is not
// blamed for it.
TEST_F(AgentDetectTest, gpu_load_its_holder_does_not_explain_is_the_gpus_own_detection) {
    gpuguard::testing::OwnChild worker(start_child("gg-worker", {}));
    ASSERT_GT(worker.pid, 0);
    const auto step_file = dir_ / "nvml-step";
    std::ofstream(step_file) << "0\n";
    const auto load = [&](unsigned sm) {
        return gpuguard::testing::FakeH100{.gpu_utilization = 95,
                                           .memory_utilization = 40,
                                           .memory_used = 4ull << 30,
                                           .processes = {{worker.pid, 2ull << 30, sm}}};
    };
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script({load(93), load(3)},
                                                                 step_file.string());
    const auto rules = dir_ / "unexplained.yaml";
    std::ofstream(rules) << R"(rules:
  - id: GG-CORR-0026
    name: GPU busy with no process to show for it (the built-in rule over 2 s)
    severity: warning
    action: alert
    when:
      unexplained_gpu_load: {above_percent: 50, by: p20, for: 2s, max_explained_percent: 25}
)";
    use_fake_gpu(rules);
    auto started = start_agent_playing(script);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    // The GPU's detections carry no process: read them by rule.
    const auto gpu_detection = [&](std::chrono::milliseconds timeout) {
        std::optional<nlohmann::json> found;
        for (const auto deadline = Clock::now() + timeout; !found && Clock::now() < deadline;) {
            const auto line = agent.read_stdout_line(50ms);
            if (!line) continue;
            seen_.push_back(*line);
            auto record = nlohmann::json::parse(*line, nullptr, false);
            if (record.is_object() && record["rule"]["id"] == "GG-CORR-0026") found = record;
        }
        return found;
    };
    EXPECT_FALSE(gpu_detection(3s)) << "explained by its holder";
    std::ofstream(step_file) << "1\n";
    const auto detection = gpu_detection(10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    const std::string text = detection->dump();
    EXPECT_FALSE(detection->contains("process")) << text;
    // Fired once the window's share fell to a quarter or less (its first
    // samples were explained ones); the holder now at 3 %.
    EXPECT_NE(text.find("utilisation p20 95% (mean 95%) above 50% for 2s; the processes known "
                        "to hold it explain "),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("(now: " + std::to_string(worker.pid) + " (gg-worker) 3%)"),
              std::string::npos)
        << text;
    EXPECT_EQ((*detection)["gpuguard"]["gpus"][0]["index"], 0) << text;
    EXPECT_EQ((*detection)["log"]["level"], "warning");
    // The holder is not blamed for it (forks of this test binary are miners
    // to YARA, GG-CORR-0004: that is their own matter).
    EXPECT_TRUE(detections_for({worker.pid}, "GG-CORR-0026").empty());
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

}  // namespace
