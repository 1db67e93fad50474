// Issue-26 semantics of the correlator: known miners judged without a GPU,
// supporting signals that raise a rule's confidence and severity, the
// opaque-peer condition, temporary locations and their legitimate
// look-alikes, scans of every executable.
#include <tuple>

#include <gtest/gtest.h>

#include "gpuguard/detect/correlator.h"
#include "gpuguard/rules/correlation.h"
#include "tests/agent/detect/correlator_fixture.h"

namespace gpuguard::agent {
namespace {

using namespace correlator_testing;

const Detection* find_rule(const std::vector<Detection>& detections, const std::string& id) {
    for (const auto& detection : detections) {
        if (detection.rule_id == id) return &detection;
    }
    return nullptr;
}

GpuOpen nvidia0() {
    return GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"};
}

NetPayload first_send(const std::string& address, uint16_t port, std::string data) {
    NetPayload payload;
    payload.fd = 7;
    payload.direction = NetPayload::Direction::kOut;
    payload.syscall = "write";
    payload.length = static_cast<uint32_t>(data.size());
    payload.remote_address = address;
    payload.remote_port = port;
    payload.data = std::move(data);
    return payload;
}

Connect connect_to(const std::string& address, uint16_t port, const std::string& domain = "") {
    Connect connect;
    connect.fd = 7;
    connect.result = -115;
    connect.address = address;
    connect.port = port;
    connect.gpu_holder = true;
    connect.domain = domain;
    return connect;
}

TEST_F(CorrelatorTest, AKnownMinerWithoutAGpuIsAnErrorAndCriticalFromATempDir) {
    make();
    auto plain = feed(1 * kSecond, 400, "cpuminer",
                      Exec{"/usr/local/bin/cpuminer", {"cpuminer"}, false, false, 400});
    const Detection* found = find_rule(plain, "GG-CORR-0012");
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->severity, Severity::kError);
    const double plain_confidence = found->confidence;

    auto dropped = feed(2 * kSecond, 401, "cpuminer",
                        Exec{"/tmp/.x/cpuminer", {"cpuminer"}, false, false, 401});
    found = find_rule(dropped, "GG-CORR-0012");
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->severity, Severity::kCritical) << "a temporary location supports it";
    EXPECT_GT(found->confidence, plain_confidence);
    bool names_the_signal = false;
    for (const auto& evidence : found->evidence) {
        names_the_signal |= evidence.detail.starts_with("temporary or fileless location: ");
    }
    EXPECT_TRUE(names_the_signal);
}

TEST_F(CorrelatorTest, ToolsThatOnlyMentionAPoolAreNotMiners) {
    make();
    EXPECT_EQ(find_rule(feed(1 * kSecond, 402, "grep",
                             Exec{"/usr/bin/grep",
                                  {"grep", "-r", "stratum+tcp://pool.minexmr.com:4444", "/var/log"},
                                  false,
                                  false,
                                  402}),
                        "GG-CORR-0012"),
              nullptr);
    EXPECT_TRUE(
        feed(2 * kSecond, 403, "python3",
             Exec{"/usr/bin/python3", {"python3", "train.py", "--epochs", "3"}, false, false, 403})
            .empty());
}

TEST_F(CorrelatorTest, ATemporaryLocationAloneIsANoticeAndAnErrorWithAnotherSignal) {
    make();
    feed(1 * kSecond, 410, "runner", Exec{"/tmp/build-42/runner", {"runner"}, false, false, 410});
    auto alone = feed(2 * kSecond, 410, "runner", nvidia0());
    const Detection* found = find_rule(alone, "GG-CORR-0005");
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->severity, Severity::kNotice);

    // A connection nothing vouches for, TLS from its first byte: now an error.
    EXPECT_TRUE(feed(3 * kSecond, 410, "runner", connect_to("203.0.113.7", 8443)).empty());
    auto supported = feed(4 * kSecond, 410, "runner",
                          first_send("203.0.113.7", 8443, std::string("\x16\x03\x01\x02\x00", 5)));
    found = find_rule(supported, "GG-CORR-0005");
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->severity, Severity::kError);
    EXPECT_EQ(found->update, 1u);
}

