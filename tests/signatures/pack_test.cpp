// The built-in pack: its invariants (count, ids, fields, families, coverage),
// the counts the docs state of it, and every test vector of every signature,
// one test per signature.
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "gpuguard/signatures/signatures.h"
#include "tests/signatures/vector_eval.h"

namespace gpuguard::signatures {
namespace {

const Pack& builtin_pack() {
    static const Pack pack = [] {
        auto loaded = load_builtin_pack();
        if (!loaded) {
            ADD_FAILURE() << loaded.error().message;
            return Pack{};
        }
        return std::move(loaded).value();
    }();
    return pack;
}

TEST(Pack, loads_at_least_120_signatures_with_unique_well_formed_ids) {
    const Pack& pack = builtin_pack();
    EXPECT_GE(pack.signatures.size(), 120u);
    const std::regex id_form("GG-[A-Z0-9]+-[0-9]{4}");
    std::set<std::string> ids;
    for (const auto& signature : pack.signatures) {
        EXPECT_TRUE(std::regex_match(signature.id, id_form))
            << signature.source << ": id " << signature.id << " is not GG-<FAMILY>-NNNN";
        EXPECT_TRUE(ids.insert(signature.id).second) << "duplicate id " << signature.id;
    }
}

TEST(Pack, every_signature_has_every_field) {
    for (const auto& signature : builtin_pack().signatures) {
        SCOPED_TRACE(signature.id + " at " + signature.source);
        EXPECT_FALSE(signature.name.empty());
        EXPECT_GE(signature.description.size(), 20u);
        EXPECT_GE(signature.confidence, 0.0);
        EXPECT_LE(signature.confidence, 1.0);
        EXPECT_EQ(signature.mitre.front(), 'T');
        EXPECT_FALSE(signature.references.empty());
        for (const auto& reference : signature.references) {
            EXPECT_TRUE(reference.starts_with("https://")) << reference;
        }
        EXPECT_FALSE(signature.false_positives.empty());
        EXPECT_FALSE(signature.must_match.empty());
        EXPECT_FALSE(signature.must_not_match.empty());
        EXPECT_TRUE(!signature.patterns.empty() || !signature.ports.empty() ||
                    !signature.yara_rules.empty());
    }
}

TEST(Pack, every_pattern_compiles_alone_in_hyperscan) {
    for (const auto& signature : builtin_pack().signatures) {
        for (const auto& pattern : signature.patterns) {
            const auto status = check_regex(pattern_expression(pattern), pattern.caseless);
            EXPECT_TRUE(status.ok()) << signature.id << ": '" << pattern.text
                                     << "': " << (status.ok() ? "" : status.error().message);
        }
    }
}

TEST(Pack, whole_pack_compiles_into_hyperscan_and_yara) {
    auto matcher = Matcher::compile(builtin_pack().signatures);
    ASSERT_TRUE(matcher.ok()) << matcher.error().message;
    EXPECT_GT(matcher->database_bytes(), 0u);
    auto yara = YaraScanner::compile(builtin_pack());
    ASSERT_TRUE(yara.ok()) << yara.error().message;
    // Every YARA rule is named by some signature, so no hit goes unreported.
    std::set<std::string> named;
    for (const auto& signature : builtin_pack().signatures) {
        named.insert(signature.yara_rules.begin(), signature.yara_rules.end());
    }
    for (const auto& rule : yara->rule_names()) {
        EXPECT_TRUE(named.contains(rule)) << "YARA rule " << rule << " has no signature";
    }
}

TEST(Pack, covers_the_families_the_issue_lists) {
    std::map<std::string, int> per_family;
    for (const auto& signature : builtin_pack().signatures) {
        const auto family = signature.id.substr(3, signature.id.rfind('-') - 3);
        ++per_family[family];
    }
    for (const char* family :
         {"XMRIG",    "TREX",    "LOLMINER",  "NBMINER", "GMINER",  "TEAMRED",
          "SRBMINER", "BZMINER", "RIGEL",     "ONEZERO", "PHOENIX", "ETHMINER",
          "MINIZ",    "WILDRIG", "NANOMINER", "CCMINER", "CGMINER", "CPUMINER",
          "XMRSTAK",  "STRATUM", "POOL",      "PORT",    "PERSIST", "GPUABUSE"}) {
        EXPECT_GT(per_family[family], 0) << "no signature in family " << family;
    }
}

// Pool domain suffixes: web-mining script hosts (GG-POOL-0018) and donation
// hosts in other packs are domain patterns too, but not pools.
std::set<std::string> pool_domain_suffixes() {
    std::set<std::string> domains;
    for (const auto& signature : builtin_pack().signatures) {
        const bool pool = signature.id.rfind("GG-POOL-", 0) == 0 && signature.id != "GG-POOL-0018";
        for (const auto& pattern : signature.patterns) {
            if (pool && pattern.kind == PatternKind::kDomainSuffix) domains.insert(pattern.text);
        }
    }
    return domains;
}

TEST(Pack, has_at_least_100_pool_domain_suffixes_and_the_stratum_methods) {
    EXPECT_GE(pool_domain_suffixes().size(), 100u);
    auto matcher = Matcher::compile(builtin_pack().signatures);
    ASSERT_TRUE(matcher.ok());
    auto scanner = matcher->scanner();
    ASSERT_TRUE(scanner.ok());
    // Methods with their usual params: the Monero-dialect signatures look at
    // the params too, so a bare "login" from some web API does not match.
    const std::pair<const char*, const char*> requests[] = {
        {"mining.subscribe", "[\"cgminer/4.10\"]"},
        {"mining.authorize", "[\"w\",\"x\"]"},
        {"mining.submit", "[\"w\",\"1\",\"0\",\"5\",\"7\"]"},
        {"mining.notify", "[\"1\",\"ab\"]"},
        {"mining.set_difficulty", "[2]"},
        {"mining.set_target", "[\"00ff\"]"},
        {"mining.hello", "{\"agent\":\"m\"}"},
        {"eth_submitLogin", "[\"0xab\"]"},
        {"eth_submitWork", "[\"0x1\"]"},
        {"eth_submitHashrate", "[\"0x1\"]"},
        {"login", "{\"login\":\"4A\",\"pass\":\"x\"}"},
        {"submit", "{\"id\":\"1\",\"job_id\":\"2\",\"nonce\":\"3\"}"},
        {"job", "{\"blob\":\"07\",\"job_id\":\"4\"}"},
        {"keepalived", "{\"id\":\"1\"}"},
    };
    for (const auto& [method, params] : requests) {
        const std::string request = std::string("{\"id\":2,\"jsonrpc\":\"2.0\",\"method\":\"") +
                                    method + "\",\"params\":" + params + "}";
        EXPECT_FALSE(scanner->match(Field::kPayload, request).empty())
            << "no signature matches the stratum method " << method << ": " << request;
    }
}

std::string text_of(const std::string& relative) {
    std::ifstream in(std::string(GPUGUARD_SOURCE_DIR) + "/" + relative);
    EXPECT_TRUE(in) << relative;
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

// The numbers a `regex` with one number group finds in `text`, each at least once.
std::vector<size_t> stated(const std::string& text, const std::string& regex) {
    std::vector<size_t> numbers;
    const std::regex pattern(regex);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern);
         it != std::sregex_iterator(); ++it) {
        numbers.push_back(std::stoul((*it)[1].str()));
    }
    EXPECT_FALSE(numbers.empty()) << "the docs no longer state " << regex;
    return numbers;
}

// What the docs say of the pack, counted from the pack: signatures.md's
// total, its table (signatures per file, per family, the total row), the
// pool domain suffixes and YARA rules, and the summaries in README.md,
// rules.md and operations.md.
TEST(Pack, counts_the_docs_state_are_the_packs) {
    const Pack& pack = builtin_pack();
    const size_t total = pack.signatures.size();
    std::map<std::string, size_t> per_file, per_family;
    for (const auto& signature : pack.signatures) {
        const auto file = signature.source.substr(0, signature.source.find(':'));
        ++per_file[file.substr(file.rfind('/') + 1)];
        ++per_family[signature.id.substr(3, signature.id.rfind('-') - 3)];
    }
    auto yara = YaraScanner::compile(pack);
    ASSERT_TRUE(yara.ok()) << yara.error().message;

    const std::string page = text_of("docs/signatures.md");
    for (size_t n : stated(page, R"(\*\*(\d+) signatures\*\*)")) EXPECT_EQ(n, total);
    for (size_t n : stated(page, R"(\*\*(\d+) YARA rules\*\*)")) {
        EXPECT_EQ(n, yara->rule_names().size());
    }
    for (size_t n : stated(page, R"((\d+) pool domain suffixes)")) {
        EXPECT_EQ(n, pool_domain_suffixes().size());
    }
    for (size_t n : stated(page, R"(\| \| \| \*\*(\d+)\*\* \|)")) EXPECT_EQ(n, total);
    std::set<std::string> files_in_table;
    size_t families_checked = 0;
    const std::regex row(R"(\| `([a-z_]+\.yaml)` \| ([^|]*) \| (\d+) \|)");
    for (auto it = std::sregex_iterator(page.begin(), page.end(), row);
         it != std::sregex_iterator(); ++it) {
        const std::string file = (*it)[1].str();
        files_in_table.insert(file);
        EXPECT_EQ(std::stoul((*it)[3].str()), per_file[file]) << file;
        const std::string families = (*it)[2].str();
        const std::regex family_count(R"(\b([A-Z]{2,}) (\d+)\b)");
        for (auto f = std::sregex_iterator(families.begin(), families.end(), family_count);
             f != std::sregex_iterator(); ++f) {
            const std::string family = (*f)[1].str();
            if (!per_family.contains(family)) continue;  // "YARA 2": a kind, not a family
            ++families_checked;
            EXPECT_EQ(std::stoul((*f)[2].str()), per_family[family]) << file << ": " << family;
        }
    }
    for (const auto& [file, count] : per_file) {
        EXPECT_TRUE(files_in_table.contains(file)) << file << " (" << count << ") not in the table";
    }
    EXPECT_GE(families_checked, 20u);  // gpu_miners.yaml alone names 15

    const std::string readme = text_of("README.md");
    for (size_t n : stated(readme, R"((\d+) built-in miner and GPU-abuse signatures)")) {
        EXPECT_EQ(n, total);
    }
    for (size_t n : stated(readme, R"((\d+) pool domains)")) {
        EXPECT_EQ(n, pool_domain_suffixes().size());
    }
    for (size_t n : stated(text_of("docs/rules.md"), R"((\d+) signatures with stable ids)")) {
        EXPECT_EQ(n, total);
    }
    for (size_t n :
         stated(text_of("docs/operations.md"), R"((\d+) signatures in one Hyperscan database)")) {
        EXPECT_EQ(n, total);
    }
}

// The embedded copy is what ships; it must equal the pack on disk.
TEST(Pack, embedded_pack_equals_the_source_directory) {
    auto from_disk = load_pack_directory(GPUGUARD_SIGNATURES_DIR);
    ASSERT_TRUE(from_disk.ok()) << from_disk.error().message;
    ASSERT_EQ(from_disk->signatures.size(), builtin_pack().signatures.size());
    for (size_t i = 0; i < from_disk->signatures.size(); ++i) {
        EXPECT_EQ(from_disk->signatures[i].id, builtin_pack().signatures[i].id);
    }
    EXPECT_EQ(from_disk->yara_sources.size(), builtin_pack().yara_sources.size());
}

// One test per signature; a failing vector names the signature and the string.
// Each test compiles only its own signature (milliseconds; Hyperscan reports
// every pattern independently, so the result is the same as in the whole
// pack, whose compilation is tested above) and the pack's YARA rules.
class SignatureVectors : public ::testing::TestWithParam<size_t> {};

TEST_P(SignatureVectors, must_match_and_must_not_match) {
    const Signature& signature = builtin_pack().signatures.at(GetParam());
    auto matcher = Matcher::compile({signature});
    ASSERT_TRUE(matcher.ok()) << matcher.error().message;
    auto scanner = matcher->scanner();
    ASSERT_TRUE(scanner.ok());
    auto yara = YaraScanner::compile(builtin_pack());
    ASSERT_TRUE(yara.ok()) << yara.error().message;
    for (const auto& text : signature.must_match) {
        EXPECT_TRUE(testing::vector_matches(signature, text, *scanner, *yara))
            << signature.id << " (" << signature.source << ") does not match must-match vector \""
            << text << "\"";
    }
    for (const auto& text : signature.must_not_match) {
        EXPECT_FALSE(testing::vector_matches(signature, text, *scanner, *yara))
            << signature.id << " (" << signature.source << ") matches must-not-match vector \""
            << text << "\"";
    }
}

std::vector<size_t> signature_indexes() {
    std::vector<size_t> indexes(builtin_pack().signatures.size());
    for (size_t i = 0; i < indexes.size(); ++i) indexes[i] = i;
    return indexes;
}

INSTANTIATE_TEST_SUITE_P(BuiltinPack, SignatureVectors, ::testing::ValuesIn(signature_indexes()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                             std::string name = builtin_pack().signatures.at(info.param).id;
                             for (char& c : name) {
                                 if (c == '-') c = '_';
                             }
                             return name;
                         });

}  // namespace
}  // namespace gpuguard::signatures
