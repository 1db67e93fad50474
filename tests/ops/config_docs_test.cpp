// docs/configuration.md documents every key the agent accepts, by its full
// dotted path, and its complete example is the effective default.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agent/config.h"

namespace {

std::string file_text(const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

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

}  // namespace