TEST_F(CorrelatorTest, APeerANameVouchesForOrThatSpeaksHttpIsNotOpaque) {
    make();
    feed(1 * kSecond, 411, "runner", Exec{"/tmp/build-43/runner", {"runner"}, false, false, 411});
    feed(2 * kSecond, 411, "runner", nvidia0());
    feed(3 * kSecond, 411, "runner", connect_to("198.51.100.4", 443, "huggingface.co"));
    EXPECT_TRUE(feed(4 * kSecond, 411, "runner",
                     first_send("198.51.100.4", 443, std::string("\x16\x03\x01\x02\x00", 5)))
                    .empty())
        << "named by DNS";
    feed(5 * kSecond, 411, "runner", connect_to("198.51.100.9", 8080));
    EXPECT_TRUE(feed(6 * kSecond, 411, "runner",
                     first_send("198.51.100.9", 8080, "GET /v1/models HTTP/1.1"))
                    .empty())
        << "plain HTTP is a protocol gpuguard recognises";
}

TEST_F(CorrelatorTest, LegitimateLookAlikesOfTemporaryExecutablesAreNotFlagged) {
    make();
    // A deleted executable is an upgrade where the agent found a package
    // owning its path (exe_package), not because of its directory.
    const std::tuple<const char*, const char*, const char*> look_alikes[] = {
        {"blender", "/tmp/.mount_BlendeAbC123/usr/bin/blender", ""},
        {"ollama_llama_se", "/tmp/ollama1234567/runners/cuda_v12/ollama_llama_server", ""},
        {"worker", "/tmp/_MEI8812/worker", ""},
        {"nvidia-persiste", "/usr/bin/nvidia-persistenced (deleted)", "dpkg:nvidia-persistenced"},
    };
    uint32_t pid = 420;
    for (const auto& [comm, exe, package] : look_alikes) {
        ProcessSnapshot snapshot;
        snapshot.exe = exe;
        snapshot.exe_package = package;
        snapshot.argv = {comm};
        feed(1 * kSecond, pid, comm, snapshot);
        EXPECT_TRUE(feed(2 * kSecond, pid, comm, nvidia0()).empty()) << exe;
        ++pid;
    }
    // Deleted under /usr with no package owning the path, or under
    // /usr/local whatever a database says: a deleted executable (notice).
    for (const auto& [exe, package] :
         {std::pair{"/usr/bin/gpu-helper (deleted)", ""},
          std::pair{"/usr/local/bin/gpu-helper (deleted)", "dpkg:gpu-helper"}}) {
        ProcessSnapshot snapshot;
        snapshot.exe = exe;
        snapshot.exe_package = package;
        snapshot.argv = {"gpu-helper"};
        feed(1 * kSecond, pid, "gpu-helper", snapshot);
        const auto raised = feed(2 * kSecond, pid, "gpu-helper", nvidia0());
        const Detection* deleted = find_rule(raised, "GG-CORR-0005");
        ASSERT_NE(deleted, nullptr) << exe;
        EXPECT_EQ(deleted->severity, Severity::kNotice) << exe;
        ++pid;
    }
    // The same names elsewhere in /tmp are still temporary.
    feed(1 * kSecond, pid, "worker", Exec{"/tmp/MEI8812/worker", {"worker"}, false, false, pid});
    EXPECT_NE(find_rule(feed(2 * kSecond, pid, "worker", nvidia0()), "GG-CORR-0005"), nullptr);
}

TEST_F(CorrelatorTest, EveryExecIsScannedWhenAsked) {
    make(rule_set(), builtin_rules(),
         CorrelatorOptions{.request_scans = true, .scan_every_exec = true});
    feed(1 * kSecond, 430, "svc", Exec{"/usr/local/bin/svc", {"svc"}, false, false, 430});
    auto requests = correlator_->take_scan_requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].reason, "exec");
    // A YARA verdict on a process without a GPU is a known miner without a GPU.
    auto raised =
        feed(2 * kSecond, 430, "svc",
             ExeScan{"/usr/local/bin/svc", "ab", 10, {"XMRig_Executable"}, {"GG-XMRIG-0011"}, ""});
    EXPECT_NE(find_rule(raised, "GG-CORR-0012"), nullptr);
}

