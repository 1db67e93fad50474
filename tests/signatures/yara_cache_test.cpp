// The compiled-rules cache of YaraScanner::compile (signatures/database_cache.h,
// the same files and checks as the Hyperscan cache): a second compile loads
// what the first stored and finds the same rules; other sources get a file
// of their own; a file that is corrupt, foreign, made for other sources,
// writable by others or refused by YARA itself is never used, and is
// replaced by a good one.
#include <fstream>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "gpuguard/signatures/signatures.h"
#include "signatures/database_cache.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::signatures {
namespace {

namespace fs = std::filesystem;
using gpuguard::testing::file_text;
using gpuguard::testing::TempDir;

const std::string kMinerRule =
    R"(rule Test_Miner { strings: $a = "stratum+tcp://" condition: $a })";

Pack pack_of(const std::string& rules_text) {
    Pack pack;
    pack.yara_sources.push_back({"test.yar", rules_text});
    Signature signature;
    signature.id = "GG-TEST-0001";
    signature.yara_rules = {"Test_Miner"};
    pack.signatures.push_back(signature);
    return pack;
}

YaraScanner compile_yara(const fs::path& cache, const Pack& pack = pack_of(kMinerRule)) {
    auto scanner = YaraScanner::compile(pack, {}, CompileCache{cache});
    EXPECT_TRUE(scanner) << scanner.error().message;
    return std::move(scanner).value();
}

// What the scanner finds in a miner-like and a harmless buffer.
std::vector<std::vector<std::string>> yara_verdicts(YaraScanner& scanner) {
    std::vector<std::vector<std::string>> out;
    for (const char* bytes : {"xx stratum+tcp://pool.example:3333 xx", "hello world"}) {
        auto report = scanner.scan_bytes(bytes);
        EXPECT_TRUE(report) << report.error().message;
        out.push_back(report ? report->signature_ids : std::vector<std::string>{"scan failed"});
    }
    return out;
}
const std::vector<std::vector<std::string>> kYaraExpected = {{"GG-TEST-0001"}, {}};

// The YARA cache files in `dir` (yara-*.db).
std::vector<fs::path> yara_files(const fs::path& dir) {
    std::vector<fs::path> files;
    if (!fs::exists(dir)) return files;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().filename().string().starts_with("yara-")) files.push_back(entry.path());
    }
    return files;
}

void expect_yara_refused_and_replaced(const fs::path& cache, const std::string& why) {
    YaraScanner refused = compile_yara(cache);
    EXPECT_NE(refused.cache_note().find(why), std::string::npos) << refused.cache_note();
    EXPECT_TRUE(refused.cache_note().starts_with("compiled (")) << refused.cache_note();
    EXPECT_TRUE(refused.cache_note().ends_with(", replaced")) << refused.cache_note();
    EXPECT_EQ(yara_verdicts(refused), kYaraExpected);
    YaraScanner again = compile_yara(cache);
    EXPECT_TRUE(again.cache_note().starts_with("loaded from ")) << again.cache_note();
    EXPECT_EQ(yara_verdicts(again), kYaraExpected);
}

