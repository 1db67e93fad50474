// Reading one miner-rules.yaml file (rules/rule_file_reader.h): its rules with
// their patterns and test vectors, signature disables and overrides, the
// allowlist and settings; and the action and hash-rate values it names. Every
// problem is collected (not just the first) and reported as "file:line:col:
// message", where the position is the offending YAML node.
#include "rules/rule_file_reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include <yaml-cpp/yaml.h>

#include "gpuguard/common/sha256.h"
#include "gpuguard/rules/rules.h"
#include "rules/yaml_diagnostics.h"

namespace gpuguard::rules {

std::optional<uint16_t> parse_port(const std::string& text) {
    char* end = nullptr;
    const long value = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || value < 1 || value > 65535) return std::nullopt;
    return static_cast<uint16_t>(value);
}

namespace {

using signatures::Anchor;
using signatures::Pattern;
using signatures::PatternKind;
using signatures::Signature;

std::optional<double> parse_confidence(const std::string& text) {
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(value >= 0 && value <= 1)) return std::nullopt;
    return value;
}

bool is_sha256(const std::string& text) {
    return text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// One pattern list entry: a string (the key's default kind) or a mapping
// {regex|literal|glob: TEXT, caseless: BOOL, anchor: none|start|end|both}.
void read_pattern(Diagnostics& diag, const YAML::Node& node, const std::string& path, Field field,
                  PatternKind kind, Signature& signature) {
    Pattern pattern;
    pattern.field = field;
    pattern.kind = kind;
    pattern.caseless = kind == PatternKind::kGlob || kind == PatternKind::kDomainSuffix;
    if (node.IsScalar()) {
        pattern.text = node.Scalar();
    } else if (node.IsMap() && kind != PatternKind::kDomainSuffix) {
        if (!diag.check_keys(node, path, {"regex", "literal", "glob", "caseless", "anchor"}))
            return;
        int kinds = 0;
        for (const auto& [key, value] :
             {std::pair{"regex", PatternKind::kRegex}, std::pair{"literal", PatternKind::kLiteral},
              std::pair{"glob", PatternKind::kGlob}}) {
            if (const auto text = node[key]) {
                ++kinds;
                pattern.kind = value;
                pattern.text = diag.scalar(text, path + "." + key).value_or("");
            }
        }
        if (kinds != 1) {
            diag.error(node, path + ": needs exactly one of regex, literal, glob");
            return;
        }
        if (const auto flag = node["caseless"]) {
            const auto text = diag.scalar(flag, path + ".caseless", "true or false");
            if (text && *text != "true" && *text != "false") {
                diag.error(flag, path + ".caseless: must be true or false, not '" + *text + "'");
            } else if (text) {
                pattern.caseless = *text == "true";
            }
        }
        if (const auto anchor = node["anchor"]) {
            const auto text = diag.scalar(anchor, path + ".anchor").value_or("");
            const std::map<std::string, Anchor> anchors = {{"none", Anchor::kNone},
                                                           {"start", Anchor::kStart},
                                                           {"end", Anchor::kEnd},
                                                           {"both", Anchor::kBoth}};
            if (const auto it = anchors.find(text); it != anchors.end()) {
                pattern.anchor = it->second;
            } else {
                diag.error(anchor, path + ".anchor: must be none, start, end or both");
            }
        }
    } else {
        diag.error(node,
                   path + ": must be a string" +
                       std::string(kind == PatternKind::kDomainSuffix ? "" : " or a mapping"));
        return;
    }
    if (pattern.text.empty()) {
        diag.error(node, path + ": empty pattern");
        return;
    }
    if (pattern.kind == PatternKind::kRegex || pattern.kind == PatternKind::kGlob) {
        const auto status =
            signatures::check_regex(signatures::pattern_expression(pattern), pattern.caseless);
        if (!status.ok()) {
            diag.error(node, path + ": bad " +
                                 (pattern.kind == PatternKind::kGlob ? "glob" : "regex") + " '" +
                                 pattern.text + "': " + status.error().message);
            return;
        }
    }
    if (pattern.kind == PatternKind::kDomainSuffix &&
        pattern.text.find_first_of(" /:*") != std::string::npos) {
        diag.error(node, path + ": '" + pattern.text +
                             "' is not a domain suffix (write pool.example, no scheme, port or *)");
        return;
    }
    signature.patterns.push_back(std::move(pattern));
}

struct PatternKey {
    const char* name;
    Field field;
    PatternKind kind;
};
constexpr PatternKey kPatternKeys[] = {
    {"process_name", Field::kProcess, PatternKind::kGlob},
    {"exe_path", Field::kProcess, PatternKind::kRegex},
    {"cmdline", Field::kCmdline, PatternKind::kRegex},
    {"config", Field::kConfig, PatternKind::kRegex},
    {"pool_domains", Field::kDomain, PatternKind::kDomainSuffix},
    {"payload", Field::kPayload, PatternKind::kRegex},
};

// What a derived id is made from: each pattern as written, under its key.
struct IdBasis {
    std::string text;     // hashed into the id
    std::string summary;  // the rule's name: "process_name miner*"
};

// A pattern key's value: one pattern (a string, or a mapping as in a list)
// or a list of them. GPU Kill's files write `process_name: "miner*"`.
void read_patterns(Diagnostics& diag, const YAML::Node& map, const std::string& path,
                   const PatternKey& key, Signature& signature, IdBasis& basis) {
    const YAML::Node value = map[key.name];
    const size_t before = signature.patterns.size();
    if (value.IsNull()) {
        diag.error(Diagnostics::key_of(map, key.name),
                   path + ": is empty (give a pattern or a list of patterns)");
    } else if (value.IsSequence()) {
        for (size_t i = 0; i < value.size(); ++i) {
            read_pattern(diag, value[i], path + "[" + std::to_string(i) + "]", key.field, key.kind,
                         signature);
        }
    } else if (value.IsScalar() && key.kind == PatternKind::kGlob &&
               value.Scalar().find(',') != std::string::npos &&
               value.Scalar().find('[') == std::string::npos) {
        // "miner*, xmrig" is two names meant as a list, never a process name.
        diag.error(value, path + ": '" + value.Scalar() +
                              "' holds a comma: write several names as a list, [a, b]");
    } else {
        read_pattern(diag, value, path, key.field, key.kind, signature);
    }
    for (size_t i = before; i < signature.patterns.size(); ++i) {
        const auto& pattern = signature.patterns[i];
        basis.text += std::string(key.name) + '\0' +
                      std::to_string(static_cast<int>(pattern.kind)) +
                      (pattern.caseless ? "i" : "c") +
                      std::to_string(static_cast<int>(pattern.anchor)) + '\0' + pattern.text + '\n';
        basis.summary +=
            (basis.summary.empty() ? "" : "; ") + std::string(key.name) + " " + pattern.text;
    }
}

// "local-<file stem>-<8 hex digits of sha256 of the patterns>": a rule
// without an id gets the same one on every load and every host, and a
// different one when its patterns change.
std::string derived_id(const std::string& file, const IdBasis& basis) {
    std::string stem = std::filesystem::path(file).stem().string();
    for (char& c : stem) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
            c = '-';
        }
    }
    return "local-" + stem + "-" + sha256_hex(basis.text).substr(0, 8);
}

