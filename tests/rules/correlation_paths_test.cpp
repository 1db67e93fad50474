// Correlation rule conditions about paths: the file and library-loading
// conditions as rule files write them (and their mistakes, named by
// file:line:col), and where an executable lives (exe_location), judged by
// package ownership and with the path's spelling undone.
#include <gtest/gtest.h>

#include "gpuguard/rules/correlation.h"

namespace gpuguard::rules {
namespace {

TEST(CorrelationRules, FileConditionsParseAndUnknownKindsAreNamed) {
    auto parsed = parse_correlation_rules(R"(rules:
  - id: F-1
    name: files
    severity: error
    when:
      file_changed: [preload, cron]
      library_injection: true
      persistence_after_detection: true
)",
                                          "files.yaml");
    ASSERT_TRUE(parsed) << parsed.error().message;
    const auto& rule = parsed->front();
    EXPECT_EQ(rule.file_changed, (std::vector<std::string>{"preload", "cron"}));
    EXPECT_TRUE(rule.library_injection);
    EXPECT_TRUE(rule.library_signs.empty()) << "true: any library nothing vouches for";
    EXPECT_TRUE(rule.persistence_after_detection);

    auto bad = parse_correlation_rules(R"(rules:
  - id: F-2
    name: files
    severity: error
    when:
      file_changed: [preload, crontab]
)",
                                       "files.yaml");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("files.yaml:6:31: rules[0] (F-2).when.file_changed: "
                                       "unknown kind 'crontab'"),
              std::string::npos)
        << bad.error().message;
}

TEST(CorrelationRules, LibraryInjectionTakesSignsAndNamesUnknownOnes) {
    auto parsed = parse_correlation_rules(R"(rules:
  - id: L-1
    name: libraries
    severity: error
    when:
      library_injection: [temporary, recently_written, writable_by_others, miner_signature]
)",
                                          "libs.yaml");
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_TRUE(parsed->front().library_injection);
    EXPECT_EQ(
        parsed->front().library_signs,
        (std::vector<LibrarySign>{LibrarySign::kTemporary, LibrarySign::kRecent,
                                  LibrarySign::kOthersCanWrite, LibrarySign::kMinerSignature}));
    for (const auto& [when, message] :
         {std::pair{"[temporary, fresh]",
                    "libs.yaml:6:38: rules[0] (L-2).when.library_injection: "
                    "unknown sign 'fresh'"},
          std::pair{"[]",
                    "libs.yaml:6:26: rules[0] (L-2).when.library_injection: name at least "
                    "one sign, or say true"}}) {
        auto bad = parse_correlation_rules(std::string(R"(rules:
  - id: L-2
    name: libraries
    severity: error
    when:
      library_injection: )") + when + "\n",
                                           "libs.yaml");
        ASSERT_FALSE(bad) << when;
        EXPECT_NE(bad.error().message.find(message), std::string::npos) << bad.error().message;
    }
}

TEST(CorrelationRules, SustainedUtilizationByEveryMeanOrAPercentile) {
    const auto parse = [](const std::string& by) {
        return parse_correlation_rules(R"(rules:
  - id: U-1
    name: busy
    severity: warning
    when:
      sustained_utilization: {above_percent: 50, by: )" +
                                           by + R"(, for: 2m}
)",
                                       "busy.yaml");
    };
    auto parsed = parse("p10");
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_EQ(parsed->front().sustained_utilization->by,
              gpuguard::rules::UtilizationStatistic::kPercentile);
    EXPECT_EQ(parsed->front().sustained_utilization->percentile, 10);
    parsed = parse("mean");
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_EQ(parsed->front().sustained_utilization->by,
              gpuguard::rules::UtilizationStatistic::kMean);
    parsed = parse("every");
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_EQ(parsed->front().sustained_utilization->by,
              gpuguard::rules::UtilizationStatistic::kEvery);
    for (const char* bad : {"p0", "p100", "median", "p10x", "p+10"}) {
        auto rejected = parse(bad);
        ASSERT_FALSE(rejected) << bad;
        EXPECT_NE(rejected.error().message.find(
                      "busy.yaml:6:54: rules[0] (U-1).when.sustained_utilization.by: must be "
                      "every, mean or a percentile p1..p99"),
                  std::string::npos)
            << rejected.error().message;
    }
}

