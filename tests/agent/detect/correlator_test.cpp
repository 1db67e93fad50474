// Correlator semantics on small hand-made event sequences: windows and
// updates, pid reuse, allowlists, hot reload, actions from miner-rules.yaml,
// telemetry anomalies, and what a Detection carries.
#include "gpuguard/detect/correlator.h"

#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "gpuguard/rules/correlation.h"
#include "tests/agent/detect/correlator_fixture.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using namespace correlator_testing;

TEST_F(CorrelatorTest, MinerOnGpuIsDetectedWithItsEvidence) {
    make();
    // At exec, before any GPU use: a known miner without a GPU (GG-CORR-0012).
    const auto at_exec = feed(10 * kSecond, 100, "xmrig",
                              Exec{"/opt/xmrig/xmrig",
                                   {"xmrig", "-o", "stratum+tcp://pool.example.org:3333"},
                                   false,
                                   false,
                                   100});
    ASSERT_EQ(rule_ids(at_exec), std::vector<std::string>{"GG-CORR-0012"});
    EXPECT_EQ(at_exec[0].severity, Severity::kError) << "no temporary location, no persistence";
    EXPECT_TRUE(at_exec[0].gpus.empty());
    auto raised = feed(11 * kSecond, 100, "xmrig",
                       GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"});
    ASSERT_EQ(rule_ids(raised), std::vector<std::string>{"GG-CORR-0001"});
    const Detection& detection = raised[0];
    EXPECT_EQ(detection.update, 0u);
    EXPECT_EQ(detection.severity, Severity::kCritical);
    EXPECT_EQ(detection.mitre_technique_id, "T1496");
    EXPECT_EQ(detection.process.pid, 100u);
    EXPECT_EQ(detection.process.executable, "/opt/xmrig/xmrig");
    EXPECT_EQ(detection.process.command_line, "xmrig -o stratum+tcp://pool.example.org:3333");
    EXPECT_EQ(detection.action, "alert");  // default_action of an empty miner-rules.yaml
    EXPECT_GT(detection.confidence, 0.5);
    ASSERT_EQ(detection.gpus.size(), 1u);
    EXPECT_EQ(detection.gpus[0].major, 195u);
    EXPECT_FALSE(detection.signature_ids.empty());
    bool gpu_evidence = false, signature_evidence = false;
    for (const auto& evidence : detection.evidence) {
        gpu_evidence |= evidence.event_type == "gpu_open" && evidence.field == "gpu";
        signature_evidence |= evidence.kind == "signature" && !evidence.signature_id.empty();
    }
    EXPECT_TRUE(gpu_evidence);
    EXPECT_TRUE(signature_evidence);
    EXPECT_EQ(detection.first_seen_ns, 10 * kSecond);
}

TEST_F(CorrelatorTest, OneDetectionPerWindowUpdatedByNewEvidence) {
    make();
    start_miner(10 * kSecond, 100);
    // More opens and ioctls bring nothing new.
    EXPECT_TRUE(feed(12 * kSecond, 100, "xmrig",
                     GpuOpen{195, 255, 4, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidiactl"})
                    .empty());
    EXPECT_TRUE(feed(13 * kSecond, 100, "xmrig", GpuIoctl{195, 255, 4, 0xc020462a, 0}).empty());
    // A pool connection: a new rule fires (0002), 0001 stays quiet.
    auto raised = feed(14 * kSecond, 100, "xmrig",
                       Connect{9, -115, 4, "198.51.100.1", 3333, true, false, false, false, false});
    ASSERT_EQ(rule_ids(raised), std::vector<std::string>{"GG-CORR-0002"});
    EXPECT_EQ(raised[0].peer->ip, "198.51.100.1");
    EXPECT_EQ(raised[0].peer->port, 3333);
    // A second pool port within the window updates 0002.
    raised = feed(15 * kSecond, 100, "xmrig",
                  Connect{10, -115, 4, "198.51.100.2", 14444, true, false, false, false, false});
    ASSERT_EQ(rule_ids(raised), std::vector<std::string>{"GG-CORR-0002"});
    EXPECT_EQ(raised[0].update, 1u);
    const std::string id = raised[0].id;
    // After the 10-minute windows the evidence still holds: new detections.
    raised = feed(15 * kSecond + 601 * kSecond, 100, "xmrig",
                  Connect{11, -115, 4, "198.51.100.3", 3333, true, false, false, false, false});
    ASSERT_EQ(rule_ids(raised), (std::vector<std::string>{"GG-CORR-0001", "GG-CORR-0002"}));
    EXPECT_EQ(raised[1].update, 0u);
    EXPECT_NE(raised[1].id, id);
    EXPECT_EQ(correlator_->stats().updates, 1u);
}

TEST_F(CorrelatorTest, ReusedPidIsANewProcess) {
    make();
    EXPECT_EQ(rule_ids(start_miner(10 * kSecond, 100)), std::vector<std::string>{"GG-CORR-0001"});
    feed(20 * kSecond, 100, "xmrig", Exit{9, true});
    // Same pid, a new miner within the old window: detected again.
    EXPECT_EQ(rule_ids(start_miner(30 * kSecond, 100)), std::vector<std::string>{"GG-CORR-0001"});
}

// A process judged under one name that then takes another (PR_SET_NAME,
// or a forked child judged under its parent's name before its own events
// came) is judged again under the new one.
TEST_F(CorrelatorTest, ARenamedProcessIsJudgedUnderItsNewName) {
    make();
    feed(10 * kSecond, 100, "python3",
         Exec{"/usr/bin/python3", {"python3", "train.py"}, false, false, 100});
    EXPECT_TRUE(feed(11 * kSecond, 100, "python3",
                     GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"})
                    .empty());
    EXPECT_TRUE(feed(12 * kSecond, 100, "python3", ProcessIo{0, 0, 0}).empty());
    const auto raised = feed(13 * kSecond, 100, "xmrig", GpuIoctl{195, 0, 3, 0xc020462a, 0});
    const auto ids = rule_ids(raised);
    ASSERT_NE(std::find(ids.begin(), ids.end(), "GG-CORR-0001"), ids.end())
        << ::testing::PrintToString(ids);
    EXPECT_EQ(raised[0].process.comm, "xmrig");
}

TEST_F(CorrelatorTest, AllowlistedUserIsNotReported) {
    make(rule_set("allowlist:\n  users: ['1000']\n"));
    EXPECT_TRUE(start_miner(10 * kSecond, 100, "xmrig", "/opt/xmrig/xmrig", 1000).empty());
    EXPECT_GT(correlator_->stats().allowlisted, 0u);
    EXPECT_EQ(rule_ids(start_miner(10 * kSecond, 200, "xmrig", "/opt/xmrig/xmrig", 1001)),
              std::vector<std::string>{"GG-CORR-0001"});
}

TEST_F(CorrelatorTest, ActionComesFromTheStrongestMatchingSignature) {
    make(rule_set("signatures:\n  override:\n    - id: GG-XMRIG-0001\n      action: kill\n"));
    auto raised = start_miner(10 * kSecond, 100);
    ASSERT_EQ(raised.size(), 1u);
    EXPECT_EQ(raised[0].action, "kill");
    EXPECT_NE(
        std::find(raised[0].signature_ids.begin(), raised[0].signature_ids.end(), "GG-XMRIG-0001"),
        raised[0].signature_ids.end());
}

TEST_F(CorrelatorTest, HotReloadedUserRuleAppliesToLaterImages) {
    make();
    auto quiet = feed(10 * kSecond, 100, "gpu-sched-7",
                      Exec{"/opt/sched/gpu-sched-7", {"gpu-sched-7"}, false, false, 100});
    quiet = feed(11 * kSecond, 100, "gpu-sched-7",
                 GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"});
    EXPECT_TRUE(quiet.empty());
    ASSERT_TRUE(correlator_->set_rule_set(rule_set(R"(rules:
  - id: local-renamed-miner
    name: Miner renamed to our scheduler's name
    severity: critical
    confidence: 0.9
    action: kill
    process_name: ["gpu-sched-*"]
    tests:
      match: ["gpu-sched-7"]
      no_match: ["gpu-scheduler"]
)")));
    auto raised = feed(12 * kSecond, 100, "gpu-sched-7", GpuIoctl{195, 0, 3, 0xc020462a, 0});
    ASSERT_EQ(rule_ids(raised), std::vector<std::string>{"GG-CORR-0001"});
    EXPECT_EQ(raised[0].action, "kill");
    EXPECT_EQ(raised[0].signature_ids, std::vector<std::string>{"local-renamed-miner"});
}

// A reading of GPU 0 (NVIDIA, /dev/nvidia0) at `utilization` % with `processes` on it.
Telemetry nvidia0_reading(double utilization, std::vector<ProcessGpuUsage> processes) {
    Telemetry telemetry;
    telemetry.gpu_index = 0;
    telemetry.vendor = "nvidia";
    telemetry.devices = {"195:0"};
    telemetry.utilization_percent = utilization;
    telemetry.processes = std::move(processes);
    return telemetry;
}

TEST_F(CorrelatorTest, MemoryGrowthNeedsLowCompute) {
    make();
    feed(1 * kSecond, 300, "hoard", Exec{"/usr/bin/hoard", {"hoard"}, false, false, 300});
    feed(2 * kSecond, 300, "hoard",
         GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"});
    feed(3 * kSecond, 301, "busy", Exec{"/usr/bin/busy", {"busy"}, false, false, 301});
    feed(4 * kSecond, 301, "busy",
         GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"});
    std::vector<Detection> all;
    for (int i = 0; i <= 4; ++i) {
        const uint64_t memory = (1ull + 6ull * i) << 30;  // 1 GiB -> 25 GiB in 4 minutes
        auto raised = feed((10 + 60 * i) * kSecond, 0, "",
                           nvidia0_reading(50, {{300, memory, 2.0}, {301, memory, 85.0}}));
        all.insert(all.end(), raised.begin(), raised.end());
    }
    ASSERT_EQ(rule_ids(all), std::vector<std::string>{"GG-CORR-0008"});
    EXPECT_EQ(all[0].process.pid, 300u);
    ASSERT_EQ(all[0].gpus.size(), 1u);
    EXPECT_EQ(all[0].gpus[0].index, 0);
    EXPECT_EQ(all[0].gpus[0].utilization_percent, 50.0);
    EXPECT_EQ(all[0].gpus[0].memory_used_bytes, 25ull << 30);
}

// GG-CORR-0008's two other bounds: growth spread over more than its 5
// minutes (25 GiB in 10, never 20 GB within any 5) and growth just under
// 20 GB (decimal: 19.97 GB) are not hoarding; 20.03 GB within a minute is.
TEST_F(CorrelatorTest, MemoryGrowthMustExceed20GBWithinFiveMinutes) {
    make();
    for (uint32_t pid : {310u, 311u, 312u}) {
        feed(1 * kSecond, pid, "hoard", Exec{"/usr/bin/hoard", {"hoard"}, false, false, pid});
        feed(2 * kSecond, pid, "hoard",
             GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"});
    }
    std::vector<Detection> all;
    for (uint64_t i = 0; i <= 10; ++i) {
        const uint64_t slow = (2 + 5 * i) << 29;  // 1 GiB + 2.5 GiB a minute
        const uint64_t base = 1ull << 30;
        auto raised =
            feed((10 + 60 * i) * kSecond, 0, "",
                 nvidia0_reading(5, {{310, slow, 2.0},
                                     {311, i == 0 ? base : base + 19'970'000'000ull, 2.0},
                                     {312, i == 0 ? base : base + 20'030'000'000ull, 2.0}}));
        all.insert(all.end(), raised.begin(), raised.end());
    }
    ASSERT_EQ(rule_ids(all), std::vector<std::string>{"GG-CORR-0008"});
    EXPECT_EQ(all[0].process.pid, 312u);
}

// Twelve minutes of a GPU pegged at 99 % by `processes` (pid, comm; each
// started with an exec and a GPU open): a telemetry reading a minute from
// 10 s on, each followed by the process_io readings io_at(pid, minute)
// gives. Each process's compute in a reading is compute_at(pid, minute)
// (99 % when not given; nullopt: the backend had no reading for it).
// Returns what was raised; `first_minute` is when the first was.
class QuietIoTest : public CorrelatorTest {
  protected:
    using IoAt = std::function<std::optional<ProcessIo>(uint32_t pid, uint64_t minute)>;
    using ComputeAt = std::function<std::optional<double>(uint32_t pid, uint64_t minute)>;

    std::vector<Detection> pegged_for_12_minutes(
        const std::vector<std::pair<uint32_t, std::string>>& processes, const IoAt& io_at,
        uint64_t& first_minute, const ComputeAt& compute_at = {}) {
        make();
        for (const auto& [pid, comm] : processes) {
            feed(1 * kSecond, pid, comm, Exec{"/opt/" + comm, {comm}, false, false, pid});
            feed(2 * kSecond, pid, comm,
                 GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"});
        }
        std::vector<Detection> all;
        for (uint64_t m = 0; m <= 11; ++m) {
            const uint64_t ts = (10 + 60 * m) * kSecond;
            if (all.empty()) first_minute = m;
            Telemetry telemetry;
            telemetry.gpu_index = 0;
            telemetry.vendor = "nvidia";
            telemetry.devices = {"195:0"};
            telemetry.utilization_percent = 99;
            for (const auto& [pid, comm] : processes) {
                telemetry.processes.push_back(
                    {pid, 1ull << 30, compute_at ? compute_at(pid, m) : 99.0});
            }
            auto raised = feed(ts, 0, "", telemetry);
            all.insert(all.end(), raised.begin(), raised.end());
            for (const auto& [pid, comm] : processes) {
                if (auto io = io_at(pid, m)) {
                    raised = feed(ts + 1, pid, comm, *io);
                    all.insert(all.end(), raised.begin(), raised.end());
                }
            }
        }
        return all;
    }
};

// GG-CORR-0009: a GPU pegged for 10 minutes by a process that writes no
// files and sends only small messages, regularly. Six processes share the
// pegged GPU; only the one whose writes look like share submissions fires.
TEST_F(QuietIoTest, PeggedGpuNeedsNoFileWritesAndSmallPeriodicSends) {
    uint64_t first_minute = 0;
    const auto all = pegged_for_12_minutes(
        {{400, "quiet"},
         {401, "writer"},
         {402, "bursty"},
         {403, "stream"},
         {404, "unknown"},
         {405, "late"}},
        [](uint32_t pid, uint64_t m) -> std::optional<ProcessIo> {
            switch (pid) {
                case 400:  // one 200-byte share a minute, nothing to files
                    return ProcessIo{4096, 200 * m, m};
                case 401:  // the same sends, and a log line a minute
                    return ProcessIo{4096 + 8192 * m, 200 * m, m};
                case 402:  // sends in its first minute only, then silence
                    return ProcessIo{0, 200 * std::min<uint64_t>(m, 1), std::min<uint64_t>(m, 1)};
                case 403:  // streams: 64 KiB a send
                    return ProcessIo{0, 65536 * m, m};
                case 404:  // sends not counted (payload programs off)
                    return ProcessIo{0, std::nullopt, std::nullopt};
                default:  // 405: sampled only from minute 5 on
                    if (m < 5) return std::nullopt;
                    return ProcessIo{0, 200 * m, m};
            }
        },
        first_minute);
    ASSERT_EQ(rule_ids(all), std::vector<std::string>{"GG-CORR-0009"});
    EXPECT_EQ(all[0].process.pid, 400u);
    EXPECT_EQ(first_minute, 10u) << "ten minutes after the first reading";
    const auto io = std::find_if(all[0].evidence.begin(), all[0].evidence.end(),
                                 [](const Evidence& e) { return e.event_type == "process_io"; });
    ASSERT_NE(io, all[0].evidence.end());
    EXPECT_EQ(io->detail,
              "in 600s: 0 bytes written to files, 10 network sends of 2000 bytes (longest pause "
              "60s)");
}

// NVML leaves a busy process out of some intervals' readings (seen on an
// H200 shared by two CUDA processes): a pegged window with a few samples
// lacking the process's reading still holds; one where most lack it does not.
TEST_F(QuietIoTest, SamplesWithoutAReadingArePassedOverWhileMostHaveOne) {
    const IoAt shares = [](uint32_t, uint64_t m) -> std::optional<ProcessIo> {
        return ProcessIo{4096, 200 * m, m};
    };
    uint64_t first_minute = 0;
    const auto gaps = pegged_for_12_minutes({{400, "quiet"}}, shares, first_minute,
                                            [](uint32_t, uint64_t m) -> std::optional<double> {
                                                if (m % 5 == 2)
                                                    return std::nullopt;  // minutes 2 and 7
                                                return 99.0;
                                            });
    ASSERT_EQ(rule_ids(gaps), std::vector<std::string>{"GG-CORR-0009"});
    EXPECT_EQ(first_minute, 10u);
    const auto compute =
        std::find_if(gaps[0].evidence.begin(), gaps[0].evidence.end(),
                     [](const Evidence& e) { return e.event_type == "telemetry"; });
    ASSERT_NE(compute, gaps[0].evidence.end());
    EXPECT_NE(compute->detail.find("2 of 11 samples without a reading"), std::string::npos)
        << compute->detail;

    const auto mostly_unknown = pegged_for_12_minutes(
        {{400, "quiet"}}, shares, first_minute, [](uint32_t, uint64_t m) -> std::optional<double> {
            if (m % 3 != 0) return std::nullopt;  // readings at minutes 0, 3, 6, 9 only
            return 99.0;
        });
    EXPECT_TRUE(mostly_unknown.empty()) << rule_ids(mostly_unknown).size();

    const auto one_low = pegged_for_12_minutes(
        {{400, "quiet"}}, shares, first_minute, [](uint32_t, uint64_t m) -> std::optional<double> {
            if (m % 5 == 2) return std::nullopt;
            return m == 5 ? 60.0 : 99.0;  // a reading below the threshold still breaks it
        });
    EXPECT_TRUE(one_low.empty());
}

// A process_io counter that goes backwards is another process's (the pid was
// reused without an exit in between): no window across it is taken for a
// quiet one; a window after it is the new process's own.
TEST_F(QuietIoTest, CountersThatWentBackAreNotAQuietWindow) {
    uint64_t first_minute = 0;
    const auto all = pegged_for_12_minutes(
        {{410, "reused"}},
        [](uint32_t, uint64_t m) {
            const uint64_t sends = m == 0 ? 1000 : m;  // 1000 at first, then from 1 again
            return std::optional<ProcessIo>(ProcessIo{0, 200 * sends, sends});
        },
        first_minute);
    // Minute 10 would be the first (as in the test above) had the count not
    // gone back inside its window; minute 11's window starts after the reset.
    ASSERT_EQ(rule_ids(all), std::vector<std::string>{"GG-CORR-0009"});
    EXPECT_EQ(first_minute, 11u);
}

TEST_F(CorrelatorTest, CustomRuleWithScopeAndDisabledBuiltin) {
    auto custom = rules::parse_correlation_rules(R"(rules:
  - id: SITE-0001
    name: GPU use by the guest account
    severity: warning
    window: 1h
    when:
      gpu_held: true
      scope: {users: ["2000"]}
    confidence: {base: 0.9}
)",
                                                 "site.yaml");
    ASSERT_TRUE(custom) << custom.error().message;
    auto rules = builtin_rules();
    for (auto& rule : rules) rule.enabled = false;
    rules.insert(rules.end(), custom->begin(), custom->end());
    make(rule_set(), rules);
    EXPECT_TRUE(start_miner(10 * kSecond, 100, "xmrig", "/opt/xmrig/xmrig", 1000).empty());
    auto raised = start_miner(10 * kSecond, 200, "blender", "/usr/bin/blender", 2000);
    ASSERT_EQ(rule_ids(raised), std::vector<std::string>{"SITE-0001"});
    EXPECT_DOUBLE_EQ(raised[0].confidence, 0.9);
}

TEST_F(CorrelatorTest, GuardPolicyViolationCarriesThePolicysActionAndDryRun) {
    auto policy = rules::parse_correlation_rules(R"(rules:
  - id: SITE-GUARD-0001
    name: GPU memory over the interns' limit
    severity: warning
    action: kill
    when:
      gpu_held: true
      scope: {users: ["1500"]}
      gpu_memory_above: 16GiB
)",
                                                 "guard.yaml");
    ASSERT_TRUE(policy) << policy.error().message;
    ProcessTableOptions options;
    options.read_host = false;
    table_ = std::make_unique<ProcessTable>(options, [](uint32_t, uint32_t) { return true; });
    auto created =
        Correlator::create(*policy, rule_set(), *table_, CorrelatorOptions{.dry_run = true});
    ASSERT_TRUE(created) << created.error().message;
    correlator_ = std::move(*created);
    start_miner(1 * kSecond, 400, "python3", "/usr/bin/python3", 1500);
    Telemetry within{0, "nvidia", "H100", {"195:0"}, 80.0, {}, {}, {{400, 12ull << 30, 80.0}}};
    EXPECT_TRUE(feed(2 * kSecond, 0, "", within).empty());
    Telemetry over{0, "nvidia", "H100", {"195:0"}, 80.0, {}, {}, {{400, 17ull << 30, 80.0}}};
    auto raised = feed(3 * kSecond, 0, "", over);
    ASSERT_EQ(rule_ids(raised), std::vector<std::string>{"SITE-GUARD-0001"});
    EXPECT_EQ(raised[0].action, "kill");
    EXPECT_TRUE(raised[0].dry_run);
    EXPECT_EQ(raised[0].evidence.back().kind, "policy");
}

// Scope by container name: the live table reads the name from the
// runtime's state; only the matching container's process is judged, and
// an allowlist entry that names the container spares it.
TEST(CorrelatorScope, ContainerNamesScopeAGuardPolicyAndAllowlistByName) {
    testing::TempDir host("gg-host");
    const auto make = [&](uint32_t pid, const std::string& id, const std::string& name) {
        const auto dir = host.path() / "proc" / std::to_string(pid);
        std::filesystem::create_directories(dir / "fd");
        std::ofstream(dir / "status")
            << "Name:\tpython3\nPid:\t" << pid << "\nPPid:\t1\nUid:\t1000\t1000\t1000\t1000\n"
            << "Gid:\t1000\t1000\t1000\t1000\n";
        std::ofstream(dir / "cmdline", std::ios::binary) << std::string("python3\0job.py\0", 15);
        std::ofstream(dir / "cgroup") << "0::/system.slice/docker-" << id << ".scope\n";
        std::filesystem::create_symlink("/usr/bin/python3", dir / "exe");
        const auto state = host.path() / "var/lib/docker/containers" / id;
        std::filesystem::create_directories(state);
        std::ofstream(state / "config.v2.json") << R"({"Name":"/)" << name << R"("})";
    };
    make(701, std::string(64, 'a'), "batch-7");
    make(702, std::string(64, 'b'), "notebook-2");
    ProcessTableOptions options;
    options.proc_root = host.path() / "proc";
    options.runtime_root = host.path();
    ProcessTable table(options, [](uint32_t, uint32_t) { return true; });
    auto policy = rules::parse_correlation_rules(R"(rules:
  - id: SITE-GUARD-NAME
    name: Batch containers on GPU 0
    severity: warning
    when:
      gpu_held: true
      scope: {container_names: ["batch-*"], not_container_names: ["batch-9*"]}
      gpu_index_not_in: [1]
)",
                                                 "guard.yaml");
    ASSERT_TRUE(policy) << policy.error().message;
    auto correlator = Correlator::create(*policy, rule_set(), table);
    ASSERT_TRUE(correlator) << correlator.error().message;
    std::vector<Detection> out;
    for (uint32_t pid : {701u, 702u}) {
        Event open;
        open.ts_ns = kSecond;
        open.task = TaskInfo{pid, pid, 1, 1000, 1000, 1, "python3"};
        open.data = GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"};
        table.apply(open);
        (*correlator)->observe(open, out);
    }
    Event telemetry;
    telemetry.ts_ns = 2 * kSecond;
    telemetry.data =
        Telemetry{0,    "nvidia", "H100", {"195:0"},
                  50.0, {},       {},     {{701, 1ull << 30, 20.0}, {702, 1ull << 30, 20.0}}};
    table.apply(telemetry);
    (*correlator)->observe(telemetry, out);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].rule_id, "SITE-GUARD-NAME");
    EXPECT_EQ(out[0].process.pid, 701u);
    EXPECT_EQ(table.get(702)->container_details.name, "notebook-2");

    // miner-rules.yaml's allowlist.containers takes a name glob too: the
    // same reading judged with the batch containers allowlisted by name.
    auto allowing =
        Correlator::create(*policy, rule_set("allowlist:\n  containers: ['batch-*']\n"), table);
    ASSERT_TRUE(allowing) << allowing.error().message;
    std::vector<Detection> allowed;
    telemetry.ts_ns = 3 * kSecond;
    (*allowing)->observe(telemetry, allowed);
    EXPECT_TRUE(allowed.empty()) << allowed.size();
    EXPECT_GT((*allowing)->stats().allowlisted, 0u);
}

// YARA: the correlator asks for a scan at a process's first GPU use (or
// first signature hit), once per executable image; the verdict comes back as
// an ExeScan event and is evidence like any other.
TEST_F(CorrelatorTest, ScanRequestedOncePerImageAtFirstGpuUse) {
    make(rule_set(), builtin_rules(), CorrelatorOptions{.request_scans = true});
    feed(1 * kSecond, 300, "render", Exec{"/usr/bin/render", {"render", "-q"}, false, false, 300});
    EXPECT_TRUE(correlator_->take_scan_requests().empty()) << "no GPU, no signature: no scan";
    feed(2 * kSecond, 300, "render",
         GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"});
    auto requests = correlator_->take_scan_requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].pid, 300u);
    EXPECT_EQ(requests[0].exe, "/usr/bin/render");
    EXPECT_EQ(requests[0].reason, "gpu_open");
    feed(3 * kSecond, 300, "render",
         GpuOpen{195, 255, 4, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidiactl"});
    EXPECT_TRUE(correlator_->take_scan_requests().empty()) << "same image: asked already";
    // A new image (the GPU fd survives exec): asked again.
    feed(4 * kSecond, 300, "render2", Exec{"/usr/bin/render2", {"render2"}, false, false, 300});
    requests = correlator_->take_scan_requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].exe, "/usr/bin/render2");
    // A process with a signature hit but no GPU is worth a scan too.
    feed(5 * kSecond, 301, "xmrig",
         Exec{"/opt/xmrig/xmrig", {"xmrig", "--donate-level", "1"}, false, false, 301});
    requests = correlator_->take_scan_requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].reason, "signature");
}

TEST_F(CorrelatorTest, ScanRequestsAreOffByDefault) {
    make();
    start_miner(1 * kSecond, 300);
    EXPECT_TRUE(correlator_->take_scan_requests().empty());
}

TEST_F(CorrelatorTest, YaraVerdictOnAGpuProcessRaisesTheYaraRule) {
    make();
    feed(1 * kSecond, 310, "svc-agent",
         Exec{"/opt/tools/svc-agent", {"svc-agent"}, false, false, 310});
    EXPECT_TRUE(feed(2 * kSecond, 310, "svc-agent",
                     GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"})
                    .empty());
    // A clean verdict raises nothing.
    EXPECT_TRUE(
        feed(3 * kSecond, 310, "svc-agent", ExeScan{"/opt/tools/svc-agent", "aa", 10, {}, {}, ""})
            .empty());
    // So does a failed one, whatever it claims.
    EXPECT_TRUE(feed(3 * kSecond, 310, "svc-agent",
                     ExeScan{"/opt/tools/svc-agent",
                             "",
                             0,
                             {"GG_XMRig_Executable"},
                             {"GG-XMRIG-0011"},
                             "too large"})
                    .empty());
    auto raised = feed(
        4 * kSecond, 310, "svc-agent",
        ExeScan{
            "/opt/tools/svc-agent", "ab12", 10, {"GG_XMRig_Executable"}, {"GG-XMRIG-0011"}, ""});
    ASSERT_EQ(rule_ids(raised), std::vector<std::string>{"GG-CORR-0004"});
    bool yara_evidence = false;
    for (const auto& evidence : raised[0].evidence) {
        if (evidence.kind != "yara") continue;
        yara_evidence = true;
        EXPECT_EQ(evidence.signature_id, "GG-XMRIG-0011");
        EXPECT_NE(evidence.detail.find("GG_XMRig_Executable"), std::string::npos)
            << evidence.detail;
        EXPECT_NE(evidence.detail.find("sha256:ab12"), std::string::npos) << evidence.detail;
    }
    EXPECT_TRUE(yara_evidence);
}

TEST_F(CorrelatorTest, Sha256AllowlistAppliesOnceTheHashIsKnown) {
    const std::string sha = std::string(64, 'c');
    make(rule_set("allowlist:\n  sha256: ['" + sha + "']\n"));
    feed(1 * kSecond, 320, "svc-agent",
         Exec{"/opt/tools/svc-agent", {"svc-agent"}, false, false, 320});
    feed(2 * kSecond, 320, "svc-agent",
         GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"});
    EXPECT_TRUE(
        feed(3 * kSecond, 320, "svc-agent",
             ExeScan{
                 "/opt/tools/svc-agent", sha, 10, {"GG_XMRig_Executable"}, {"GG-XMRIG-0011"}, ""})
            .empty());
    EXPECT_GT(correlator_->stats().allowlisted, 0u);
}

TEST_F(CorrelatorTest, KnownBadHashIsKilledOnSightAndEveryExecIsHashed) {
    const std::string sha = std::string(64, 'd');
    make(rule_set("known_bad:\n  sha256: ['" + sha + "']\n"), builtin_rules(),
         CorrelatorOptions{.request_scans = true});
    // With a known-bad list every exec is worth a hash, GPU or not.
    feed(1 * kSecond, 330, "ls", Exec{"/usr/bin/ls", {"ls"}, false, false, 330});
    auto requests = correlator_->take_scan_requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].reason, "known_bad");
    EXPECT_TRUE(
        feed(2 * kSecond, 330, "ls", ExeScan{"/usr/bin/ls", std::string(64, 'e'), 10, {}, {}, ""})
            .empty());
    feed(3 * kSecond, 331, "updater", Exec{"/tmp/updater", {"updater"}, false, false, 331});
    auto raised = feed(4 * kSecond, 331, "updater", ExeScan{"/tmp/updater", sha, 10, {}, {}, ""});
    ASSERT_EQ(rule_ids(raised), std::vector<std::string>{"GG-CORR-0010"});
    EXPECT_EQ(raised[0].action, "kill_now");
    EXPECT_EQ(raised[0].evidence.back().field, "sha256");
}

}  // namespace
}  // namespace gpuguard::agent
