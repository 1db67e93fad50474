// Matcher on hand-made signatures: pattern kinds, case, anchors, fields,
// ports, errors naming the bad pattern, and scratch per thread.
#include <thread>

#include <gtest/gtest.h>

#include "gpuguard/signatures/signatures.h"

namespace gpuguard::signatures {
namespace {

using Ids = std::vector<std::string_view>;

Signature make(const std::string& id, std::vector<Pattern> patterns,
               std::vector<uint16_t> ports = {}) {
    Signature signature;
    signature.id = id;
    signature.patterns = std::move(patterns);
    signature.ports = std::move(ports);
    return signature;
}

Pattern regex(Field field, std::string text, bool caseless = false, Anchor anchor = Anchor::kNone) {
    return {field, PatternKind::kRegex, std::move(text), caseless, anchor};
}

Scanner scanner_for(std::vector<Signature> signatures) {
    auto matcher = Matcher::compile(std::move(signatures));
    EXPECT_TRUE(matcher.ok()) << matcher.error().message;
    auto scanner = matcher->scanner();
    EXPECT_TRUE(scanner.ok());
    return std::move(scanner).value();
}

TEST(Matcher, literal_patterns_match_byte_for_byte_not_as_regex) {
    auto scanner = scanner_for({make("L", {{Field::kCmdline, PatternKind::kLiteral, "a.b+c"}})});
    EXPECT_EQ(scanner.match(Field::kCmdline, "run a.b+c now"), Ids{"L"});
    EXPECT_TRUE(scanner.match(Field::kCmdline, "run axbbc now").empty());
}

TEST(Matcher, caseless_is_per_pattern) {
    auto scanner = scanner_for({make("CASE", {regex(Field::kCmdline, "stratum", false)}),
                                make("NOCASE", {regex(Field::kCmdline, "stratum", true)})});
    EXPECT_EQ(scanner.match(Field::kCmdline, "STRATUM"), Ids{"NOCASE"});
    EXPECT_EQ(scanner.match(Field::kCmdline, "stratum"), (Ids{"CASE", "NOCASE"}));
}

TEST(Matcher, anchors_are_applied_per_pattern) {
    auto scanner =
        scanner_for({make("START", {regex(Field::kCmdline, "abc", false, Anchor::kStart)}),
                     make("END", {regex(Field::kCmdline, "abc", false, Anchor::kEnd)}),
                     make("BOTH", {regex(Field::kCmdline, "a|abc", false, Anchor::kBoth)})});
    EXPECT_EQ(scanner.match(Field::kCmdline, "abc"), (Ids{"BOTH", "END", "START"}));
    EXPECT_EQ(scanner.match(Field::kCmdline, "abcd"), Ids{"START"});
    EXPECT_EQ(scanner.match(Field::kCmdline, "xabc"), Ids{"END"});
}

TEST(Matcher, globs_match_the_process_name_or_the_executables_basename) {
    auto scanner =
        scanner_for({make("G", {{Field::kProcess, PatternKind::kGlob, "t-rex*", true}})});
    EXPECT_EQ(scanner.match(Field::kProcess, "t-rex"), Ids{"G"});
    EXPECT_EQ(scanner.match(Field::kProcess, "/opt/t-rex-0.26/T-Rex"), Ids{"G"});
    EXPECT_TRUE(scanner.match(Field::kProcess, "/opt/t-rex/bin/python").empty());
    EXPECT_EQ(scanner.match_process("bash", "/tmp/t-rex"), Ids{"G"});
    EXPECT_TRUE(scanner.match_process("bash", "/bin/bash").empty());
}

TEST(Matcher, domain_suffixes_match_subdomains_and_hosts_in_command_lines) {
    auto scanner =
        scanner_for({make("D", {{Field::kDomain, PatternKind::kDomainSuffix, "pool.example"}})});
    EXPECT_EQ(scanner.match(Field::kDomain, "pool.example"), Ids{"D"});
    EXPECT_EQ(scanner.match(Field::kDomain, "eu1.POOL.example."), Ids{"D"});
    EXPECT_TRUE(scanner.match(Field::kDomain, "notpool.example").empty());
    EXPECT_TRUE(scanner.match(Field::kDomain, "pool.example.org").empty());
    EXPECT_EQ(scanner.match(Field::kCmdline, "m -o stratum+tcp://eu.pool.example:3333"), Ids{"D"});
    EXPECT_TRUE(scanner.match(Field::kCmdline, "curl https://pool.example.org/").empty());
    // As a miner names its pool: after an option, a stratum or websocket
    // scheme, a user@, in a config value.
    for (const char* miner :
         {"m -o pool.example:3333", "m --url=eu.pool.example",
          "m -P stratum1+tcp://0xab.w@pool.example:4444", "m -o stratum+ssl://eu.pool.example:443",
          "m -uri ethstratum://w@pool.example:4444", "new Miner('wss://ws1.pool.example/proxy')",
          "\"url\": \"pool.example:3333\",", "POOL: eu1.pool.example:4444, WALLET: 0xab"}) {
        EXPECT_EQ(scanner.match(Field::kCmdline, miner), Ids{"D"}) << miner;
    }
    // A web address is a dashboard or a download reading the pool's site.
    for (const char* web :
         {"python3 stats.py --api https://pool.example/api/miner/4A/stats",
          "exporter --pool-api=https://api.pool.example/v1", "wget http://pool.example/xmrig.tgz",
          "lftp ftp://mirror.pool.example/pub"}) {
        EXPECT_TRUE(scanner.match(Field::kCmdline, web).empty()) << web;
    }
}

TEST(Matcher, fields_are_separate_databases) {
    auto scanner = scanner_for({make("C", {regex(Field::kCmdline, "needle")}),
                                make("P", {regex(Field::kPayload, "needle")})});
    EXPECT_EQ(scanner.match(Field::kCmdline, "a needle"), Ids{"C"});
    EXPECT_EQ(scanner.match(Field::kPayload, "a needle"), Ids{"P"});
    EXPECT_TRUE(scanner.match(Field::kDomain, "needle").empty());  // no database at all
}

TEST(Matcher, a_signature_with_many_hits_is_reported_once) {
    auto scanner =
        scanner_for({make("M", {regex(Field::kCmdline, "a"), regex(Field::kCmdline, "b")})});
    EXPECT_EQ(scanner.match(Field::kCmdline, "aaa bbb"), Ids{"M"});
}

TEST(Matcher, ports_map_to_signatures) {
    auto scanner = scanner_for({make("P1", {}, {3333, 4444}), make("P2", {}, {3333})});
    EXPECT_EQ(scanner.match_port(3333), (Ids{"P1", "P2"}));
    EXPECT_EQ(scanner.match_port(4444), Ids{"P1"});
    EXPECT_TRUE(scanner.match_port(443).empty());
}

TEST(Matcher, a_bad_pattern_fails_compile_naming_signature_pattern_and_reason) {
    auto matcher = Matcher::compile({make("OK", {regex(Field::kCmdline, "fine")}),
                                     make("BAD", {regex(Field::kCmdline, "(unclosed")})});
    ASSERT_FALSE(matcher.ok());
    EXPECT_NE(matcher.error().message.find("BAD: cmdline pattern '(unclosed'"), std::string::npos)
        << matcher.error().message;
    EXPECT_NE(matcher.error().message.find("Missing close parenthesis"), std::string::npos)
        << matcher.error().message;
}

TEST(Matcher, check_regex_reports_hyperscans_reason) {
    EXPECT_TRUE(check_regex("stratum\\+tcp://", false).ok());
    const auto backreference = check_regex("(a)\\1", false);
    ASSERT_FALSE(backreference.ok());
    EXPECT_FALSE(backreference.error().message.empty());
    EXPECT_FALSE(check_regex("a*", false).ok());  // matches the empty buffer
}

TEST(Matcher, scanners_on_several_threads_agree) {
    auto matcher = Matcher::compile({make("T", {regex(Field::kCmdline, "stratum\\+tcp://")})});
    ASSERT_TRUE(matcher.ok());
    std::vector<int> hits(4, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            auto scanner = matcher->scanner();
            if (!scanner.ok()) return;
            for (int i = 0; i < 1000; ++i) {
                hits[t] += !scanner->match(Field::kCmdline, "x -o stratum+tcp://p:1").empty();
                hits[t] += !scanner->match(Field::kCmdline, "benign").empty();
            }
        });
    }
    for (auto& thread : threads) thread.join();
    for (const int count : hits) EXPECT_EQ(count, 1000);
}