// A rule with the defaults; `node` is where it was written.
ParsedRule new_rule(Diagnostics& diag, const YAML::Node& node) {
    ParsedRule rule;
    Signature& signature = rule.effective.signature;
    signature.severity = Severity::kCritical;
    signature.confidence = 0.8;
    signature.mitre = "T1496";
    rule.effective.origin = diag.line_of(node);
    signature.source = rule.effective.origin;
    return rule;
}

// Gives a rule written without an id its derived id (and that as its name
// when it has none).
void derive_id(Diagnostics& diag, const YAML::Node& node, const IdBasis& basis, ParsedRule& rule) {
    Signature& signature = rule.effective.signature;
    signature.id = derived_id(diag.file(), basis);
    if (signature.name.empty()) signature.name = basis.summary;
    rule.id_node.reset(node);
    rule.effective.id_derived = true;
}

void read_rule(Diagnostics& diag, const YAML::Node& node, const std::string& path,
               ParsedFile& file) {
    if (!diag.check_keys(node, path,
                         {"id", "name", "description", "severity", "confidence", "mitre", "action",
                          "process_name", "exe_path", "cmdline", "config", "pool_domains",
                          "pool_ports", "payload", "tests"})) {
        return;
    }
    ParsedRule rule = new_rule(diag, node);
    Signature& signature = rule.effective.signature;
    if (const auto id = node["id"]) {
        rule.id_node.reset(id);
        signature.id = diag.scalar(id, path + ".id").value_or("");
        if (signature.id.starts_with("GG-")) {
            diag.error(id, path + ".id: '" + signature.id +
                               "': ids starting with GG- are reserved for the built-in pack");
        } else if (!signature.id.empty() &&
                   signature.id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU"
                                                  "VWXYZ0123456789_.-") != std::string::npos) {
            diag.error(id, path + ".id: '" + signature.id +
                               "' may only contain letters, digits, '_', '.' and '-'");
        }
    }
    const std::string where = path + (signature.id.empty() ? "" : " (" + signature.id + ")");
    signature.name = signature.id;
    if (const auto name = node["name"])
        signature.name = diag.scalar(name, where + ".name").value_or("");
    if (const auto text = node["description"]) {
        signature.description = diag.scalar(text, where + ".description").value_or("");
    }
    if (const auto text = node["mitre"])
        signature.mitre = diag.scalar(text, where + ".mitre").value_or("");
    if (const auto severity = node["severity"]) {
        const auto text = diag.scalar(severity, where + ".severity").value_or("");
        if (auto parsed = signatures::parse_severity(text)) {
            signature.severity = *parsed;
        } else {
            diag.error(severity, where + ".severity: '" + text +
                                     "' is not one of emergency, alert, critical, error, warning, "
                                     "notice, info, debug");
        }
    }
    if (const auto confidence = node["confidence"]) {
        const auto text = diag.scalar(confidence, where + ".confidence", "a number").value_or("");
        if (auto value = parse_confidence(text)) {
            signature.confidence = *value;
        } else {
            diag.error(confidence,
                       where + ".confidence: '" + text + "' is not a number from 0 to 1");
        }
    }
    if (const auto action = node["action"]) {
        const auto text = diag.scalar(action, where + ".action").value_or("");
        rule.action = parse_action(text);
        if (!rule.action) {
            diag.error(action, where + ".action: '" + text +
                                   "' is not one of alert, kill, kill_now, block_ip, deny_gpu");
        }
    }
    const size_t errors_before = diag.count();
    IdBasis basis;
    for (const auto& key : kPatternKeys) {
        if (node[key.name])
            read_patterns(diag, node, where + "." + key.name, key, signature, basis);
    }
    if (const auto ports = node["pool_ports"]) {
        for (const auto& [text, item] : diag.scalar_or_list(ports, where + ".pool_ports")) {
            if (auto port = parse_port(text)) {
                signature.ports.push_back(*port);
                basis.text += std::string("pool_ports") + '\0' + text + '\n';
                basis.summary += (basis.summary.empty() ? "" : "; ") + ("pool_ports " + text);
            } else {
                diag.error(item, where + ".pool_ports: '" + text + "' is not a port (1-65535)");
            }
        }
    }
    const bool any_match_key =
        std::any_of(std::begin(kPatternKeys), std::end(kPatternKeys),
                    [&](const PatternKey& key) { return static_cast<bool>(node[key.name]); }) ||
        node["pool_ports"];
    if (!any_match_key) {
        diag.error(node, where +
                             ": matches nothing (give process_name, exe_path, cmdline, config, "
                             "pool_domains, pool_ports or payload)");
    }
    // A rule whose patterns are wrong gets no id: it is reported, not loaded.
    if (!node["id"] && any_match_key && diag.count() == errors_before) {
        derive_id(diag, node, basis, rule);
    }
    if (const auto tests = node["tests"]) {
        if (diag.check_keys(tests, where + ".tests", {"match", "no_match"})) {
            if (const auto list = tests["match"]) {
                rule.must_match = diag.scalar_list(list, where + ".tests.match");
            }
            if (const auto list = tests["no_match"]) {
                rule.must_not_match = diag.scalar_list(list, where + ".tests.no_match");
            }
        }
    }
    file.rules.push_back(std::move(rule));
}

