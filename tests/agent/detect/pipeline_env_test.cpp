// The live pipeline's process_env events (its HostReads) over a fake
// /proc: a GPU process's environment is read at its first GPU use and again
// at each exec while it holds the GPU, so a shell that opens the GPU and
// tail-execs its program (`bash -c "exec 7<>/dev/nvidia0; exec miner"`) is
// judged on the program's environment even when the first read fell in the
// middle of that exec (the kernel then shows an empty environ). A command
// line the exec record cut short is read again after the exec (a cmdline
// event) and judged whole. Replay of what the live pipeline passed on
// raises the same detections. And the connections a process has open at
// its first GPU use.
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpuguard/detect/pipeline.h"
#include "tests/agent/detect/correlator_fixture.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using correlator_testing::builtin_rules;
using correlator_testing::kSecond;
using correlator_testing::rule_set;

using namespace std::string_literals;

constexpr uint32_t kPid = 4242;

// A /proc/PID/stat line of 52 fields whose env_end (field 51) is `env_end`:
// 0 while an exec has not set up the new image yet.
std::string stat_line(uint64_t env_end) {
    std::string line = std::to_string(kPid) + " (sleep) S 1 " + std::to_string(kPid) + " " +
                       std::to_string(kPid) + " 0 -1 4194560";
    for (int field = 10; field <= 47; ++field) line += " 0";
    line += " 140720000000000 140720000000100 140720000000100 " + std::to_string(env_end) + " 0\n";
    return line;
}

class PipelineEnvTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::filesystem::create_directories(proc_.path() / std::to_string(kPid));
        live_ = make(/*read_proc=*/true);
    }

    struct Stages {
        std::unique_ptr<ProcessTable> table;
        std::unique_ptr<Correlator> correlator;
        std::unique_ptr<HostReads> host;  // live only
        std::unique_ptr<Pipeline> pipeline;
    };

    // Table, correlator and pipeline; the live one reads the fake /proc and
    // records what it passed on (process_env events included) in passed_.
    Stages make(bool read_proc) {
        Stages stages;
        ProcessTableOptions options;
        options.read_host = false;
        stages.table =
            std::make_unique<ProcessTable>(options, [](uint32_t, uint32_t) { return true; });
        auto created = Correlator::create(builtin_rules(), rule_set(), *stages.table);
        EXPECT_TRUE(created) << created.error().message;
        stages.correlator = std::move(*created);
        PipelineStages wiring;
        wiring.table = stages.table.get();
        wiring.correlator = stages.correlator.get();
        if (read_proc) {
            stages.host = std::make_unique<HostReads>(
                *stages.table, HostReadOptions{.proc_root = proc_.path().string()});
            wiring.host = stages.host.get();
        }
        PipelineHooks hooks;
        hooks.emit = [this](const Detection& detection) { raised_.push_back(detection); };
        if (read_proc) hooks.on_judged = [this](const Event& event) { passed_.push_back(event); };
        stages.pipeline = std::make_unique<Pipeline>(wiring, std::move(hooks));
        return stages;
    }

    // What /proc/PID shows now: its environ (NUL-separated) and stat's env_end.
    void proc_shows(const std::string& environ, uint64_t env_end) {
        const auto dir = proc_.path() / std::to_string(kPid);
        std::ofstream(dir / "environ", std::ios::binary | std::ios::trunc) << environ;
        std::ofstream(dir / "stat", std::ios::trunc) << stat_line(env_end);
    }

    // The detections `data` raised, fed to `stages` as pid kPid's event.
    std::vector<Detection> feed(Stages& stages, uint64_t ts, const std::string& comm,
                                EventData data) {
        raised_.clear();
        stages.pipeline->feed(
            Event{ts, TaskInfo{kPid, kPid, 1, 1000, 1000, 1, comm}, std::move(data)});
        return std::move(raised_);
    }

    static std::vector<const ProcessEnv*> envs_of(const std::vector<Event>& events) {
        std::vector<const ProcessEnv*> envs;
        for (const Event& event : events) {
            if (const auto* env = std::get_if<ProcessEnv>(&event.data)) envs.push_back(env);
        }
        return envs;
    }

    // What a replay of the events the live pipeline passed on (the journal's)
    // raises, with the fake /proc gone.
    std::vector<Detection> replay_passed() {
        std::filesystem::remove_all(proc_.path() / std::to_string(kPid));
        Stages replay = make(/*read_proc=*/false);
        std::vector<Detection> replayed;
        for (const Event& event : passed_) {
            for (auto& detection : feed(replay, event.ts_ns, event.task.comm, event.data)) {
                replayed.push_back(std::move(detection));
            }
        }
        return replayed;
    }

    static bool has_rule(const std::vector<Detection>& detections, const std::string& rule) {
        for (const Detection& detection : detections) {
            if (detection.rule_id == rule) return true;
        }
        return false;
    }

    gpuguard::testing::TempDir proc_{"gg-pipeline-proc"};
    Stages live_;
    std::vector<Event> passed_;
    std::vector<Detection> raised_;
};

