// The compiled-database cache of Matcher::compile (signatures/database_cache.h):
// a second compile loads what the first stored and matches exactly the same;
// a file that is corrupt, truncated, foreign, made for other expressions or
// writable by others is never used, and is replaced by a good one; a cache
// that cannot be written costs the compile, nothing else.
#include <fstream>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "gpuguard/signatures/signatures.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::signatures {
namespace {

namespace fs = std::filesystem;
using gpuguard::testing::file_text;
using gpuguard::testing::TempDir;
using Ids = std::vector<std::string_view>;

Signature make(const std::string& id, Pattern pattern) {
    Signature signature;
    signature.id = id;
    signature.patterns = {std::move(pattern)};
    return signature;
}

std::vector<Signature> miner_signatures(const std::string& name_glob = "xmrig*") {
    return {make("NAME", {Field::kProcess, PatternKind::kGlob, name_glob}),
            make("POOL", {Field::kDomain, PatternKind::kDomainSuffix, "supportxmr.com"}),
            make("LOGIN", {Field::kPayload, PatternKind::kRegex, "\"method\":\\s*\"login\""})};
}

Matcher compile(const fs::path& cache, std::vector<Signature> signatures = miner_signatures()) {
    auto matcher = Matcher::compile(std::move(signatures), CompileCache{cache});
    EXPECT_TRUE(matcher) << matcher.error().message;
    return std::move(matcher).value();
}

// What a matcher finds in texts of every field it has patterns for.
std::vector<Ids> verdicts(const Matcher& matcher) {
    auto scanner = matcher.scanner();
    EXPECT_TRUE(scanner);
    return {scanner->match(Field::kProcess, "xmrig-6.21"),
            scanner->match(Field::kProcess, "python3"),
            scanner->match(Field::kDomain, "pool.supportxmr.com."),
            scanner->match(Field::kDomain, "huggingface.co"),
            scanner->match(Field::kPayload, R"({"id":1,"method": "login"})"),
            scanner->match(Field::kPayload, R"({"id":1,"method":"generate"})")};
}

// The one cache file in `dir` (hyperscan-*.db).
std::vector<fs::path> cache_files(const fs::path& dir) {
    std::vector<fs::path> files;
    if (!fs::exists(dir)) return files;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() == ".db") files.push_back(entry.path());
    }
    return files;
}

const std::vector<Ids> kExpected = {Ids{"NAME"}, Ids{}, Ids{"POOL"}, Ids{}, Ids{"LOGIN"}, Ids{}};

TEST(DatabaseCache, a_second_compile_loads_what_the_first_stored_and_matches_the_same) {
    TempDir dir;
    const fs::path cache = dir / "cache";  // made by the first compile
    const Matcher first = compile(cache);
    EXPECT_EQ(verdicts(first), kExpected);
    const auto files = cache_files(cache);
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(first.cache_note(), "compiled, stored in " + files[0].string());
    struct stat st {};
    ASSERT_EQ(::stat(cache.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    ASSERT_EQ(::stat(files[0].c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 077, 0u) << "only its owner may read or write it";

    const Matcher second = compile(cache);
    EXPECT_EQ(second.cache_note(), "loaded from " + files[0].string());
    EXPECT_EQ(verdicts(second), kExpected);
    EXPECT_EQ(second.database_bytes(), first.database_bytes());
}

TEST(DatabaseCache, without_a_directory_nothing_is_written_or_said) {
    auto matcher = Matcher::compile(miner_signatures());
    ASSERT_TRUE(matcher);
    EXPECT_EQ(matcher->cache_note(), "");
    EXPECT_EQ(verdicts(*matcher), kExpected);
}

TEST(DatabaseCache, other_expressions_are_compiled_and_kept_in_a_file_of_their_own) {
    TempDir dir;
    compile(dir.path());
    const Matcher other = compile(dir.path(), miner_signatures("t-rex*"));
    EXPECT_TRUE(other.cache_note().starts_with("compiled, stored in ")) << other.cache_note();
    EXPECT_EQ(cache_files(dir.path()).size(), 2u);
    auto scanner = other.scanner();
    ASSERT_TRUE(scanner);
    EXPECT_EQ(scanner->match(Field::kProcess, "t-rex"), Ids{"NAME"});
    EXPECT_EQ(scanner->match(Field::kProcess, "xmrig"), Ids{});
}

// Each way a file can be bad: it is named, compiled around, replaced, and
// the replacement loads.
void expect_refused_and_replaced(const fs::path& cache, const std::string& why) {
    const Matcher refused = compile(cache);
    EXPECT_NE(refused.cache_note().find(why), std::string::npos) << refused.cache_note();
    EXPECT_TRUE(refused.cache_note().starts_with("compiled (")) << refused.cache_note();
    EXPECT_TRUE(refused.cache_note().ends_with(", replaced")) << refused.cache_note();
    EXPECT_EQ(verdicts(refused), kExpected);
    const Matcher again = compile(cache);
    EXPECT_TRUE(again.cache_note().starts_with("loaded from ")) << again.cache_note();
    EXPECT_EQ(verdicts(again), kExpected);
}

TEST(DatabaseCache, a_flipped_byte_is_caught_by_the_checksum) {
    TempDir dir;
    compile(dir.path());
    const fs::path file = cache_files(dir.path()).at(0);
    std::string bytes = file_text(file);
    bytes[bytes.size() / 2] ^= 0x20;
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    expect_refused_and_replaced(dir.path(), "checksum does not match");
}

TEST(DatabaseCache, a_truncated_or_foreign_file_is_not_used) {
    TempDir dir;
    compile(dir.path());
    const fs::path file = cache_files(dir.path()).at(0);
    const std::string bytes = file_text(file);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
    expect_refused_and_replaced(dir.path(), "checksum does not match");
    std::ofstream(file, std::ios::binary | std::ios::trunc) << "not a cache at all";
    expect_refused_and_replaced(dir.path(), "not a gpuguard Hyperscan cache file");
}

TEST(DatabaseCache, a_valid_file_under_another_rule_sets_name_is_not_used) {
    TempDir dir;
    compile(dir.path());
    compile(dir.path(), miner_signatures("t-rex*"));
    const auto files = cache_files(dir.path());
    ASSERT_EQ(files.size(), 2u);
    // Whichever of the two is ours gets the other's (intact, checksummed) bytes.
    const std::string ours_text = file_text(files[0]);
    std::ofstream(files[0], std::ios::binary | std::ios::trunc) << file_text(files[1]);
    std::ofstream(files[1], std::ios::binary | std::ios::trunc) << ours_text;
    expect_refused_and_replaced(dir.path(), "made for other rules or another Hyperscan");
}

TEST(DatabaseCache, a_file_others_can_write_is_not_trusted) {
    TempDir dir;
    compile(dir.path());
    const fs::path file = cache_files(dir.path()).at(0);
    ASSERT_EQ(::chmod(file.c_str(), 0666), 0);
    expect_refused_and_replaced(dir.path(), "writable by");
}

TEST(DatabaseCache, a_cache_that_cannot_be_written_costs_only_the_compile) {
    TempDir dir;
    std::ofstream(dir / "a-file") << "x";
    const Matcher matcher = compile(dir / "a-file" / "cache");
    EXPECT_TRUE(matcher.cache_note().starts_with("compiled, not stored: cannot create "))
        << matcher.cache_note();
    EXPECT_EQ(verdicts(matcher), kExpected);
}

}  // namespace
}  // namespace gpuguard::signatures