// The top level's `process_name:` (a pattern or a list, as GPU Kill's files
// write it): one rule on the process name, with the file's defaults and the
// default action, and a derived id.
void read_process_name_shorthand(Diagnostics& diag, const YAML::Node& root, ParsedFile& file) {
    const YAML::Node value = root["process_name"];
    ParsedRule rule = new_rule(diag, value);
    const size_t errors_before = diag.count();
    IdBasis basis;
    read_patterns(diag, root, "process_name", kPatternKeys[0], rule.effective.signature, basis);
    if (diag.count() != errors_before) return;
    if (rule.effective.signature.patterns.empty()) {
        diag.error(value, "process_name: an empty list matches nothing");
        return;
    }
    derive_id(diag, value, basis, rule);
    file.rules.push_back(std::move(rule));
}

void read_signatures_section(Diagnostics& diag, const YAML::Node& node, ParsedFile& file) {
    if (!diag.check_keys(node, "signatures", {"disable", "override"})) return;
    if (const auto list = node["disable"])
        file.disable = diag.scalar_list(list, "signatures.disable");
    const auto list = node["override"];
    if (!list) return;
    if (!list.IsSequence()) {
        diag.error(list, "signatures.override: must be a list");
        return;
    }
    for (size_t i = 0; i < list.size(); ++i) {
        const auto item = list[i];
        const std::string path = "signatures.override[" + std::to_string(i) + "]";
        if (!diag.check_keys(item, path, {"id", "severity", "confidence", "action"})) continue;
        Override entry;
        entry.node.reset(item);
        entry.origin = diag.line_of(item);
        if (const auto id = item["id"]) {
            entry.id = diag.scalar(id, path + ".id").value_or("");
            entry.node.reset(id);
        } else {
            diag.error(item, path + ": missing required key 'id'");
            continue;
        }
        if (const auto severity = item["severity"]) {
            const auto text = diag.scalar(severity, path + ".severity").value_or("");
            entry.severity = signatures::parse_severity(text);
            if (!entry.severity) {
                diag.error(severity, path + ".severity: '" + text +
                                         "' is not one of emergency, alert, critical, error, "
                                         "warning, notice, info, debug");
            }
        }
        if (const auto confidence = item["confidence"]) {
            const auto text =
                diag.scalar(confidence, path + ".confidence", "a number").value_or("");
            entry.confidence = parse_confidence(text);
            if (!entry.confidence) {
                diag.error(confidence,
                           path + ".confidence: '" + text + "' is not a number from 0 to 1");
            }
        }
        if (const auto action = item["action"]) {
            const auto text = diag.scalar(action, path + ".action").value_or("");
            entry.action = parse_action(text);
            if (!entry.action) {
                diag.error(action, path + ".action: '" + text +
                                       "' is not one of alert, kill, kill_now, block_ip, deny_gpu");
            }
        }
        if (!item["severity"] && !item["confidence"] && !item["action"]) {
            diag.error(item, path + ": changes nothing (give severity, confidence or action)");
        }
        file.overrides.push_back(std::move(entry));
    }
}