// A preloaded library nothing vouches for, old and only its owner's: a
// notice, and a YARA scan of it asked for; the scan's hit makes it a
// miner's library, and the open detection rises to error.
TEST_F(CorrelatorTest, APreloadedLibraryIsScannedAndAYaraHitRaisesItsInjection) {
    make(rule_set(), builtin_rules(), CorrelatorOptions{.request_scans = true});
    feed(1 * kSecond, 440, "python3", Exec{"/usr/bin/python3", {"python3"}, false, false, 440});
    ProcessEnv env;
    env.ld_preload = "/srv/tools/libprof.so";
    env.loader_paths = {LoaderPath{"LD_PRELOAD", "/srv/tools/libprof.so", "/srv/tools/libprof.so",
                                   "", 90 * 86400, false}};
    feed(2 * kSecond, 440, "python3", env);
    const auto opened =
        feed(2 * kSecond + 1, 440, "python3",
             GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"});
    const Detection* injected = find_rule(opened, "GG-CORR-0016");
    ASSERT_NE(injected, nullptr);
    EXPECT_EQ(injected->severity, Severity::kNotice);
    const auto requests = correlator_->take_scan_requests();
    const auto library = std::find_if(requests.begin(), requests.end(),
                                      [](const ScanRequest& r) { return r.reason == "library"; });
    ASSERT_NE(library, requests.end());
    EXPECT_EQ(library->library, "/srv/tools/libprof.so");

    const auto raised = feed(3 * kSecond, 440, "python3",
                             ExeScan{"/srv/tools/libprof.so",
                                     "ab",
                                     4096,
                                     {"XMRig_Executable"},
                                     {"GG-XMRIG-0011"},
                                     "",
                                     "/srv/tools/libprof.so"});
    const Detection* error = find_rule(raised, "GG-CORR-0016");
    ASSERT_NE(error, nullptr) << "the open detection is updated";
    EXPECT_EQ(error->severity, Severity::kError);
    bool named = false;
    for (const auto& item : error->evidence) {
        named |= item.detail.find("named like a miner") != std::string::npos &&
                 item.detail.find("YARA: XMRig_Executable") != std::string::npos;
    }
    EXPECT_TRUE(named);
    // The library's scan is not the executable's: no sha256 of it is kept.
    EXPECT_TRUE(find_rule(raised, "GG-CORR-0010") == nullptr);
}

// What the agent could not read (unreadable): an executable root was
// refused, one over the YARA size limit, a configuration file the command
// line names; not a process gone before its scan, nor a library's scan.
// A new image starts clean; busy processes get their files asked for.
TEST_F(CorrelatorTest, WhatTheAgentCouldNotReadIsEvidenceAndAGoneProcessIsNot) {
    auto rules = rules::parse_correlation_rules(R"(rules:
  - id: TEST-UNREAD
    name: unreadable
    severity: notice
    window: 1s
    when:
      unreadable: [executable, config]
)",
                                                "test.yaml");
    ASSERT_TRUE(rules) << rules.error().message;
    make(rule_set(), *rules, CorrelatorOptions{.request_configs = true});
    feed(1 * kSecond, 450, "svc", Exec{"/mnt/f/svc", {"svc"}, false, false, 450});
    ExeScan gone{"/mnt/f/svc", "", 0, {}, {}, "open /proc/450/exe: No such file or directory"};
    gone.error_kind = "gone";
    EXPECT_TRUE(feed(2 * kSecond, 450, "svc", gone).empty());
    ExeScan old_record = gone;  // an older journal: no kind
    old_record.error_kind.clear();
    old_record.error = "open /proc/450/exe: Permission denied";
    EXPECT_TRUE(feed(3 * kSecond, 450, "svc", old_record).empty());
    ExeScan library{"/mnt/f/svc", "", 0, {}, {}, "open: Permission denied", "/mnt/f/lib.so"};
    library.error_kind = "permission";
    EXPECT_TRUE(feed(4 * kSecond, 450, "svc", library).empty());

    ExeScan refused{"/mnt/f/svc", "", 0, {}, {}, "open /proc/450/exe: Permission denied"};
    refused.error_kind = "permission";
    // The one evidence item of the one detection `raised` holds.
    const auto only_evidence = [](const std::vector<Detection>& raised) {
        EXPECT_EQ(raised.size(), 1u);
        EXPECT_EQ(raised.empty() ? 0u : raised[0].evidence.size(), 1u);
        return raised.empty() || raised[0].evidence.empty() ? Evidence{} : raised[0].evidence[0];
    };
    Evidence item = only_evidence(feed(5 * kSecond, 450, "svc", refused));
    EXPECT_EQ(item.event_type, "exe_scan");
    EXPECT_EQ(item.detail,
              "executable /mnt/f/svc not scanned (permission): open /proc/450/exe: Permission "
              "denied");

    // A new image: what was not read of the old one goes; its config file.
    feed(10 * kSecond, 450, "svc2", Exec{"/usr/bin/svc2", {"svc2"}, false, false, 450});
    EXPECT_TRUE(feed(11 * kSecond, 450, "svc2", CpuUsage{2'000'000'000, 1'000'000'000, 4}).empty());
    const auto requests = correlator_->take_config_requests();
    ASSERT_EQ(requests.size(), 1u) << "a busy process's files are asked for";
    EXPECT_EQ(requests[0].reason, "busy_cpu");
    ConfigFile unread{"/mnt/f/c.json", "argument", 0, "", false, {}};
    unread.error = "/mnt/f/c.json: Permission denied";
    item = only_evidence(feed(12 * kSecond, 450, "svc2", unread));
    EXPECT_EQ(item.event_type, "config_file");
    EXPECT_EQ(item.detail,
              "configuration file /mnt/f/c.json (argument) not read: /mnt/f/c.json: Permission "
              "denied");
}

