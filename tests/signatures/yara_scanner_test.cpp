// YaraScanner: hits on generated miner-like executables and configs, none on
// the host's own binaries, the size cap, the cache and /proc/PID/exe.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuguard/signatures/signatures.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::signatures {
namespace {

using gpuguard::testing::TempDir;

// A string literal's bytes, embedded NULs included.
template <size_t N>
std::string raw(const char (&text)[N]) {
    return std::string(text, N - 1);
}

const std::string kElfHeader =
    raw("\x7f"
        "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");

void write_file(const std::filesystem::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

std::string fake_executable(const std::string& strings) {
    std::string body = kElfHeader + std::string(4096, '\0') + strings + std::string(4096, '\0');
    return body;
}

class YaraScannerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        auto pack = load_builtin_pack();
        ASSERT_TRUE(pack.ok()) << pack.error().message;
        auto scanner = YaraScanner::compile(*pack, options_);
        ASSERT_TRUE(scanner.ok()) << scanner.error().message;
        scanner_.emplace(std::move(scanner).value());
    }
    YaraOptions options_;
    std::optional<YaraScanner> scanner_;
    TempDir dir_;
};

TEST_F(YaraScannerTest, hits_generated_miner_executables) {
    const std::pair<const char*, std::string> fixtures[] = {
        {"GG_XMRig_Executable",
         fake_executable(raw("donate.v2.xmrig.com\0--donate-level\0stratum+tcp://\0"))},
        {"GG_Stratum_Client_Executable",
         fake_executable(raw("mining.subscribe\0mining.authorize\0mining.submit\0"))},
    };
    for (const auto& [rule, bytes] : fixtures) {
        const auto path = dir_ / (std::string(rule) + ".bin");
        write_file(path, bytes);
        auto report = scanner_->scan_file(path);
        ASSERT_TRUE(report.ok()) << report.error().message;
        EXPECT_NE(std::find(report->rules.begin(), report->rules.end(), rule), report->rules.end())
            << rule << " did not hit " << path;
        EXPECT_FALSE(report->signature_ids.empty());
        EXPECT_EQ(report->sha256, sha256_hex(bytes));
    }
}

TEST_F(YaraScannerTest, hits_nothing_on_the_hosts_own_binaries) {
    for (const char* path : {"/bin/sh", "/usr/bin/env", "/usr/bin/cmake", "/usr/bin/python3"}) {
        if (!std::filesystem::exists(path)) continue;
        auto report = scanner_->scan_file(path);
        if (!report.ok() && report.error().code == ErrorCode::kUnsupported) continue;  // too big
        ASSERT_TRUE(report.ok()) << report.error().message;
        EXPECT_TRUE(report->rules.empty()) << path << " hit " << report->rules.front();
    }
}

TEST_F(YaraScannerTest, caches_by_file_identity_and_by_sha256) {
    const std::string bytes = fake_executable(raw("donate.ssl.xmrig.com\0randomx\0XMRig/6\0"));
    write_file(dir_ / "a", bytes);
    auto first = scanner_->scan_file(dir_ / "a");
    ASSERT_TRUE(first.ok());
    EXPECT_FALSE(first->from_cache);
    auto again = scanner_->scan_file(dir_ / "a");
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(again->from_cache);
    // Same bytes under another inode: known by its sha256.
    write_file(dir_ / "b", bytes);
    auto copy = scanner_->scan_file(dir_ / "b");
    ASSERT_TRUE(copy.ok());
    EXPECT_TRUE(copy->from_cache);
    EXPECT_EQ(copy->rules, first->rules);
    EXPECT_FALSE(copy->rules.empty());
    EXPECT_EQ(scanner_->cache_entries(), 2u);
    // The bytes' MD5 (for dpkg's md5sums) comes with every verdict, cached or not.
    const auto md5sum = gpuguard::testing::run_command({"/usr/bin/md5sum", (dir_ / "a").string()},
                                                       std::chrono::seconds(10));
    ASSERT_EQ(md5sum.exit_code, 0);
    const std::string expected = md5sum.stdout_text.substr(0, 32);
    EXPECT_EQ(first->md5, expected);
    EXPECT_EQ(again->md5, expected);
    EXPECT_EQ(copy->md5, expected);
}

