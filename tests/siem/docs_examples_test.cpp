// docs/outputs.md shows one example line per format and envelope. This test
// formats the same fixture records and compares them with the lines in the
// document, so the documentation cannot drift from the formatters. When a
// format changes on purpose, paste the "formatted" line it prints into the
// document.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpuguard/siem/siem.h"
#include "tests/siem/siem_fixtures.h"

namespace gpuguard::siem {
namespace {

std::string file_text(const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The one-line fenced code blocks of the "## Formats" section, in order.
std::vector<std::string> format_examples(const std::string& doc) {
    const size_t begin = doc.find("\n## Formats\n");
    const size_t end = doc.find("\n## ", begin + 1);
    std::vector<std::string> lines;
    if (begin == std::string::npos) return lines;
    size_t at = begin;
    for (;;) {
        const size_t fence = doc.find("\n```", at);
        if (fence == std::string::npos || fence >= end) break;
        const size_t body = doc.find('\n', fence + 1);
        const size_t close = doc.find("\n```", body);
        if (body == std::string::npos || close == std::string::npos) break;
        lines.push_back(doc.substr(body + 1, close - body - 1));
        at = close + 4;
    }
    return lines;
}

// The records the examples show: the test fixtures, the detection outside
// any container, the agent as pid 812.
Detection doc_detection() {
    Detection d = testing::test_detection();
    d.process.container_id.clear();
    d.process.container_runtime.clear();
    return d;
}

EnforcementOutcome doc_outcome() {
    EnforcementOutcome o = testing::test_outcome();
    o.process = doc_detection().process;
    return o;
}

std::string with_tab_marks(std::string line) {
    for (size_t at = line.find('\t'); at != std::string::npos; at = line.find('\t', at)) {
        line.replace(at, 1, "<TAB>");
    }
    return line;
}

TEST(DocsExamples, outputs_md_example_lines_are_what_the_formatters_print) {
    const auto examples = format_examples(file_text(GPUGUARD_SOURCE_DIR "/docs/outputs.md"));
    const HostInfo host = testing::test_host();
    const Detection d = doc_detection();
    SyslogOptions syslog;
    syslog.procid = "812";
    const struct {
        const char* what;
        std::string formatted;
    } expected[] = {
        {"ECS JSON detection", format_ecs_json(d, host)},
        {"ECS JSON enforcement outcome", format_ecs_json(doc_outcome(), host)},
        {"CEF detection", format_cef(d, host)},
        {"LEEF detection (<TAB> for tabs)", with_tab_marks(format_leef(d, host))},
        {"OCSF detection", format_ocsf(d, host)},
        {"RFC 5424 around CEF", format_syslog(Framing::kRfc5424, Format::kCef, d, host, syslog)},
        {"RFC 3164 around CEF", format_syslog(Framing::kRfc3164, Format::kCef, d, host, syslog)},
    };
    ASSERT_EQ(examples.size(), std::size(expected))
        << "docs/outputs.md: one fenced example per format in \"## Formats\"";
    for (size_t i = 0; i < examples.size(); ++i) {
        EXPECT_EQ(examples[i], expected[i].formatted)
            << "docs/outputs.md example " << i + 1 << " (" << expected[i].what
            << ") differs; formatted:\n"
            << expected[i].formatted;
    }
}

// The comparison itself is not blind: a document with one changed byte fails.
TEST(DocsExamples, a_changed_example_is_noticed) {
    std::string doc = file_text(GPUGUARD_SOURCE_DIR "/docs/outputs.md");
    const auto before = format_examples(doc);
    ASSERT_FALSE(before.empty());
    const size_t at = doc.find("\"risk_score\":80");
    ASSERT_NE(at, std::string::npos);
    doc.replace(at, 15, "\"risk_score\":81");
    const auto after = format_examples(doc);
    ASSERT_EQ(after.size(), before.size());
    EXPECT_NE(after[0], format_ecs_json(doc_detection(), testing::test_host()));
}

}  // namespace
}  // namespace gpuguard::siem