TEST(YaraCache, a_second_compile_loads_what_the_first_stored_and_finds_the_same) {
    TempDir dir;
    const fs::path cache = dir / "cache";
    YaraScanner first = compile_yara(cache);
    const auto files = yara_files(cache);
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(first.cache_note(), "compiled, stored in " + files[0].string());
    struct stat st {};
    ASSERT_EQ(::stat(files[0].c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 077, 0u);
    EXPECT_EQ(yara_verdicts(first), kYaraExpected);

    YaraScanner second = compile_yara(cache);
    EXPECT_EQ(second.cache_note(), "loaded from " + files[0].string());
    EXPECT_EQ(yara_verdicts(second), kYaraExpected);
    EXPECT_EQ(second.rule_names(), first.rule_names());
}

TEST(YaraCache, the_builtin_pack_loads_with_every_rule) {
    TempDir dir;
    auto pack = load_builtin_pack();
    ASSERT_TRUE(pack) << pack.error().message;
    YaraScanner compiled = compile_yara(dir.path(), *pack);
    YaraScanner loaded = compile_yara(dir.path(), *pack);
    EXPECT_TRUE(loaded.cache_note().starts_with("loaded from ")) << loaded.cache_note();
    EXPECT_EQ(loaded.rule_names(), compiled.rule_names());
    EXPECT_GE(loaded.rule_names().size(), 5u);
}

TEST(YaraCache, other_sources_are_compiled_and_kept_in_a_file_of_their_own) {
    TempDir dir;
    compile_yara(dir.path());
    YaraScanner other = compile_yara(
        dir.path(), pack_of(kMinerRule + "\nrule Other { strings: $b = \"t-rex\" condition: $b }"));
    EXPECT_TRUE(other.cache_note().starts_with("compiled, stored in ")) << other.cache_note();
    EXPECT_EQ(yara_files(dir.path()).size(), 2u);
    EXPECT_EQ(other.rule_names(), (std::vector<std::string>{"Other", "Test_Miner"}));
}

TEST(YaraCache, a_flipped_byte_is_caught_by_the_checksum) {
    TempDir dir;
    compile_yara(dir.path());
    const fs::path file = yara_files(dir.path()).at(0);
    std::string bytes = file_text(file);
    bytes[bytes.size() / 2] ^= 0x20;
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    expect_yara_refused_and_replaced(dir.path(), "checksum does not match");
}

TEST(YaraCache, a_foreign_or_hyperscan_file_is_not_used) {
    TempDir dir;
    compile_yara(dir.path());
    const fs::path file = yara_files(dir.path()).at(0);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << "not a cache at all";
    expect_yara_refused_and_replaced(dir.path(), "not a gpuguard YARA cache file");
    // A Hyperscan cache file is intact and checksummed, but of another kind.
    Signature name;
    name.id = "NAME";
    name.patterns = {{Field::kProcess, PatternKind::kGlob, "xmrig*"}};
    auto matcher = Matcher::compile({name}, CompileCache{dir / "hs"});
    ASSERT_TRUE(matcher);
    const fs::path hyperscan = fs::directory_iterator(dir / "hs")->path();
    std::ofstream(file, std::ios::binary | std::ios::trunc) << file_text(hyperscan);
    expect_yara_refused_and_replaced(dir.path(), "not a gpuguard YARA cache file");
}

TEST(YaraCache, a_valid_file_of_other_sources_is_not_used) {
    TempDir dir;
    compile_yara(dir.path());
    compile_yara(dir.path(),
                 pack_of(kMinerRule + "\nrule Other { strings: $b = \"t-rex\" condition: $b }"));
    const auto files = yara_files(dir.path());
    ASSERT_EQ(files.size(), 2u);
    const std::string first_text = file_text(files[0]);
    std::ofstream(files[0], std::ios::binary | std::ios::trunc) << file_text(files[1]);
    std::ofstream(files[1], std::ios::binary | std::ios::trunc) << first_text;
    expect_yara_refused_and_replaced(dir.path(), "made for other rules or another YARA");
}

TEST(YaraCache, a_file_others_can_write_is_not_trusted) {
    TempDir dir;
    compile_yara(dir.path());
    const fs::path file = yara_files(dir.path()).at(0);
    ASSERT_EQ(::chmod(file.c_str(), 0666), 0);
    expect_yara_refused_and_replaced(dir.path(), "writable by");
}

TEST(YaraCache, rules_yara_itself_refuses_are_compiled_anew) {
    TempDir dir;
    compile_yara(dir.path());
    const fs::path file = yara_files(dir.path()).at(0);
    // Well formed for the cache (its key, a good checksum), not for YARA.
    const std::string key = file.stem().string().substr(std::string("yara-").size());
    ASSERT_TRUE(database_cache::store(file, database_cache::kYara, key, {"YARA garbage"}));
    expect_yara_refused_and_replaced(dir.path(), "YARA refused its rules");
}

}  // namespace
}  // namespace gpuguard::signatures