void read_allowlist(Diagnostics& diag, const YAML::Node& node, Allowlist& allowlist) {
    if (!diag.check_keys(node, "allowlist", {"users", "exe_paths", "sha256", "containers"})) return;
    auto take = [&](const char* key, std::vector<std::string>& out) {
        if (const auto list = node[key]) {
            for (auto& [text, item] : diag.scalar_list(list, std::string("allowlist.") + key)) {
                if (std::string_view(key) == "sha256" && !is_sha256(text)) {
                    diag.error(item,
                               "allowlist.sha256: '" + text + "' is not 64 lowercase hex digits");
                    continue;
                }
                if (std::string_view(key) == "exe_paths" && !text.starts_with("/")) {
                    diag.error(item, "allowlist.exe_paths: '" + text + "' is not an absolute path");
                    continue;
                }
                out.push_back(text);
            }
        }
    };
    take("users", allowlist.users);
    take("exe_paths", allowlist.exe_paths);
    take("sha256", allowlist.sha256);
    take("containers", allowlist.containers);
}

void read_root(Diagnostics& diag, const YAML::Node& root, ParsedFile& parsed) {
    if (!diag.check_keys(root, "",
                         {"rules", "process_name", "allowlist", "signatures", "known_bad",
                          "hash_rate_threshold", "default_action"})) {
        return;
    }
    if (const auto known_bad = root["known_bad"];
        known_bad && diag.check_keys(known_bad, "known_bad", {"sha256"}) && known_bad["sha256"]) {
        for (auto& [text, item] : diag.scalar_list(known_bad["sha256"], "known_bad.sha256")) {
            if (!is_sha256(text)) {
                diag.error(item, "known_bad.sha256: '" + text + "' is not 64 lowercase hex digits");
                continue;
            }
            parsed.known_bad_sha256.push_back(text);
        }
    }
    if (const auto threshold = root["hash_rate_threshold"]) {
        const auto text = diag.scalar(threshold, "hash_rate_threshold", "a hash rate").value_or("");
        auto rate = parse_hash_rate(text);
        if (rate) {
            parsed.hash_rate = *rate;
        } else if (threshold.IsScalar()) {
            diag.error(threshold, "hash_rate_threshold: " + rate.error().message);
        }
    }
    if (const auto action = root["default_action"]) {
        const auto text = diag.scalar(action, "default_action").value_or("");
        parsed.default_action = parse_action(text);
        if (!parsed.default_action) {
            diag.error(action, "default_action: '" + text +
                                   "' is not one of alert, kill, kill_now, block_ip, deny_gpu");
        }
    }
    if (root["process_name"]) read_process_name_shorthand(diag, root, parsed);
    if (const auto list = root["rules"]) {
        if (!list.IsSequence()) {
            diag.error(list, "rules: must be a list");
        } else {
            for (size_t i = 0; i < list.size(); ++i) {
                read_rule(diag, list[i], "rules[" + std::to_string(i) + "]", parsed);
            }
        }
    }
    if (const auto section = root["signatures"]) read_signatures_section(diag, section, parsed);
    if (const auto section = root["allowlist"]) read_allowlist(diag, section, parsed.allowlist);
}

}  // namespace

