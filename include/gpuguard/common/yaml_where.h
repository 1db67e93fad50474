// Where a YAML node stands, as every reader of a YAML file (the agent
// config, rule files, signature packs) names it in its errors. Header-only:
// include it only where yaml-cpp is used.
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

namespace gpuguard {

// "file:line:col" of `node` (1-based), or `file` alone for a node without a
// position (one that is not in the document).
inline std::string yaml_where(const std::string& file, const YAML::Node& node) {
    const YAML::Mark mark = node.Mark();
    std::string where = file;
    if (mark.line < 0) return where;
    // Appended piece by piece: `":" + std::string&&` trips GCC 12's
    // -Wrestrict false positive at -O3.
    where += ':';
    where += std::to_string(mark.line + 1);
    where += ':';
    where += std::to_string(mark.column + 1);
    return where;
}

// "file:line" of `node` (1-based): a rule's or signature's place in its file.
inline std::string yaml_line(const std::string& file, const YAML::Node& node) {
    std::string where = file;
    where += ':';
    where += std::to_string(node.Mark().line + 1);
    return where;
}

}  // namespace gpuguard
