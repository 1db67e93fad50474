// Config files in judgement: which lines of a file the config signatures
// select, how they show in alerts, when the correlator asks for a
// process's files and what their lines raise, and the worker end to end on
// real child processes (no root needed).
#include "gpuguard/detect/config_scanner.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "gpuguard/detect/correlator.h"
#include "gpuguard/rules/correlation.h"
#include "tests/agent/detect/correlator_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

namespace fs = std::filesystem;
using correlator_testing::kSecond;
using correlator_testing::rule_set;

const std::string kWallet =
    "44AFFq5kSiGBoZ4NMDwYtN18obc8AemS33DBLWs3H7otXft3XjrpDtQGv7SqSsaBYBb98uNbr2VBBEt7f2wfn3RVGQBEP3"
    "A";

// An XMRig config.json as its own setup writes one (docs: xmrig.com/docs/miner/config).
std::string xmrig_config() {
    return "{\n"                                                   // 1
           "    \"autosave\": true,\n"                             // 2
           "    \"randomx\": {\n"                                  // 3
           "        \"init\": -1,\n"                               // 4
           "        \"1gb-pages\": false\n"                        // 5
           "    },\n"                                              // 6
           "    \"pools\": [\n"                                    // 7
           "        {\n"                                           // 8
           "            \"url\": \"pool.supportxmr.com:3333\",\n"  // 9
           "            \"user\": \"" +
           kWallet +
           "\",\n"                          // 10
           "            \"pass\": \"x\"\n"  // 11
           "        }\n"                    // 12
           "    ]\n"                        // 13
           "}\n";
}

// A Hugging Face model config.json: what a training job keeps beside it.
const char* kTrainingConfig = R"({
  "architectures": ["LlamaForCausalLM"],
  "hidden_size": 4096,
  "num_attention_heads": 32,
  "torch_dtype": "bfloat16",
  "vocab_size": 32000
}
)";

rules::RuleScanner scanner() {
    auto made = rule_set()->scanner();
    EXPECT_TRUE(made);
    return std::move(*made);
}

TEST(ConfigLines, PoolAndWalletLinesAndAMultiLineSectionAreSelected) {
    auto scan = scanner();
    const auto lines = select_config_lines(scan, xmrig_config());
    std::vector<uint32_t> numbers;
    for (const auto& line : lines) numbers.push_back(line.line);
    // Line 3 starts the randomx section that matches only across lines 3-5.
    EXPECT_EQ(numbers, (std::vector<uint32_t>{3, 9, 10}));
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[0].text,
              "    \"randomx\": {\n        \"init\": -1,\n        \"1gb-pages\": false");
    EXPECT_EQ(lines[1].text, "            \"url\": \"pool.supportxmr.com:3333\",");
    // Every recorded text matches by itself: what the correlator matches again.
    for (const auto& line : lines) {
        EXPECT_FALSE(scan.match(signatures::Field::kConfig, line.text).empty()) << line.text;
    }
}

TEST(ConfigLines, AMinifiedConfigGivesPiecesWithinTheLimit) {
    auto scan = scanner();
    std::string text = "{\"pools\":[{\"url\":\"pool.supportxmr.com:3333\",\"user\":\"" + kWallet +
                       "\"}],\"padding\":\"" + std::string(3000, 'p') + "\"}";
    const auto lines = select_config_lines(scan, text, ConfigLineLimits{16, 256});
    ASSERT_FALSE(lines.empty());
    for (const auto& line : lines) {
        EXPECT_EQ(line.line, 1u);
        EXPECT_LE(line.text.size(), 256u);
        EXPECT_FALSE(scan.match(signatures::Field::kConfig, line.text).empty()) << line.text;
    }
}

TEST(ConfigLines, ATrainingConfigSelectsNothing) {
    auto scan = scanner();
    EXPECT_TRUE(select_config_lines(scan, kTrainingConfig).empty());
    EXPECT_TRUE(select_config_lines(scan, "").empty());
}