const GpuOpen kOpen{1, 7, 7, -100, 2, OpenSyscall::kOpenat, false, "/tmp/gpu0"};

TEST_F(PipelineEnvTest, environ_read_mid_tail_exec_is_read_again_at_the_exec_and_judged) {
    const std::string injected = "LD_PRELOAD=/tmp/x/libinject.so\0PATH=/usr/bin:/bin\0"s;
    proc_shows(injected, 140720000000200);
    feed(live_, 1 * kSecond, "bash",
         Exec{"/usr/bin/bash", {"bash", "-c", "exec 7<>/tmp/gpu0; sleep 10"}, false, false, kPid});
    // The agent reads environ after bash opened the GPU, while bash execs
    // sleep: the kernel shows the new image's environ empty until it is set up.
    proc_shows("", 0);
    EXPECT_FALSE(has_rule(feed(live_, 2 * kSecond, "bash", kOpen), "GG-CORR-0016"));
    ASSERT_EQ(envs_of(passed_).size(), 1u);
    EXPECT_NE(envs_of(passed_)[0]->error.find("not set up yet"), std::string::npos)
        << envs_of(passed_)[0]->error;

    proc_shows(injected, 140720000000200);
    const auto at_exec = feed(live_, 3 * kSecond, "sleep",
                              Exec{"/usr/bin/sleep", {"sleep", "10"}, false, false, kPid});
    ASSERT_TRUE(has_rule(at_exec, "GG-CORR-0016"));
    bool named = false;
    for (const Detection& detection : at_exec) {
        for (const Evidence& item : detection.evidence) {
            named |= item.detail.find("LD_PRELOAD /tmp/x/libinject.so") != std::string::npos;
        }
    }
    EXPECT_TRUE(named);
    const auto envs = envs_of(passed_);
    ASSERT_EQ(envs.size(), 2u);
    EXPECT_EQ(envs[1]->ld_preload, "/tmp/x/libinject.so");
    EXPECT_EQ(envs[1]->error, "");

    // Replay of what live passed on (the journal's events) judges the same,
    // with no /proc to read.
    EXPECT_TRUE(has_rule(replay_passed(), "GG-CORR-0016"));
}

// At its first GPU use, the connections the process has open already (a
// miner that reached its pool before it set up its GPU kernels) are passed
// on as connect events, reason established, before the GPU event.
TEST_F(PipelineEnvTest, connections_open_at_the_first_gpu_use_are_passed_on_as_established) {
    const auto dir = proc_.path() / std::to_string(kPid);
    std::filesystem::create_directories(dir / "fd");
    std::filesystem::create_directories(dir / "net");
    std::filesystem::create_symlink("socket:[42424]", dir / "fd" / "8");
    std::ofstream(dir / "net" / "tcp")
        << "  sl  local_address rem_address   st\n"
        << "   0: 0F02000A:D2F0 9633A8C6:01BB 01 00000000:00000000 00:00000000 00000000 0 0 "
           "42424\n";
    proc_shows("PATH=/usr/bin\0"s, 140720000000200);
    feed(live_, 1 * kSecond, "cudahelper",
         Exec{"/opt/.cache/cudahelper", {"cudahelper"}, false, false, kPid});
    feed(live_, 2 * kSecond, "cudahelper", kOpen);
    std::vector<const Connect*> connects;
    size_t connect_at = passed_.size(), open_at = passed_.size();
    for (size_t i = 0; i < passed_.size(); ++i) {
        if (const auto* connect = std::get_if<Connect>(&passed_[i].data)) {
            connects.push_back(connect);
            connect_at = std::min(connect_at, i);
        }
        if (std::holds_alternative<GpuOpen>(passed_[i].data)) open_at = std::min(open_at, i);
    }
    ASSERT_EQ(connects.size(), 1u);
    EXPECT_EQ(connects[0]->address, "198.168.51.150");
    EXPECT_EQ(connects[0]->port, 443);
    EXPECT_EQ(connects[0]->fd, 8);
    EXPECT_TRUE(connects[0]->established);
    EXPECT_TRUE(connects[0]->gpu_holder);
    EXPECT_FALSE(connects[0]->watched_tgid);
    EXPECT_LT(connect_at, open_at);
    // Once only: the next GPU event reads nothing again.
    feed(live_, 3 * kSecond, "cudahelper", GpuIoctl{1, 7, 7, 0xc020462a, 0});
    size_t after = 0;
    for (const Event& event : passed_) after += std::holds_alternative<Connect>(event.data);
    EXPECT_EQ(after, 1u);
}