ParsedFile parse_file(Diagnostics& diag, const RuleFile& file) {
    ParsedFile parsed;
    YAML::Node root;
    try {
        root = YAML::Load(file.text);
    } catch (const YAML::ParserException& error) {
        diag.error_at(error.mark.line, error.mark.column, "YAML syntax error: " + error.msg);
        return parsed;
    }
    if (root.IsNull()) return parsed;  // empty file: nothing to add
    try {
        read_root(diag, root, parsed);
    } catch (const YAML::Exception& error) {
        // Not expected (every access is checked first), but never let it escape.
        diag.error_at(error.mark.line, error.mark.column, error.msg);
    }
    return parsed;
}

const char* to_string(Action action) {
    switch (action) {
        case Action::kAlert:
            return "alert";
        case Action::kKill:
            return "kill";
        case Action::kKillNow:
            return "kill_now";
        case Action::kBlockIp:
            return "block_ip";
        case Action::kDenyGpu:
            return "deny_gpu";
    }
    return "unknown";
}

std::optional<Action> parse_action(std::string_view name) {
    for (auto action :
         {Action::kAlert, Action::kKill, Action::kKillNow, Action::kBlockIp, Action::kDenyGpu}) {
        if (name == to_string(action)) return action;
    }
    return std::nullopt;
}

Result<double> parse_hash_rate(std::string_view text) {
    const std::string input(text);
    char* end = nullptr;
    const double number = std::strtod(input.c_str(), &end);
    std::string_view unit(end);
    while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    static constexpr std::pair<std::string_view, double> kUnits[] = {
        {"H/s", 1}, {"kH/s", 1e3}, {"MH/s", 1e6}, {"GH/s", 1e9}, {"TH/s", 1e12}};
    if (end == input.c_str() || !std::isfinite(number) || number <= 0) {
        return fail(ErrorCode::kInvalidArgument,
                    "'" + input +
                        "' is not a hash rate (a positive number and a unit: H/s, kH/s, "
                        "MH/s, GH/s or TH/s, e.g. 100MH/s)");
    }
    for (const auto& [name, scale] : kUnits) {
        if (unit == name) return number * scale;
    }
    return fail(ErrorCode::kInvalidArgument,
                "'" + input + "': unknown unit '" + std::string(unit) +
                    "' (use H/s, kH/s, MH/s, GH/s or TH/s, e.g. 100MH/s)");
}

}  // namespace gpuguard::rules
