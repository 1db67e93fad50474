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
using gpuguard::testing::Subprocess;
using gpuguard::testing::time_bound;

constexpr uint16_t kOpaquePort = 8443;  // not a miner's port: the address alone is suspect

TEST_F(AgentDetectTest, quiet_gpu_miner_talking_to_an_unnamed_peer_is_detected_by_behaviour) {
    gpuguard::testing::LoopbackService local;  // a local service, on no miner's port
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
                                                       .tcp_address = address,
                                                       .program = GPUGUARD_IO_WORKER});
        };
        quiet = worker("gg-quiet", "10.67.0.2", kOpaquePort);
        writer = worker("gg-writer", "10.67.0.2", kOpaquePort);
    }
    chatty_local = gpuguard::testing::start_io_worker({.comm = "gg-local",
                                                       .gpu_node = node_.string(),
                                                       .file = file.path(),
                                                       .tcp_port = local.port,
                                                       .program = GPUGUARD_IO_WORKER});
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
    // The loopback talker and the writer, pegged and sending the same in the
    // same rounds, were judged on the same NVML samples that reported the
    // quiet one: by now either would have been. The whole output has the
    // quiet worker's detection and nothing else at warning or above.
    expect_whole_output(agent, {{"GG-CORR-0013", quiet->pid(), "error"}},
                        {quiet->pid(), writer->pid(), chatty_local->pid()});
}

// A process NVML lists on the GPU that the sensor never saw open one (it
// got its fds some other way) becomes a GPU holder on NVML's word and is
// reported (GG-CORR-0025, its wait cut to 1 s); the one beside it that
// opened the test's GPU node as usual is not.
TEST_F(AgentDetectTest, a_gpu_process_only_nvml_lists_is_reported_and_judged_as_a_gpu_holder) {
    const auto worker = [&](const std::string& comm) { return start_gpu_worker(comm); };
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
    // The process that opened its node was on the same samples, listed as
    // long: had it been unseen it would have been reported with the other.
    expect_whole_output(agent, {{"GG-CORR-0025", unseen->pid(), "warning"}},
                        {seen->pid(), unseen->pid()});
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
    // Idle programs (no forks of this test binary) that map the library
    // (dlopen) before they open the GPU node.
    const auto worker = [&](const std::string& comm, const std::filesystem::path& library) {
        return start_idle_holder(comm, {"GG_LOAD=" + library.string()});
    };
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
    gpuguard::testing::OwnChild kernels(worker("gg-kernels", nvrtc));
    gpuguard::testing::OwnChild trainer(worker("gg-trainer", torch));
    ASSERT_GT(kernels.pid, 0);
    ASSERT_GT(trainer.pid, 0);
    const auto detection = wait_for_detection(agent, kernels.pid, "TEST-STACK-0001", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_NE(detection->dump().find("GPU stack runtime_only: libnvrtc.so.12; no ML framework"),
              std::string::npos)
        << detection->dump();
    expect_whole_output(agent, {{"TEST-STACK-0001", kernels.pid, "warning"}},
                        {kernels.pid, trainer.pid});
    // The trainer's first GPU use was judged (its stack read, in the
    // journal) before the agent stopped: the rule saw it and said nothing.
    const auto journal =
        gpuguard::testing::run_command({GPUGUARD_BINARY, "journal", "export", "--dir",
                                        (dir_ / "journal").string(), "--type", "gpu_libraries"},
                                       30s);
    bool trainer_read = false;
    for (size_t at = 0, end; at < journal.stdout_text.size(); at = end + 1) {
        end = std::min(journal.stdout_text.find('\n', at), journal.stdout_text.size());
        const std::string line = journal.stdout_text.substr(at, end - at);
        if (line.find("\"pid\":" + std::to_string(trainer.pid) + ",") != std::string::npos &&
            line.find("\"stack\":\"ml_framework\",\"frameworks\":[\"PyTorch\"]") !=
                std::string::npos) {
            trainer_read = true;
        }
    }
    EXPECT_TRUE(trainer_read) << journal.stdout_text << journal.stderr_text;
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
        // Past its execl: its executable is the one about to be replaced.
        const std::string exe_link = "/proc/" + std::to_string(pid) + "/exe";
        for (const auto deadline = Clock::now() + 5s; Clock::now() < deadline;) {
            std::error_code ec;
            if (std::filesystem::read_symlink(exe_link, ec) == exe) break;
            std::this_thread::sleep_for(1ms);
        }
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
    // The start-up pass judged the upgraded daemon (started before the
    // /usr/local one) with the others: nothing about it at all, nothing
    // more than these notices about the others.
    expect_whole_output(
        agent, {{"GG-CORR-0005", from_tmp.pid, "notice"}, {"GG-CORR-0005", local.pid, "notice"}},
        {from_tmp.pid, upgraded.pid, local.pid});
    for (const auto& record : ledger().of(upgraded.pid)) {
        ADD_FAILURE() << "the upgraded daemon was reported: " << record.dump();
    }
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
    // The reading that grew the others past 1 GiB (the canary rule's
    // notice for each) was judged for GG-CORR-0008 too: neither was reported.
    for (pid_t pid : {almost.pid, busy.pid}) {
        EXPECT_TRUE(wait_for_detection(agent, pid, "SITE-CANARY", 10s)) << pid;
    }
    expect_whole_output(agent,
                        {{"SITE-CANARY", canary.pid, "notice"},
                         {"SITE-CANARY", almost.pid, "notice"},
                         {"SITE-CANARY", busy.pid, "notice"},
                         {"SITE-CANARY", hoard.pid, "notice"},
                         {"GG-CORR-0008", hoard.pid, "warning"}},
                        {hoard.pid, almost.pid, busy.pid, canary.pid});
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
    // A canary that fires on the same 2 s window of load whatever its
    // holder explains: once it has, the window of explained load was judged.
    const auto rules = dir_ / "unexplained.yaml";
    std::ofstream(rules) << R"(rules:
  - id: SITE-CANARY
    name: GPU busy for 2 s (the test's canary)
    severity: notice
    window: 1h
    when:
      unexplained_gpu_load: {above_percent: 50, by: p20, for: 2s, max_explained_percent: 100}
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
    // The GPU's detections name no process (pid 0).
    ASSERT_TRUE(wait_for_detection(agent, 0, "SITE-CANARY", 10s)) << agent.stderr_text();
    EXPECT_TRUE(detections_for({0}, "GG-CORR-0026").empty()) << "explained by its holder";
    std::ofstream(step_file) << "1\n";
    const auto detection = wait_for_detection(agent, 0, "GG-CORR-0026", 10s);
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
    // The holder is not blamed for it.
    expect_whole_output(agent, {{"SITE-CANARY", 0, "notice"}, {"GG-CORR-0026", 0, "warning"}},
                        {worker.pid});
}

}  // namespace