TEST(CorrelationRules, ExeLocationsByPathPackageAndSpelling) {
    EXPECT_EQ(exe_locations("/tmp/x"), std::vector<ExeLocation>{ExeLocation::kTmp});
    EXPECT_EQ(exe_locations("/memfd:x (deleted)"), std::vector<ExeLocation>{ExeLocation::kMemfd});
    // A package upgrade replaced a running daemon's file: where the package
    // database owns the path, not by the directory alone; never /usr/local.
    EXPECT_EQ(exe_locations("/usr/bin/a (deleted)", "dpkg:a"),
              std::vector<ExeLocation>{ExeLocation::kPackageReplaced});
    EXPECT_EQ(exe_locations("/usr/bin/a (deleted)"),
              std::vector<ExeLocation>{ExeLocation::kDeleted});
    EXPECT_EQ(exe_locations("/usr/local/bin/a (deleted)", "dpkg:a"),
              std::vector<ExeLocation>{ExeLocation::kDeleted});
    // Judged with the spelling undone: "//", "..", /proc/self/root.
    for (const char* spelled :
         {"//tmp/x", "/tmp/./x", "/var/lib/../../tmp/x", "/proc/self/root/tmp/x",
          "/proc/4242/root//tmp/x", "/proc/thread-self/root/proc/self/root/tmp/x"}) {
        EXPECT_EQ(exe_locations(spelled), std::vector<ExeLocation>{ExeLocation::kTmp}) << spelled;
    }
    EXPECT_EQ(exe_locations("/proc/self/root/dev/shm/x (deleted)"),
              (std::vector<ExeLocation>{ExeLocation::kDevShm, ExeLocation::kDeleted}));
    EXPECT_TRUE(exe_locations("/tmp/../usr/bin/x").empty());
    EXPECT_TRUE(exe_locations("/proc/self/rootx/tmp/x").empty());
    EXPECT_EQ(exe_locations("/opt/app/a (deleted)"),
              std::vector<ExeLocation>{ExeLocation::kDeleted});
    EXPECT_EQ(exe_locations("/tmp/x (deleted)"),
              (std::vector<ExeLocation>{ExeLocation::kTmp, ExeLocation::kDeleted}));
    EXPECT_EQ(exe_locations("/var/tmp/x"), std::vector<ExeLocation>{ExeLocation::kVarTmp});
    EXPECT_EQ(exe_locations("/dev/shm/x"), std::vector<ExeLocation>{ExeLocation::kDevShm});
    // Legitimate look-alikes, recognised by path.
    EXPECT_EQ(exe_locations("/tmp/.mount_Krita9x/usr/bin/krita"),
              std::vector<ExeLocation>{ExeLocation::kAppImage});
    EXPECT_EQ(exe_locations("/tmp/_MEI12345/app (deleted)"),
              std::vector<ExeLocation>{ExeLocation::kExtractedRuntime});
    EXPECT_EQ(exe_locations("/tmp/onefile_811_1700000000_123/app"),
              std::vector<ExeLocation>{ExeLocation::kExtractedRuntime});
    EXPECT_EQ(exe_locations("/tmp/ollama2837/runners/cuda_v12/ollama_llama_server"),
              std::vector<ExeLocation>{ExeLocation::kExtractedRuntime});
    EXPECT_EQ(exe_locations("/tmp/ollama2837/xmrig"), std::vector<ExeLocation>{ExeLocation::kTmp});
    EXPECT_EQ(exe_locations("/tmp/_MEI12345"), std::vector<ExeLocation>{ExeLocation::kTmp});
    EXPECT_TRUE(exe_locations("/home/u/tmp/x").empty());
}

TEST(CorrelationRules, LookAlikeClaimsNameTheirDirectoryAndARefusalMakesThemTemporary) {
    const auto claim = [](std::string_view exe) {
        const auto found = look_alike_claim(exe);
        return found ? std::string(to_string(found->kind)) + " " + found->dir : std::string("-");
    };
    EXPECT_EQ(claim("/tmp/.mount_Krita9x/usr/bin/krita"), "AppImage /tmp/.mount_Krita9x");
    EXPECT_EQ(claim("/tmp/_MEI12345/app (deleted)"), "PyInstaller /tmp/_MEI12345");
    EXPECT_EQ(claim("/proc/self/root/var/tmp/_MEIab/x"), "PyInstaller /var/tmp/_MEIab");
    EXPECT_EQ(claim("/tmp/onefile_811_1700000000_123/app"),
              "Nuitka /tmp/onefile_811_1700000000_123");
    EXPECT_EQ(claim("/dev/shm/staticx-AbCd/prog"), "staticx /dev/shm/staticx-AbCd");
    EXPECT_EQ(claim("/tmp/ollama2837/runners/cuda_v12/ollama_llama_server"),
              "Ollama /tmp/ollama2837");
    EXPECT_EQ(claim("/tmp/ollama2837/xmrig"), "-");
    EXPECT_EQ(claim("/tmp/.mount_x"), "-");  // the mount point itself runs nothing
    EXPECT_EQ(claim("/tmp/x"), "-");
    EXPECT_EQ(claim("/opt/_MEI1/x"), "-");

    // Refused: the location is the temporary (or deleted) one it is.
    EXPECT_EQ(exe_locations("/tmp/.mount_Krita9x/usr/bin/krita", "", true),
              std::vector<ExeLocation>{ExeLocation::kTmp});
    EXPECT_EQ(exe_locations("/dev/shm/_MEI1/x (deleted)", "", true),
              (std::vector<ExeLocation>{ExeLocation::kDevShm, ExeLocation::kDeleted}));
    EXPECT_EQ(exe_locations("/var/tmp/onefile_1_2/app", "", true),
              std::vector<ExeLocation>{ExeLocation::kVarTmp});
    // A refusal changes nothing elsewhere.
    EXPECT_EQ(exe_locations("/tmp/x", "", true), std::vector<ExeLocation>{ExeLocation::kTmp});
    EXPECT_TRUE(exe_locations("/usr/bin/x", "", true).empty());
}

}  // namespace
}  // namespace gpuguard::rules