TEST(ConfigLines, WalletsAreCutForAlerts) {
    EXPECT_EQ(redact_config_line("\"user\": \"" + kWallet + "\","),
              "\"user\": \"44AFFq5k\u2026\",");
    EXPECT_EQ(redact_config_line("wallet = " + kWallet + ".rig1"), "wallet = 44AFFq5k\u2026.rig1");
    EXPECT_EQ(redact_config_line("pool1 = xmr-eu1.nanopool.org:14433"),
              "pool1 = xmr-eu1.nanopool.org:14433");
    EXPECT_EQ(redact_config_line("a\nb"), "a b");
    EXPECT_EQ(redact_config_line("  \"randomx\": {\n      \"init\": -1,\r\n  }"),
              "\"randomx\": { \"init\": -1, }");
    EXPECT_EQ(redact_config_line("    \"url\": \"p:1\",  "), "\"url\": \"p:1\",");
}

class ConfigCorrelationTest : public ::testing::Test {
  protected:
    void SetUp() override {
        ProcessTableOptions options;
        options.read_host = false;
        table_ = std::make_unique<ProcessTable>(options, [](uint32_t, uint32_t) { return true; });
        auto rules = rules::builtin_correlation_rules();
        ASSERT_TRUE(rules);
        auto created = Correlator::create(*rules, rule_set(), *table_,
                                          CorrelatorOptions{.request_configs = true});
        ASSERT_TRUE(created) << created.error().message;
        correlator_ = std::move(*created);
    }

    std::vector<Detection> feed(uint64_t ts, uint32_t pid, EventData data) {
        Event event;
        event.ts_ns = ts;
        event.task = TaskInfo{pid, pid, 1, 1000, 1000, 1, "python3"};
        event.data = std::move(data);
        table_->apply(event);
        std::vector<Detection> out;
        correlator_->observe(event, out);
        return out;
    }
    std::vector<Detection> open_gpu(uint64_t ts, uint32_t pid) {
        return feed(ts, pid,
                    GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"});
    }

    std::unique_ptr<ProcessTable> table_;
    std::unique_ptr<Correlator> correlator_;
};

TEST_F(ConfigCorrelationTest, ConfigLinesOfAGpuHolderRaiseTheMinerRuleNamingFileAndLine) {
    feed(1 * kSecond, 400, Exec{"/opt/x/python3", {"python3"}, false, false, 400});
    EXPECT_TRUE(correlator_->take_config_requests().empty()) << "nothing suspect yet";
    EXPECT_TRUE(open_gpu(2 * kSecond, 400).empty());
    auto requests = correlator_->take_config_requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].pid, 400u);
    EXPECT_EQ(requests[0].reason, "gpu_open");

    auto scan = scanner();
    ConfigFile file{"/opt/x/config.json",
                    "default",
                    400,
                    "ab",
                    false,
                    select_config_lines(scan, xmrig_config())};
    const auto raised = feed(3 * kSecond, 400, file);
    ASSERT_EQ(raised.size(), 1u);
    EXPECT_EQ(raised[0].rule_id, "GG-CORR-0001");
    bool url = false, wallet_cut = false;
    for (const auto& evidence : raised[0].evidence) {
        if (evidence.field != "config") continue;
        EXPECT_EQ(evidence.event_type, "config_file");
        url |= evidence.detail ==
               "/opt/x/config.json:9: \"url\": "
               "\"pool.supportxmr.com:3333\",";
        wallet_cut |= evidence.detail.starts_with("/opt/x/config.json:10:") &&
                      evidence.detail.find("44AFFq5k\u2026") != std::string::npos &&
                      evidence.detail.find(kWallet) == std::string::npos;
    }
    EXPECT_TRUE(url);
    EXPECT_TRUE(wallet_cut);

    // The same lines again (a second reader of the file) add nothing.
    EXPECT_TRUE(feed(4 * kSecond, 400, file).empty());
    // Asked once per image.
    open_gpu(5 * kSecond, 400);
    EXPECT_TRUE(correlator_->take_config_requests().empty());
}