TEST_F(PipelineEnvTest, exec_of_a_process_without_a_gpu_reads_no_environment) {
    proc_shows("LD_PRELOAD=/tmp/x/libinject.so\0"s, 140720000000200);
    feed(live_, 1 * kSecond, "bash", Exec{"/usr/bin/bash", {"bash"}, false, false, kPid});
    feed(live_, 2 * kSecond, "sleep", Exec{"/usr/bin/sleep", {"sleep", "1"}, false, false, kPid});
    EXPECT_TRUE(envs_of(passed_).empty());
    // Its first GPU use reads it, and the exec that follows (the fd survives) again.
    EXPECT_TRUE(has_rule(feed(live_, 3 * kSecond, "sleep", kOpen), "GG-CORR-0016"));
    feed(live_, 4 * kSecond, "python3", Exec{"/usr/bin/python3", {"python3"}, false, false, kPid});
    EXPECT_EQ(envs_of(passed_).size(), 2u);
}

// XMRig's options after a kilobyte of padding: the exec record (cut at
// sensor.argv_max_bytes) shows the padding only; /proc shows it all.
TEST_F(PipelineEnvTest, a_command_line_the_exec_record_cut_is_read_again_and_judged) {
    const std::string padding = "--title=" + std::string(1000, 'x');
    const std::vector<std::string> argv{"/var/tmp/.ICE-unix/updater",
                                        padding,
                                        "-o",
                                        "stratum+tcp://pool.supportxmr.com:3333",
                                        "-u",
                                        "44AFFq5kSiGBoZ4NMDwYtN18obc8AemS33DBLWs3H7otXft3XjrpD"};
    std::string bytes;
    for (const auto& arg : argv) bytes += arg + '\0';
    std::ofstream(proc_.path() / std::to_string(kPid) / "cmdline", std::ios::binary) << bytes;
    // What the kernel copied: the first 1024 bytes, the padding cut.
    const std::vector<std::string> cut =
        split_nul_separated(std::string_view(bytes).substr(0, 1024));
    ASSERT_EQ(cut.size(), 2u);
    const auto raised = feed(live_, 1 * kSecond, "updater",
                             Exec{argv[0], cut, /*argv_truncated=*/true, false, kPid});
    ASSERT_TRUE(has_rule(raised, "GG-CORR-0012")) << "the pool and wallet past the cut";
    bool whole = false;
    for (const Detection& detection : raised) {
        if (detection.rule_id != "GG-CORR-0012") continue;
        for (const Evidence& item : detection.evidence) {
            whole |=
                item.field == "cmdline" &&
                item.detail.find("stratum+tcp://pool.supportxmr.com:3333") != std::string::npos;
        }
        EXPECT_EQ(detection.process.argv, argv) << "the table took the whole command line";
    }
    EXPECT_TRUE(whole);
    ASSERT_EQ(passed_.size(), 2u);
    const auto* read = std::get_if<ProcessCmdline>(&passed_[1].data);
    ASSERT_NE(read, nullptr) << "the cmdline event follows the exec";
    EXPECT_EQ(read->argv, argv);
    EXPECT_TRUE(read->extends_exec);
    EXPECT_FALSE(read->truncated);

    // Replay of what live passed on, with no /proc, raises the same.
    EXPECT_TRUE(has_rule(replay_passed(), "GG-CORR-0012"));
}

// An exec whose argv was not cut reads nothing again; one whose process
// rewrote its argv since (or exec'd again) is recorded and changes nothing.
TEST_F(PipelineEnvTest, only_a_cut_command_line_is_read_again_and_only_its_own_is_taken) {
    const std::string padding(1100, 'p');
    std::ofstream(proc_.path() / std::to_string(kPid) / "cmdline", std::ios::binary)
        << "nginx: worker process" << '\0' << "-o" << '\0'
        << "stratum+tcp://pool.supportxmr.com:3333" << '\0';
    feed(live_, 1 * kSecond, "nginx", Exec{"/usr/sbin/nginx", {"nginx"}, false, false, kPid});
    EXPECT_EQ(passed_.size(), 1u) << "not cut: not read again";
    const auto raised =
        feed(live_, 2 * kSecond, "nginx",
             Exec{"/usr/sbin/nginx", {"/usr/sbin/nginx", padding}, true, false, kPid});
    EXPECT_FALSE(has_rule(raised, "GG-CORR-0012"));
    ASSERT_EQ(passed_.size(), 3u);
    const auto* read = std::get_if<ProcessCmdline>(&passed_[2].data);
    ASSERT_NE(read, nullptr);
    EXPECT_FALSE(read->extends_exec);
    EXPECT_EQ(live_.table->find(kPid)->cmdline,
              (std::vector<std::string>{"/usr/sbin/nginx", padding}));
    // Gone before the read: no event.
    std::filesystem::remove_all(proc_.path() / std::to_string(kPid));
    feed(live_, 3 * kSecond, "nginx",
         Exec{"/usr/sbin/nginx", {"/usr/sbin/nginx", padding}, true, false, kPid});
    EXPECT_EQ(passed_.size(), 4u);
}

}  // namespace
}  // namespace gpuguard::agent