TEST(Matcher, ids_outlive_the_matcher_while_a_scanner_lives) {
    auto matcher = Matcher::compile({make("KEEP", {regex(Field::kCmdline, "x")})});
    ASSERT_TRUE(matcher.ok());
    auto scanner = matcher->scanner();
    ASSERT_TRUE(scanner.ok());
    { auto gone = std::move(matcher).value(); }
    EXPECT_EQ(scanner->match(Field::kCmdline, "x"), Ids{"KEEP"});
}

TEST(Pack, parse_errors_are_all_reported_with_file_line_and_column) {
    const char* yaml = R"(pack: test
signatures:
  - id: GG-TEST-0001
    name: a
    description: something long enough
    severity: loud
    confidence: 2
    mitre: T1496
    references: [https://example.org]
    false_positives: [none]
    colour: red
    match:
      cmdline: ["x"]
    tests:
      match: ["x"]
      no_match: ["y"]
)";
    auto pack = parse_pack_yaml(yaml, "t.yaml");
    ASSERT_FALSE(pack.ok());
    const std::string& message = pack.error().message;
    EXPECT_NE(message.find("t.yaml:11:5: signature: unknown key 'colour'"), std::string::npos)
        << message;
    EXPECT_NE(message.find("t.yaml:6:15: GG-TEST-0001: severity 'loud' is not a syslog level"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("t.yaml:7:17: GG-TEST-0001: confidence must be a number from 0 to 1"),
              std::string::npos)
        << message;
}

TEST(Pack, missing_fields_are_errors) {
    auto pack = parse_pack_yaml("signatures:\n  - id: GG-TEST-0002\n    name: x\n", "m.yaml");
    ASSERT_FALSE(pack.ok());
    for (const char* key : {"description", "severity", "confidence", "mitre", "references",
                            "false_positives", "match", "tests"}) {
        EXPECT_NE(pack.error().message.find(std::string("missing required key '") + key + "'"),
                  std::string::npos)
            << key;
    }
}

}  // namespace
}  // namespace gpuguard::signatures