TEST_F(ConfigCorrelationTest, BenignConfigLinesAndNoGpuRaiseNothing) {
    feed(1 * kSecond, 401, Exec{"/opt/train/python3", {"python3", "train.py"}, false, false, 401});
    open_gpu(2 * kSecond, 401);
    // Lines no config signature matches (a hand-made event) raise nothing.
    ConfigFile benign{"/opt/train/config.json",
                      "default",
                      10,
                      "cd",
                      false,
                      {ConfigLine{3, "  \"hidden_size\": 4096,"}}};
    EXPECT_TRUE(feed(3 * kSecond, 401, benign).empty());

    // A miner's lines on a process without a GPU: not for GG-CORR-0001.
    feed(4 * kSecond, 402, Exec{"/opt/y/svc", {"svc"}, false, false, 402});
    auto scan = scanner();
    ConfigFile miner{"/opt/y/config.json",
                     "default",
                     400,
                     "ab",
                     false,
                     select_config_lines(scan, xmrig_config())};
    for (const auto& detection : feed(5 * kSecond, 402, miner)) {
        EXPECT_NE(detection.rule_id, "GG-CORR-0001");
    }
}

TEST_F(ConfigCorrelationTest, ATemporaryOrDeletedExecutableIsAskedAtExec) {
    // Temporary and deleted executables are signatures of their own
    // (GG-GPUABUSE-0001..3) ...
    feed(1 * kSecond, 403, Exec{"/tmp/.x/helper", {"helper"}, false, false, 403});
    auto requests = correlator_->take_config_requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].reason, "signature");
    // Its first GPU use asks once more (a miner may have written its file
    // since), later ones do not.
    open_gpu(2 * kSecond, 403);
    requests = correlator_->take_config_requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].reason, "gpu_open");
    open_gpu(2 * kSecond + 1, 403);
    EXPECT_TRUE(correlator_->take_config_requests().empty());
    // ... and a location still when an admin disabled them.
    auto builtin = rules::compile_builtin_pack();
    ASSERT_TRUE(builtin);
    auto quiet = rules::RuleSet::build(
        *builtin, {{"site.yaml",
                    "signatures:\n  disable: [GG-GPUABUSE-0001, GG-GPUABUSE-0002, "
                    "GG-GPUABUSE-0003]\n"}});
    ASSERT_TRUE(quiet) << quiet.error().message;
    ASSERT_TRUE(
        correlator_->set_rule_set(std::make_shared<const rules::RuleSet>(std::move(*quiet))));
    feed(2 * kSecond, 404, Exec{"/opt/app/helper (deleted)", {"helper"}, false, false, 404});
    requests = correlator_->take_config_requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].reason, "exe_location");
    // A new image asks again.
    feed(3 * kSecond, 403, Exec{"/tmp/.x/helper2", {"helper2"}, false, false, 403});
    EXPECT_EQ(correlator_->take_config_requests().size(), 1u);
}

// The worker on real processes: a copy of the idle helper started beside
// an XMRig config.json, twice.
TEST(ConfigScanWorker, ReadsAProcesssConfigOnceAndReportsItsMatchedLines) {
    testing::TempDir dir("gg-config-worker");
    fs::create_directories(dir / "bin");
    fs::copy_file(GPUGUARD_IDLE_PROCESS, dir / "bin" / "python3");
    std::ofstream(dir / "bin" / "config.json") << xmrig_config();
    fs::create_directories(dir / "train");
    std::ofstream(dir / "train" / "config.json") << kTrainingConfig;

    std::mutex mutex;
    std::condition_variable arrived;
    std::vector<Event> events;
    auto worker = ConfigScanWorker::create(rule_set(), [&](Event event) {
        std::lock_guard lock(mutex);
        events.push_back(std::move(event));
        arrived.notify_all();
    });
    ASSERT_TRUE(worker) << worker.error().message;
    const auto wait_for = [&](size_t count) {
        std::unique_lock lock(mutex);
        return arrived.wait_for(lock, std::chrono::seconds(10),
                                [&] { return events.size() >= count; });
    };
    const auto run = [&](const fs::path& cwd) {
        const pid_t pid = testing::spawn_process(dir / "bin" / "python3", {"python3"}, cwd);
        EXPECT_GT(pid, 0) << std::strerror(errno);
        return pid;
    };

    const pid_t first = run(dir / "train");
    testing::ChildReaper reap_first(first);
    ASSERT_TRUE((*worker)->submit(TaskInfo{static_cast<uint32_t>(first),
                                           static_cast<uint32_t>(first), 1, 0, 0, 0, "python3"}));
    ASSERT_TRUE(wait_for(1));
    {
        std::lock_guard lock(mutex);
        const auto& file = std::get<ConfigFile>(events[0].data);
        EXPECT_EQ(events[0].task.pid, static_cast<uint32_t>(first));
        EXPECT_EQ(file.path, (dir / "bin" / "config.json").string())
            << "the training config.json in the cwd matches nothing";
        EXPECT_EQ(file.reason, "default");
        EXPECT_EQ(file.size, xmrig_config().size());
        EXPECT_EQ(file.sha256.size(), 64u);
        EXPECT_EQ(file.lines.size(), 3u);
    }
    const pid_t second = run(dir / "train");
    testing::ChildReaper reap_second(second);
    ASSERT_TRUE((*worker)->submit(TaskInfo{static_cast<uint32_t>(second),
                                           static_cast<uint32_t>(second), 1, 0, 0, 0, "python3"}));
    ASSERT_TRUE(wait_for(2));
    {
        std::lock_guard lock(mutex);
        EXPECT_EQ(std::get<ConfigFile>(events[1].data), std::get<ConfigFile>(events[0].data));
    }
    // The counters move just after the delivery.
    auto stats = (*worker)->stats();
    for (int i = 0; i < 1000 && stats.reported < 2; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        stats = (*worker)->stats();
    }
    EXPECT_EQ(stats.requested, 2u);
    EXPECT_EQ(stats.reported, 2u);
    EXPECT_EQ(stats.files_read, 2u) << "each config.json read once";
    EXPECT_EQ(stats.cache_hits, 2u) << "the second process's both from the cache";
}

