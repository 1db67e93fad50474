// The README's tour is today's output (issue 42): its console blocks are
// rerun with today's binary and the lines that carry counts and names are
// compared with the README, so it cannot drift again. ReadmeTour needs no
// privilege (replay, the pack's and corpus's counts); ReadmeTourLive starts
// the agent on a fake GPU node as the tour's steps 4 and 5 do and compares
// its start line, `gpuguard status` and the miner's detections.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "gpuguard/common/unique_fd.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/signatures/signatures.h"
#include "tests/support/agent_config.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using gpuguard::testing::file_text;
using gpuguard::testing::run_command;

const std::string kReadme = GPUGUARD_SOURCE_DIR "/README.md";

// The README's ```console blocks, each as its lines.
std::vector<std::vector<std::string>> console_blocks() {
    std::vector<std::vector<std::string>> blocks;
    std::istringstream in(file_text(kReadme));
    bool inside = false;
    for (std::string line; std::getline(in, line);) {
        if (!inside && line == "```console") {
            inside = true;
            blocks.emplace_back();
        } else if (inside && line == "```") {
            inside = false;
        } else if (inside) {
            blocks.back().push_back(line);
        }
    }
    return blocks;
}

// The block whose first line is the command starting with `command`.
std::vector<std::string> block_of(const std::string& command) {
    for (const auto& block : console_blocks()) {
        if (!block.empty() && block[0].starts_with("# " + command)) return block;
    }
    ADD_FAILURE() << "README.md has no console block running '" << command << "'";
    return {};
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// Every number the README writes before `suffix` ("165 built-in miner"),
// at least one.
std::vector<unsigned long> numbers_before(const std::string& suffix) {
    const std::string readme = file_text(kReadme);
    const std::regex number("([0-9]+)" + suffix);
    std::vector<unsigned long> found;
    for (std::sregex_iterator it(readme.begin(), readme.end(), number), end; it != end; ++it) {
        found.push_back(std::stoul((*it)[1]));
    }
    EXPECT_FALSE(found.empty()) << "README.md says nothing like 'N" << suffix << "'";
    return found;
}

size_t builtin_signature_count() {
    auto pack = gpuguard::signatures::load_builtin_pack();
    EXPECT_TRUE(pack) << pack.error().message;
    return pack ? pack->signatures.size() : 0;
}

size_t builtin_correlation_rule_count() {
    auto rules = gpuguard::rules::builtin_correlation_rules();
    EXPECT_TRUE(rules) << rules.error().message;
    return rules ? rules->size() : 0;
}

TEST(ReadmeTour, the_replay_block_is_todays_output) {
    const auto block = block_of("build/agent/gpuguard replay");
    ASSERT_FALSE(block.empty());
    // "# build/agent/gpuguard replay ARGS | cut -c1-N": stdout cut, then
    // the stats line replay writes on stderr at the end.
    std::string command = block[0].substr(2);
    size_t cut = std::string::npos;
    if (const size_t pipe = command.find(" | cut -c1-"); pipe != std::string::npos) {
        cut = std::stoul(command.substr(pipe + 11));
        command.resize(pipe);
    }
    std::vector<std::string> argv;
    std::istringstream words(command);
    for (std::string word; words >> word;) {
        const fs::path in_tree = fs::path(GPUGUARD_SOURCE_DIR) / word;
        argv.push_back(argv.empty() ? GPUGUARD_BINARY
                                    : (fs::exists(in_tree) ? in_tree.string() : word));
    }
    const auto result = run_command(argv);
    ASSERT_EQ(result.exit_code, 0) << result.stderr_text;
    std::vector<std::string> output;
    for (const auto& line : lines_of(result.stdout_text)) output.push_back(line.substr(0, cut));
    for (const auto& line : lines_of(result.stderr_text)) output.push_back(line);
    EXPECT_EQ(output, std::vector<std::string>(block.begin() + 1, block.end()))
        << "rerun `" << block[0].substr(2) << "` and paste its output into README.md";
}

TEST(ReadmeTour, the_pack_and_corpus_counts_are_todays) {
    for (const auto count : numbers_before(" built-in miner and GPU-abuse signatures")) {
        EXPECT_EQ(count, builtin_signature_count());
    }
    // Pool domains: the suffixes of the GG-POOL signatures, bar the
    // web-mining script hosts (docs/signatures.md counts them apart).
    size_t pool_domains = 0;
    auto pack = gpuguard::signatures::load_builtin_pack();
    ASSERT_TRUE(pack);
    for (const auto& signature : pack->signatures) {
        if (!signature.id.starts_with("GG-POOL-") ||
            signature.name.find("web-mining") != std::string::npos) {
            continue;
        }
        for (const auto& pattern : signature.patterns) {
            pool_domains += pattern.kind == gpuguard::signatures::PatternKind::kDomainSuffix;
        }
    }
    for (const auto count : numbers_before(" pool domains")) EXPECT_EQ(count, pool_domains);
    size_t scenarios = 0;
    for (const auto& entry :
         fs::recursive_directory_iterator(GPUGUARD_SOURCE_DIR "/tests/scenarios")) {
        scenarios += entry.path().extension() == ".jsonl";
    }
    for (const auto count : numbers_before("-scenario test corpus")) EXPECT_EQ(count, scenarios);
}

TEST(ReadmeTour, the_status_and_start_blocks_count_todays_rules) {
    const std::regex counts("([0-9]+) signatures, ([0-9]+) correlation rules");
    size_t seen = 0;
    for (const auto& block : console_blocks()) {
        for (const auto& line : block) {
            std::smatch match;
            if (!std::regex_search(line, match, counts)) continue;
            ++seen;
            EXPECT_EQ(std::stoul(match[1]), builtin_signature_count()) << line;
            EXPECT_EQ(std::stoul(match[2]), builtin_correlation_rule_count()) << line;
        }
    }
    EXPECT_GE(seen, 2u) << "the agent's start and `gpuguard status` both count the rules";
}

// The README line that starts with `prefix` in `block`; fails when none.
std::string readme_line(const std::vector<std::string>& block, const std::string& prefix) {
    for (const auto& line : block) {
        if (line.find(prefix) != std::string::npos) return line;
    }
    ADD_FAILURE() << "no README line with '" << prefix << "'";
    return "";
}

// A detection line without what changes from run to run: its clock, the
// pid, and the user name (not yet resolved when a process is judged at its
// very first exec).
std::string without_time_and_pid(const std::string& line) {
    std::string out = std::regex_replace(line, std::regex("^[0-9:]+ "), "");
    out = std::regex_replace(out, std::regex("pid [0-9]+"), "pid N");
    return std::regex_replace(out, std::regex(" user [^ ]+"), "");
}

TEST(ReadmeTourLive, the_agent_status_and_detections_are_todays) {
    GG_REQUIRE_PRIVILEGED();
    gpuguard::testing::TempDir dir("gg-readme-tour");
    const fs::path node = dir / "fakegpu";
    ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    const fs::path config = dir / "fakegpu.yaml";
    const std::string socket = (dir / "control.sock").string();
    {
        std::ofstream out(config);
        out << "sensor: {extra_gpu_devices: [\"1:7\"], connect_loopback: true}\n"
            << "control: {socket: " << socket << "}\n"
            << gpuguard::testing::scratch_paths_config(dir.path());
    }
    // The tour's "pool": a listener on loopback port 3333.
    gpuguard::UniqueFd pool(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    const int yes = 1;
    ::setsockopt(pool.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(3333);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(pool.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0)
        << "127.0.0.1:3333 is taken";
    ASSERT_EQ(::listen(pool.get(), 4), 0);

    gpuguard::testing::Subprocess agent({GPUGUARD_BINARY, "run", "-c", config.string()});
    ASSERT_TRUE(agent.wait_for_agent_ready(std::chrono::seconds(60)));

    // Step 2's start line: the rule counts, always; the hooks where the
    // kernel attaches the same way as the README's.
    const auto start = block_of("build/agent/gpuguard run --print-events");
    const std::regex attached(R"(sensor attached \(([a-z_]+)\): ([0-9]+) hook)");
    std::smatch readme_hooks, agent_hooks;
    const std::string readme_attached = readme_line(start, "sensor attached");
    ASSERT_TRUE(std::regex_search(readme_attached, readme_hooks, attached)) << readme_attached;
    const std::string agent_stderr = agent.stderr_text();
    ASSERT_TRUE(std::regex_search(agent_stderr, agent_hooks, attached));
    if (readme_hooks[1] == agent_hooks[1]) {
        EXPECT_EQ(readme_hooks[2], agent_hooks[2]) << "hooks in " << agent_hooks[1] << " mode";
    }

    // Step 7: `gpuguard status | head -4`, its rule version and hooks.
    const auto status = block_of("build/agent/gpuguard status");
    const auto result = run_command({GPUGUARD_BINARY, "status", "--socket", socket});
    ASSERT_EQ(result.exit_code, 0) << result.stderr_text;
    const auto lines = lines_of(result.stdout_text);
    const auto agent_line = [&](const std::string& prefix) {
        for (const auto& line : lines) {
            if (line.starts_with(prefix)) return line;
        }
        return std::string("(no line '" + prefix + "')");
    };
    EXPECT_EQ(agent_line("rules: "), readme_line(status, "rules: "));
    if (readme_hooks[1] == agent_hooks[1]) {
        EXPECT_EQ(
            agent_line("hooks: ").substr(0, agent_line("hooks: ").find(':', 7)),
            readme_line(status, "hooks: ").substr(0, readme_line(status, "hooks: ").find(':', 7)));
    }

    // Step 5: the miner's command, on this test's node; every detection
    // line the README shows comes, bar its clock and pid.
    const auto miner = block_of("bash -c 'exec 3</tmp/fakegpu");
    ASSERT_FALSE(miner.empty());
    // "# bash -c '...'": the shell's exec of bash with that one argument.
    const std::string quoted = miner[0].substr(2);
    ASSERT_TRUE(quoted.starts_with("bash -c '") && quoted.ends_with("'")) << quoted;
    std::string script = quoted.substr(9, quoted.size() - 10);
    script.replace(script.find("/tmp/fakegpu"), 12, node.string());
    // Its `read -t 1` ends on the timeout (status 142): only a start that
    // failed matters.
    const auto ran = run_command({"/bin/bash", "-c", script});
    ASSERT_NE(ran.exit_code, 127) << ran.stderr_text;
    std::set<std::string> wanted;
    for (const auto& block : console_blocks()) {
        if (block.empty() || !std::regex_search(block[0], std::regex("^[0-9:]+ [A-Z]+ GG-"))) {
            continue;
        }
        for (const auto& line : block) wanted.insert(without_time_and_pid(line));
    }
    ASSERT_FALSE(wanted.empty()) << "README.md shows no detection lines";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    std::vector<std::string> printed;
    while (!wanted.empty() && std::chrono::steady_clock::now() < deadline) {
        const auto line = agent.read_stdout_line(std::chrono::milliseconds(500));
        if (!line) continue;
        printed.push_back(*line);
        wanted.erase(without_time_and_pid(*line));
    }
    for (const auto& missing : wanted) {
        ADD_FAILURE() << "README.md's detection did not come: " << missing;
    }
    if (!wanted.empty()) {
        for (const auto& line : printed) ADD_FAILURE() << "the agent printed: " << line;
    }
}

}  // namespace
