// Diagnostics for the rules library's YAML readers: every problem is
// collected (not just the first) as "file:line:col: message", positioned at
// the offending node, and reported in file order.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "gpuguard/common/yaml_where.h"

namespace gpuguard::rules {

class Diagnostics {
  public:
    explicit Diagnostics(std::string file) : file_(std::move(file)) {}

    const std::string& file() const { return file_; }
    std::string where(const YAML::Node& node) const { return yaml_where(file_, node); }
    std::string line_of(const YAML::Node& node) const { return yaml_line(file_, node); }
    void error(const YAML::Node& node, const std::string& message) {
        const YAML::Mark mark = node.Mark();
        errors_.push_back({mark.line, mark.column, where(node) + ": " + message});
    }
    void error_at(int line, int column, const std::string& message) {
        errors_.push_back({line, column,
                           file_ + ":" + std::to_string(line + 1) + ":" +
                               std::to_string(column + 1) + ": " + message});
    }
    // The problems in file order (line, then column).
    std::vector<std::string> sorted_errors() const {
        auto sorted = errors_;
        std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
            return std::tie(a.line, a.column) < std::tie(b.line, b.column);
        });
        std::vector<std::string> out;
        for (auto& entry : sorted) out.push_back(std::move(entry.text));
        return out;
    }

    size_t count() const { return errors_.size(); }

    // The key node of `name` in `map` (for a position when its value is
    // empty: yaml-cpp places an empty value where the next token starts).
    static YAML::Node key_of(const YAML::Node& map, const std::string& name) {
        for (const auto& entry : map) {
            if (entry.first.Scalar() == name) return entry.first;
        }
        return map;
    }

    // Reports keys of `map` outside `allowed`; false when `map` is not a map.
    bool check_keys(const YAML::Node& map, const std::string& path,
                    std::initializer_list<const char*> allowed) {
        return check_keys(map, path, std::span<const char* const>(allowed.begin(), allowed.size()));
    }
    bool check_keys(const YAML::Node& map, const std::string& path,
                    std::span<const char* const> allowed) {
        if (!map.IsMap()) {
            error(map, (path.empty() ? "top level" : path) + ": must be a mapping");
            return false;
        }
        for (const auto& entry : map) {
            const std::string key = entry.first.Scalar();
            if (std::none_of(allowed.begin(), allowed.end(),
                             [&](const char* name) { return key == name; })) {
                std::string known;
                for (const char* name : allowed)
                    known += (known.empty() ? "" : ", ") + std::string(name);
                error(entry.first, (path.empty() ? "" : path + ": ") + "unknown key '" + key +
                                       "' (known: " + known + ")");
            }
        }
        return true;
    }

    std::optional<std::string> scalar(const YAML::Node& node, const std::string& path,
                                      const char* type = "a string") {
        if (!node.IsScalar()) {
            error(node, path + ": must be " + type);
            return std::nullopt;
        }
        return node.Scalar();
    }

    // A list of scalars; a single scalar is an error (it hides typos like "a, b").
    std::vector<std::pair<std::string, YAML::Node>> scalar_list(const YAML::Node& node,
                                                                const std::string& path) {
        std::vector<std::pair<std::string, YAML::Node>> out;
        if (!node.IsSequence()) {
            error(node, path + ": must be a list");
            return out;
        }
        for (size_t i = 0; i < node.size(); ++i) {
            if (auto text = scalar(node[i], path + "[" + std::to_string(i) + "]")) {
                out.emplace_back(*text, node[i]);
            }
        }
        return out;
    }

    // A list of scalars, or one scalar standing for a list of one (for keys
    // whose entries cannot hold a separator, such as port numbers).
    std::vector<std::pair<std::string, YAML::Node>> scalar_or_list(const YAML::Node& node,
                                                                   const std::string& path) {
        if (!node.IsScalar()) return scalar_list(node, path);
        return {{node.Scalar(), node}};
    }

  private:
    struct Entry {
        int line;
        int column;
        std::string text;
    };
    std::string file_;
    std::vector<Entry> errors_;
};

}  // namespace gpuguard::rules
