// Config files read live (AgentDetectTest, agent_detect_fixture.h): a miner
// whose settings live only in a config.json beside it, under an innocuous
// name and with no arguments, is detected from that file, and replaying
// the journal gives the same detection; a training job beside its model's
// config.json is not flagged.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>

#include "gpuguard/state/config_files.h"
#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/run_command.h"
#include "tests/support/time_bound.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::ChildReaper;
using gpuguard::testing::ProgramTree;
using gpuguard::testing::Subprocess;
using gpuguard::testing::time_bound;
namespace fs = std::filesystem;

// XMRig's config.json as its setup writes one (xmrig.com/docs/miner/config),
// with a real-length (95 character) Monero wallet.
constexpr char kXmrigConfig[] = R"({
    "autosave": true,
    "cpu": true,
    "opencl": false,
    "cuda": true,
    "pools": [
        {
            "url": "pool.supportxmr.com:3333",
            "user": "44AFFq5kSiGBoZ4NMDwYtN18obc8AemS33DBLWs3H7otXft3XjrpDtQGv7SqSsaBYBb98uNbr2VBBEt7f2wfn3RVGQBEP3A",
            "pass": "x",
            "tls": false
        }
    ]
}
)";

// A Hugging Face model's config.json, what a training job keeps beside it.
constexpr char kModelConfig[] = R"({
  "architectures": ["LlamaForCausalLM"],
  "hidden_size": 4096,
  "intermediate_size": 11008,
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "torch_dtype": "bfloat16",
  "vocab_size": 32000
}
)";