TEST_F(YaraScannerTest, a_changed_file_is_scanned_again) {
    write_file(dir_ / "c", fake_executable("nothing to see"));
    auto before = scanner_->scan_file(dir_ / "c");
    ASSERT_TRUE(before.ok());
    EXPECT_TRUE(before->rules.empty());
    write_file(dir_ / "c", fake_executable(raw("donate.v2.xmrig.com\0--cuda-loader\0XMRig/6")));
    auto after = scanner_->scan_file(dir_ / "c");
    ASSERT_TRUE(after.ok());
    EXPECT_FALSE(after->from_cache);
    EXPECT_FALSE(after->rules.empty());
}

TEST_F(YaraScannerTest, files_over_the_cap_are_refused) {
    auto pack = load_builtin_pack();
    ASSERT_TRUE(pack.ok());
    auto small = YaraScanner::compile(*pack, YaraOptions{.max_file_size = 1024});
    ASSERT_TRUE(small.ok());
    write_file(dir_ / "big", std::string(4096, 'x'));
    auto report = small->scan_file(dir_ / "big");
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.error().code, ErrorCode::kUnsupported);
}

TEST_F(YaraScannerTest, scans_a_process_executable_through_proc) {
    auto report = scanner_->scan_pid(getpid());
    if (!report.ok() && report.error().code == ErrorCode::kUnsupported) GTEST_SKIP() << "too big";
    ASSERT_TRUE(report.ok()) << report.error().message;
    EXPECT_EQ(report->path, "/proc/" + std::to_string(getpid()) + "/exe");
    EXPECT_EQ(report->sha256.size(), 64u);
    auto missing = scanner_->scan_pid(999999999);
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

// Bytes malloc has handed out and not had back (arenas and mmapped blocks).
size_t malloc_in_use() {
    const struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}

// The rules are kept in a buffer of their own size, not in the compiler's
// arena (1 MiB per section: ~12 MiB for the pack, docs/operations.md).
TEST_F(YaraScannerTest, compiled_rules_keep_only_their_own_size) {
    auto pack = load_builtin_pack();
    ASSERT_TRUE(pack.ok());
    const size_t before = malloc_in_use();
    auto second = YaraScanner::compile(*pack);
    ASSERT_TRUE(second.ok()) << second.error().message;
    const size_t kept = malloc_in_use() - before;
    EXPECT_LT(kept, 1u << 20) << kept << " bytes kept by a compiled pack";
    write_file(dir_ / "xmrig",
               fake_executable(raw("mining.subscribe\0mining.authorize\0mining.submit\0")));
    auto report = second->scan_file(dir_ / "xmrig");
    ASSERT_TRUE(report.ok()) << report.error().message;
    EXPECT_EQ(report->rules, std::vector<std::string>{"GG_Stratum_Client_Executable"});
}

TEST_F(YaraScannerTest, unknown_rule_names_and_broken_rules_fail_to_compile) {
    Pack pack;
    pack.yara_sources.push_back({"bad.yar", "rule Broken { condition: nope_unknown }"});
    auto broken = YaraScanner::compile(pack);
    ASSERT_FALSE(broken.ok());
    EXPECT_NE(broken.error().message.find("bad.yar:1:"), std::string::npos)
        << broken.error().message;
    Pack dangling;
    dangling.yara_sources.push_back({"ok.yar", "rule Fine { condition: true }"});
    Signature signature;
    signature.id = "GG-T-0001";
    signature.yara_rules = {"Missing"};
    dangling.signatures.push_back(signature);
    auto missing = YaraScanner::compile(dangling);
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("Missing"), std::string::npos);
}

TEST(Sha256, matches_known_digests) {
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc"),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace gpuguard::signatures
