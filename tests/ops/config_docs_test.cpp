// docs/configuration.md documents every key the agent accepts, by its full
// dotted path, and its complete example is the effective default.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpuguard/daemon/config.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuguard::testing::file_text;

// Dotted paths of the leaves of `config show` output (two-space indentation,
// one "key: value" or "key:" per line; lists are flow style, so leaves).
std::vector<std::string> leaf_keys(const std::string& yaml) {
    std::vector<std::string> keys, stack;
    std::istringstream in(yaml);
    for (std::string line; std::getline(in, line);) {
        const size_t indent = line.find_first_not_of(' ');
        const size_t colon = line.find(':');
        if (indent == std::string::npos || colon == std::string::npos) continue;
        stack.resize(indent / 2);
        const std::string key = line.substr(indent, colon - indent);
        std::string path;
        for (const auto& parent : stack) path += parent + ".";
        path += key;
        if (colon + 1 == line.size()) {
            stack.push_back(key);  // a map follows
        } else {
            keys.push_back(path);
        }
    }
    return keys;
}

TEST(ConfigDocs, every_key_is_documented_with_its_full_path) {
    auto defaults = gpuguard::agent::load_config_text(gpuguard::agent::default_config_yaml(), "d");
    ASSERT_TRUE(defaults) << defaults.error().message;
    const auto keys = leaf_keys(gpuguard::agent::config_to_yaml(*defaults));
    ASSERT_GT(keys.size(), 50u);
    const std::string docs = file_text(GPUGUARD_SOURCE_DIR "/docs/configuration.md");
    for (const auto& key : keys) {
        EXPECT_NE(docs.find("`" + key + "`"), std::string::npos)
            << key << " is not documented in docs/configuration.md";
    }
}

TEST(ConfigDocs, the_complete_example_is_the_effective_default) {
    auto defaults = gpuguard::agent::load_config_text(gpuguard::agent::default_config_yaml(), "d");
    ASSERT_TRUE(defaults) << defaults.error().message;
    const std::string docs = file_text(GPUGUARD_SOURCE_DIR "/docs/configuration.md");
    EXPECT_NE(docs.find("```yaml\n" + gpuguard::agent::config_to_yaml(*defaults) + "```"),
              std::string::npos)
        << "regenerate the example in docs/configuration.md with `gpuguard config show`";
}

// Keys of the first sink in `config show` output ("  - key:" then "    key:").
std::vector<std::string> sink_keys(const std::string& yaml) {
    std::vector<std::string> keys;
    std::istringstream in(yaml);
    bool in_sink = false;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("  - ", 0) == 0) {
            if (in_sink) break;  // the second sink
            in_sink = true;
            line = "    " + line.substr(4);
        }
        if (!in_sink) continue;
        if (line.rfind("    ", 0) != 0) break;
        keys.push_back(line.substr(4, line.find(':') - 4));
    }
    return keys;
}

// The section of `doc` from `from` up to the next line starting with `until`.
std::string section(const std::string& doc, const std::string& from, const std::string& until) {
    const size_t begin = doc.find(from);
    if (begin == std::string::npos) return "";
    return doc.substr(begin, doc.find(until, begin + from.size()) - begin);
}

TEST(ConfigDocs, every_sink_key_is_documented_in_both_docs) {
    auto config = gpuguard::agent::load_config_text(
        "outputs:\n  - name: s\n    type: tcp\n    address: c.example:514\n    framing: none\n",
        "s.yaml");
    ASSERT_TRUE(config) << config.error().message;
    const auto keys = sink_keys(gpuguard::agent::config_to_yaml(*config));
    ASSERT_GE(keys.size(), 29u) << "every field of siem::SinkConfig has a key";
    const std::string reference =
        section(file_text(GPUGUARD_SOURCE_DIR "/docs/configuration.md"), "### `outputs`", "\n### ");
    const std::string outputs =
        section(file_text(GPUGUARD_SOURCE_DIR "/docs/outputs.md"), "\n## Sinks", "\n## ");
    ASSERT_FALSE(reference.empty());
    ASSERT_FALSE(outputs.empty());
    for (const auto& key : keys) {
        EXPECT_NE(reference.find("| `" + key + "` |"), std::string::npos)
            << key << " has no row in the outputs table of docs/configuration.md";
        EXPECT_NE(outputs.find("`" + key + "`"), std::string::npos)
            << key << " is not in the sink table of docs/outputs.md";
    }
}

}  // namespace
