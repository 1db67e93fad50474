// What rule_file_reader.cpp reads out of one miner-rules.yaml file, before
// RuleSet::build (rule_set.cpp) checks it against the built-in pack and the
// other files and merges it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "gpuguard/rules/rules.h"
#include "rules/yaml_diagnostics.h"

namespace gpuguard::rules {

struct ParsedRule {
    EffectiveSignature effective;
    std::optional<Action> action;  // unset: the default action
    YAML::Node id_node;  // the id, or the rule when its id is derived (effective.id_derived)
    std::vector<std::pair<std::string, YAML::Node>> must_match, must_not_match;
};

struct Override {
    std::string id;
    std::optional<Severity> severity;
    std::optional<double> confidence;
    std::optional<Action> action;
    std::string origin;
    YAML::Node node;
};

struct ParsedFile {
    std::vector<ParsedRule> rules;
    std::vector<std::pair<std::string, YAML::Node>> disable;
    std::vector<Override> overrides;
    Allowlist allowlist;
    std::vector<std::string> known_bad_sha256;
    std::optional<double> hash_rate;
    std::optional<Action> default_action;
};

// One file's rules, disables, overrides and settings; problems go to `diag`.
ParsedFile parse_file(Diagnostics& diag, const RuleFile& file);

// A port number from 1 to 65535, all of `text`.
std::optional<uint16_t> parse_port(const std::string& text);

}  // namespace gpuguard::rules