// A configuration file the command line names that root cannot read is
// reported with its error and no lines (`unreadable`); the same refusal
// for a default candidate in the working directory is not (an NFS home
// with root_squash refuses root there for nothing).
TEST(ConfigScanWorker, ANamedFileRootCannotReadIsReportedADefaultOneIsNot) {
    testing::TempDir dir("gg-config-refused");
    fs::create_directories(dir / "bin");
    fs::create_directories(dir / "mnt");
    fs::copy_file(GPUGUARD_IDLE_PROCESS, dir / "bin" / "updater");
    const fs::path named = dir / "mnt" / "notifier.json";
    std::ofstream(named) << xmrig_config();
    std::ofstream(dir / "mnt" / "config.json") << xmrig_config();
    fs::permissions(named, fs::perms::none);
    fs::permissions(dir / "mnt" / "config.json", fs::perms::none);
    const pid_t pid = testing::spawn_process(dir / "bin" / "updater",
                                             {"updater", "--config", named.string()}, dir / "mnt");
    ASSERT_GT(pid, 0) << std::strerror(errno);
    testing::ChildReaper reap(pid);

    std::mutex mutex;
    std::condition_variable arrived;
    std::vector<Event> events;
    ConfigScanStats stats;
    std::thread without_dac([&] {
        ASSERT_TRUE(testing::drop_dac_capabilities_in_this_thread()) << std::strerror(errno);
        auto worker = ConfigScanWorker::create(rule_set(), [&](Event event) {
            std::lock_guard lock(mutex);
            events.push_back(std::move(event));
            arrived.notify_all();
        });
        ASSERT_TRUE(worker) << worker.error().message;
        ASSERT_TRUE((*worker)->submit(TaskInfo{static_cast<uint32_t>(pid),
                                               static_cast<uint32_t>(pid), 1, 0, 0, 0, "updater"}));
        for (int i = 0; i < 2000 && (*worker)->stats().refused < 2; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        stats = (*worker)->stats();
    });
    without_dac.join();
    EXPECT_EQ(stats.refused, 2u) << "both files refused";
    std::lock_guard lock(mutex);
    ASSERT_EQ(events.size(), 1u) << "only the named one reported";
    const auto& file = std::get<ConfigFile>(events[0].data);
    EXPECT_EQ(file.path, named.string());
    EXPECT_EQ(file.reason, "argument");
    EXPECT_TRUE(file.lines.empty());
    EXPECT_TRUE(file.sha256.empty());
    EXPECT_NE(file.error.find("Permission denied"), std::string::npos) << file.error;
    EXPECT_NE(file.error.find(named.string()), std::string::npos) << file.error;
}

}  // namespace
}  // namespace gpuguard::agent