// A supporting signal of the behaviour rules (GG-CORR-0013, 0023: the
// scenarios quiet_cpu_executable_on_a_fuse_mount_root_cannot_read and
// benign_cpu_llama_server_binary_over_the_yara_limit), never a detection
// by itself: a busy process over the YARA size limit raises nothing.
TEST_F(CorrelatorTest, AnUnreadableExecutableAloneRaisesNothing) {
    make();
    feed(1 * kSecond, 451, "game", Exec{"/opt/game/bin/game", {"game"}, false, false, 451});
    ExeScan huge{"/opt/game/bin/game", "", 0, {}, {}, "too large"};
    huge.error_kind = "size_limit";
    EXPECT_TRUE(feed(2 * kSecond, 451, "game", huge).empty());
    EXPECT_TRUE(feed(3 * kSecond, 451, "game", CpuUsage{4'000'000'000, 1'000'000'000, 8}).empty());
}

// GG-CORR-0026 judges each GPU: load no known holder explains is the
// GPU's detection (pid 0, naming the GPU), one per GPU per window; a GPU
// whose holder's readings explain its load raises nothing, and no process
// is judged by the rule.
TEST_F(CorrelatorTest, LoadNoKnownHolderExplainsIsTheGpusOwnDetection) {
    make();
    feed(1 * kSecond, 460, "python3", Exec{"/usr/bin/python3", {"python3"}, false, false, 460});
    feed(2 * kSecond, 460, "python3",
         GpuOpen{195, 1, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia1"});
    const auto telemetry = [](uint32_t index, std::vector<ProcessGpuUsage> processes) {
        Telemetry sample;
        sample.gpu_index = index;
        sample.vendor = "nvidia";
        sample.devices = {"195:" + std::to_string(index), "195:255"};
        sample.utilization_percent = 96.0;
        sample.processes = std::move(processes);
        return sample;
    };
    std::vector<Detection> raised;
    for (uint64_t ts_s = 100; ts_s <= 300; ts_s += 10) {
        for (auto& detection : feed(ts_s * kSecond, 0, "", telemetry(0, {}))) {
            raised.push_back(std::move(detection));
        }
        for (auto& detection :
             feed(ts_s * kSecond, 0, "", telemetry(1, {{460, 1ull << 30, 94.0}}))) {
            raised.push_back(std::move(detection));
        }
    }
    ASSERT_EQ(rule_ids(raised), std::vector<std::string>{"GG-CORR-0026"});
    const Detection& gpu = raised[0];
    EXPECT_EQ(gpu.process.pid, 0u);
    EXPECT_EQ(gpu.first_seen_ns, 280 * kSecond) << "3 minutes of samples after the first";
    EXPECT_EQ(gpu.severity, Severity::kWarning);
    EXPECT_EQ(gpu.action, "alert");
    ASSERT_EQ(gpu.gpus.size(), 1u);
    EXPECT_EQ(gpu.gpus[0].minor, 0u);
    EXPECT_EQ(gpu.gpus[0].index, 0);
    ASSERT_EQ(gpu.evidence.size(), 1u);
    EXPECT_NE(gpu.evidence[0].detail.find("GPU 0 (nvidia, 195:0): utilisation p20 96%"),
              std::string::npos)
        << gpu.evidence[0].detail;

    // GPU 1's holder stops explaining it: a detection of its own.
    std::vector<Detection> second;
    for (uint64_t ts_s = 310; ts_s <= 520; ts_s += 10) {
        for (auto& detection :
             feed(ts_s * kSecond, 0, "", telemetry(1, {{460, 1ull << 30, 5.0}}))) {
            second.push_back(std::move(detection));
        }
    }
    ASSERT_EQ(rule_ids(second), std::vector<std::string>{"GG-CORR-0026"});
    EXPECT_EQ(second[0].gpus[0].minor, 1u);
    EXPECT_NE(second[0].id, gpu.id);
    EXPECT_NE(second[0].evidence[0].detail.find("(now: 460 (python3) 5%)"), std::string::npos)
        << second[0].evidence[0].detail;
}

}  // namespace
}  // namespace gpuguard::agent