TEST_F(AgentDetectTest, config_only_miner_on_gpu_is_detected_from_its_config_and_replayed) {
    // The idle helper as "python3" in a directory with the config, started
    // there with no arguments, holding the fake GPU node.
    ProgramTree tree("config");
    const auto place = [&](const fs::path& where, const char* config) {
        fs::create_directories(where);
        fs::copy_file(GPUGUARD_IDLE_PROCESS, where / "python3");
        std::ofstream(where / "config.json") << config;
    };
    const fs::path miner_dir = tree.path / "opt" / "x", train_dir = tree.path / "train";
    place(miner_dir, kXmrigConfig);
    place(train_dir, kModelConfig);
    use_control_socket();
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    const std::vector<std::string> hold{"GG_HOLD=" + node_.string()};
    const pid_t benign = gpuguard::testing::spawn_process((train_dir / "python3").string(),
                                                          {"python3"}, train_dir, hold);
    ASSERT_GT(benign, 0);
    ChildReaper reap_benign(benign);
    // The miner starts once the training job holds the GPU: its GPU use, so
    // its config read, comes first in the agent's one stream and one worker
    // queue, and the miner's detection below shows it was judged.
    const auto holds_node = [&] {
        std::error_code ec;
        for (const auto& fd :
             fs::directory_iterator("/proc/" + std::to_string(benign) + "/fd", ec)) {
            if (fs::read_symlink(fd.path(), ec) == node_) return true;
        }
        return false;
    };
    for (int i = 0; i < 400 && !holds_node(); ++i) std::this_thread::sleep_for(10ms);
    ASSERT_TRUE(holds_node()) << "the training job never opened the GPU node";
    const pid_t miner = gpuguard::testing::spawn_process((miner_dir / "python3").string(),
                                                         {"python3"}, miner_dir, hold);
    ASSERT_GT(miner, 0);
    ChildReaper reap_miner(miner);

    auto detection = wait_for_detection(agent, miner, "GG-CORR-0001", time_bound(10s));
    ASSERT_TRUE(detection) << agent.stderr_text();
    const std::string config_path = (miner_dir / "config.json").string();
    bool url_line = false, wallet_line = false;
    for (const auto& item : (*detection)["gpuguard"]["detection"]["evidence"]) {
        if (item.value("field", "") != "config") continue;
        EXPECT_EQ(item["event_type"], "config_file") << item.dump();
        const std::string detail = item["detail"];
        url_line |= detail == config_path + ":8: \"url\": \"pool.supportxmr.com:3333\",";
        if (detail.starts_with(config_path + ":9: ")) {
            wallet_line = true;
            EXPECT_EQ(detail.find("44AFFq5kSiGBoZ4NMDwYtN18"), std::string::npos)
                << "the wallet is cut in alerts: " << detail;
        }
    }
    EXPECT_TRUE(url_line) << detection->dump();
    EXPECT_TRUE(wallet_line) << detection->dump();

    const auto report = gpuguard::testing::run_command(
        {GPUGUARD_BINARY, "status", "--json", "--socket", (dir_ / "control.sock").string()}, 10s);
    ASSERT_EQ(report.exit_code, 0) << report.stderr_text;
    const auto reads = nlohmann::json::parse(report.stdout_text)["config_files"];
    EXPECT_GE(reads["requested"].get<int>(), 2) << reads.dump() << "both GPU holders asked";
    // Both config.json files (two inodes) were read from disk, the training
    // job's first; only the miner's matched.
    EXPECT_GE(reads["files_read"].get<int>(), 2) << reads.dump();
    EXPECT_GE(reads["reported"].get<int>(), 1) << reads.dump();

    // The training job (its config read first, above) raised nothing at all.
    expect_whole_output(agent, {{"GG-CORR-0001", miner, "critical"}}, {benign, miner});
    for (const auto& record : ledger().of(benign)) {
        ADD_FAILURE() << "the training job was flagged: " << record.dump();
    }
    std::vector<std::string> live;
    for (const auto& line : seen_) {
        if (pid_of(nlohmann::json::parse(line)) == miner) live.push_back(line);
    }

    // The journal's config_file event makes replay judge the same lines.
    const auto replayed = replay_journal();
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    const auto without_clock = [](const std::string& line) {
        static const std::regex wall_clock(R"re("(@timestamp|created)":"[^"]*")re");
        return std::regex_replace(line, wall_clock, "\"$1\":\"<wall clock>\"");
    };
    std::vector<std::string> from_journal;
    std::istringstream lines(replayed.stdout_text);
    for (std::string line; std::getline(lines, line);) {
        const auto record = nlohmann::json::parse(line);
        EXPECT_NE(record["process"]["pid"], benign) << line;
        if (record["process"]["pid"] == miner) from_journal.push_back(without_clock(line));
    }
    for (auto& line : live) line = without_clock(line);
    ASSERT_FALSE(live.empty());
    EXPECT_EQ(from_journal, live);
}

// A process in another root (a container's, here a chroot): its paths,
// relative and absolute, and its symlinks resolve inside that root, never
// in the agent's.
TEST(ConfigFilesInRoot, paths_and_symlinks_resolve_inside_the_processs_root) {
    GG_REQUIRE_PRIVILEGED();
    gpuguard::testing::TempDir root("gg-config-root");
    fs::create_directories(root / "work");
    std::ofstream(root / "work" / "config.json") << "{}";
    std::ofstream(root / "gg-inside.json") << "{\"inside\": true}";
    // Absolute: inside the root it names <root>/gg-inside.json; in the
    // agent's root it names nothing.
    fs::create_symlink("/gg-inside.json", root / "work" / "pools.txt");
    ASSERT_FALSE(fs::exists("/gg-inside.json"));
    const std::string root_path = root.path().string();
    gpuguard::testing::RequestChild child(
        [](char) { return 0; },
        [root_path] {
            if (chroot(root_path.c_str()) != 0 || chdir("/work") != 0) {
                _exit(2);
            }
        });
    ASSERT_GT(child.pid(), 0);
    ASSERT_EQ(child.ask('x'), 0) << "the child is up in its root";
    const auto pid = static_cast<uint32_t>(child.pid());
    auto context = gpuguard::agent::read_config_context(pid);
    ASSERT_TRUE(context) << context.error().message;
    EXPECT_EQ(context->cwd, "/work") << "the working directory as the process sees it";

    auto relative =
        gpuguard::agent::open_config_file(pid, {"config.json", "default"}, context->cwd);
    ASSERT_TRUE(relative) << relative.error().message;
    EXPECT_EQ(relative->path(), "/work/config.json");
    auto linked = gpuguard::agent::open_config_file(pid, {"pools.txt", "default"}, context->cwd);
    ASSERT_TRUE(linked) << linked.error().message;
    bool truncated = false;
    auto text = linked->read(1024, truncated);
    ASSERT_TRUE(text);
    EXPECT_EQ(*text, "{\"inside\": true}");
    // ".." cannot climb out of the root either.
    auto climbed = gpuguard::agent::open_config_file(
        pid, {"../../../../gg-inside.json", "argument"}, context->cwd);
    ASSERT_TRUE(climbed) << climbed.error().message;
    EXPECT_EQ(climbed->version(), linked->version());
}

}  // namespace
