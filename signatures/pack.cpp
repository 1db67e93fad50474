// Reading signature packs from YAML: every field checked, every problem
// reported as file:line:col: message, all of them rather than the first.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include <yaml-cpp/yaml.h>

#include "gpuguard/common/dir_entries.h"
#include "gpuguard/common/read_file.h"
#include "gpuguard/common/yaml_where.h"
#include "gpuguard/signatures/signatures.h"
#include "signatures/embedded_pack.h"

namespace gpuguard::signatures {
namespace {

class PackReader {
  public:
    explicit PackReader(std::string source) : source_(std::move(source)) {}

    void error(const YAML::Node& node, const std::string& message) {
        errors_.push_back(yaml_where(source_, node) + ": " + message);
    }

    const std::vector<std::string>& errors() const { return errors_; }
    std::string location(const YAML::Node& node) const { return yaml_line(source_, node); }

    bool check_keys(const YAML::Node& map, const std::string& what,
                    const std::set<std::string>& allowed) {
        if (!map.IsMap()) {
            error(map, what + " must be a mapping");
            return false;
        }
        for (const auto& entry : map) {
            const auto key = entry.first.Scalar();
            if (!allowed.contains(key)) {
                std::string known;
                for (const auto& name : allowed) known += (known.empty() ? "" : ", ") + name;
                error(entry.first, what + ": unknown key '" + key + "' (known: " + known + ")");
            }
        }
        return true;
    }

    std::optional<std::string> string(const YAML::Node& node, const std::string& key) {
        if (!node.IsScalar()) {
            error(node, key + " must be a string");
            return std::nullopt;
        }
        return node.Scalar();
    }

    std::string required_string(const YAML::Node& map, const std::string& key,
                                const std::string& id) {
        const auto node = map[key];
        if (!node) {
            error(map, id + ": missing required key '" + key + "'");
            return {};
        }
        auto text = string(node, id + ": " + key);
        if (text && text->empty()) error(node, id + ": " + key + " must not be empty");
        return text.value_or("");
    }

    std::vector<std::string> string_list(const YAML::Node& node, const std::string& key) {
        std::vector<std::string> out;
        if (!node.IsSequence()) {
            error(node, key + " must be a list of strings");
            return out;
        }
        for (const auto& item : node) {
            if (auto text = string(item, key + " item")) out.push_back(*text);
        }
        return out;
    }

  private:
    std::string source_;
    std::vector<std::string> errors_;
};

std::optional<Anchor> parse_anchor(const std::string& text) {
    if (text == "none") return Anchor::kNone;
    if (text == "start") return Anchor::kStart;
    if (text == "end") return Anchor::kEnd;
    if (text == "both") return Anchor::kBoth;
    return std::nullopt;
}

// One item of a pattern list: "string" (the field's default kind) or a map
// {regex|literal|glob: ..., caseless: bool, anchor: none|start|end|both}.
void read_pattern(PackReader& reader, const YAML::Node& item, Field field, PatternKind kind,
                  const std::string& where, Signature& signature) {
    Pattern pattern;
    pattern.field = field;
    pattern.kind = kind;
    pattern.caseless = kind == PatternKind::kGlob || kind == PatternKind::kDomainSuffix;
    if (item.IsScalar()) {
        pattern.text = item.Scalar();
    } else if (item.IsMap()) {
        if (!reader.check_keys(item, where, {"regex", "literal", "glob", "caseless", "anchor"})) {
            return;
        }
        int kinds = 0;
        for (const auto& [key, value] :
             {std::pair{"regex", PatternKind::kRegex}, std::pair{"literal", PatternKind::kLiteral},
              std::pair{"glob", PatternKind::kGlob}}) {
            if (const auto node = item[key]) {
                ++kinds;
                pattern.kind = value;
                pattern.text = reader.string(node, where + "." + key).value_or("");
            }
        }
        if (kinds != 1) {
            reader.error(item, where + ": needs exactly one of regex, literal, glob");
            return;
        }
        if (const auto node = item["caseless"]) {
            if (!node.IsScalar() || (node.Scalar() != "true" && node.Scalar() != "false")) {
                reader.error(node, where + ".caseless must be true or false");
            } else {
                pattern.caseless = node.Scalar() == "true";
            }
        }
        if (const auto node = item["anchor"]) {
            const auto anchor = parse_anchor(node.Scalar());
            if (!anchor) {
                reader.error(node, where + ".anchor must be none, start, end or both");
            } else {
                pattern.anchor = *anchor;
            }
        }
    } else {
        reader.error(item, where + " must be a string or a mapping");
        return;
    }
    if (pattern.text.empty()) {
        reader.error(item, where + ": empty pattern");
        return;
    }
    signature.patterns.push_back(std::move(pattern));
}

void read_match(PackReader& reader, const YAML::Node& match, Signature& signature) {
    const std::string where = signature.id + ": match";
    if (!reader.check_keys(match, where,
                           {"process_name", "exe_path", "cmdline", "config", "domain", "port",
                            "payload", "yara"})) {
        return;
    }
    struct TextField {
        const char* key;
        Field field;
        PatternKind kind;
    };
    static constexpr TextField kTextFields[] = {
        {"process_name", Field::kProcess, PatternKind::kGlob},
        {"exe_path", Field::kProcess, PatternKind::kRegex},
        {"cmdline", Field::kCmdline, PatternKind::kRegex},
        {"config", Field::kConfig, PatternKind::kRegex},
        {"domain", Field::kDomain, PatternKind::kDomainSuffix},
        {"payload", Field::kPayload, PatternKind::kRegex},
    };
    for (const auto& text_field : kTextFields) {
        const auto list = match[text_field.key];
        if (!list) continue;
        const std::string key = where + "." + text_field.key;
        if (!list.IsSequence()) {
            reader.error(list, key + " must be a list");
            continue;
        }
        for (size_t i = 0; i < list.size(); ++i) {
            read_pattern(reader, list[i], text_field.field, text_field.kind,
                         key + "[" + std::to_string(i) + "]", signature);
        }
    }
    if (const auto ports = match["port"]) {
        for (const auto& text : reader.string_list(ports, where + ".port")) {
            char* end = nullptr;
            const long port = std::strtol(text.c_str(), &end, 10);
            if (text.empty() || *end != '\0' || port < 1 || port > 65535) {
                reader.error(ports, where + ".port: '" + text + "' is not a port (1-65535)");
            } else {
                signature.ports.push_back(static_cast<uint16_t>(port));
            }
        }
    }
    if (const auto rules = match["yara"]) {
        signature.yara_rules = reader.string_list(rules, where + ".yara");
    }
    if (signature.patterns.empty() && signature.ports.empty() && signature.yara_rules.empty()) {
        reader.error(match, where + ": matches nothing");
    }
}

void read_signature(PackReader& reader, const YAML::Node& node, Pack& pack) {
    if (!reader.check_keys(node, "signature",
                           {"id", "name", "description", "severity", "confidence", "mitre",
                            "references", "false_positives", "match", "tests"})) {
        return;
    }
    Signature signature;
    signature.source = reader.location(node);
    signature.id = reader.required_string(node, "id", "signature");
    const std::string& id = signature.id;
    signature.name = reader.required_string(node, "name", id);
    signature.description = reader.required_string(node, "description", id);
    signature.mitre = reader.required_string(node, "mitre", id);
    if (!signature.mitre.empty() &&
        (signature.mitre.size() < 5 || signature.mitre[0] != 'T' ||
         signature.mitre.find_first_not_of("0123456789.", 1) != std::string::npos)) {
        reader.error(node["mitre"], id + ": mitre '" + signature.mitre +
                                        "' is not an ATT&CK technique id (T1496, T1053.006)");
    }
    const std::string severity = reader.required_string(node, "severity", id);
    if (auto parsed = parse_severity(severity)) {
        signature.severity = *parsed;
    } else if (!severity.empty()) {
        reader.error(node["severity"], id + ": severity '" + severity +
                                           "' is not a syslog level (emergency, alert, critical, "
                                           "error, warning, notice, info, debug)");
    }
    const std::string confidence = reader.required_string(node, "confidence", id);
    if (!confidence.empty()) {
        char* end = nullptr;
        signature.confidence = std::strtod(confidence.c_str(), &end);
        if (*end != '\0' || signature.confidence < 0 || signature.confidence > 1) {
            reader.error(node["confidence"], id + ": confidence must be a number from 0 to 1");
        }
    }
    for (const auto& [key, list] : {std::pair{"references", &signature.references},
                                    std::pair{"false_positives", &signature.false_positives}}) {
        if (const auto items = node[key]) {
            *list = reader.string_list(items, id + ": " + key);
            if (list->empty()) reader.error(items, id + ": " + key + " must not be empty");
        } else {
            reader.error(node, id + ": missing required key '" + key + "'");
        }
    }
    if (const auto match = node["match"]) {
        read_match(reader, match, signature);
    } else {
        reader.error(node, id + ": missing required key 'match'");
    }
    if (const auto tests = node["tests"]) {
        if (reader.check_keys(tests, id + ": tests", {"match", "no_match"})) {
            for (const auto& [key, list] : {std::pair{"match", &signature.must_match},
                                            std::pair{"no_match", &signature.must_not_match}}) {
                if (const auto items = tests[key]) {
                    *list = reader.string_list(items, id + ": tests." + key);
                }
                if (list->empty()) {
                    reader.error(tests, id + ": tests." + key + " needs at least one vector");
                }
            }
        }
    } else {
        reader.error(node, id + ": missing required key 'tests'");
    }
    pack.signatures.push_back(std::move(signature));
}

// Rejects duplicate ids and YARA rule names no source defines.
Status check_pack(const Pack& pack) {
    std::vector<std::string> errors;
    std::map<std::string, std::string> seen;
    for (const auto& signature : pack.signatures) {
        auto [it, inserted] = seen.emplace(signature.id, signature.source);
        if (!inserted) {
            errors.push_back(signature.source + ": duplicate signature id " + signature.id +
                             " (first at " + it->second + ")");
        }
    }
    if (!errors.empty()) {
        std::string message;
        for (const auto& line : errors) message += (message.empty() ? "" : "\n") + line;
        return fail(ErrorCode::kParse, message);
    }
    return {};
}

}  // namespace

const char* to_string(Field field) {
    switch (field) {
        case Field::kProcess:
            return "process";
        case Field::kCmdline:
            return "cmdline";
        case Field::kConfig:
            return "config";
        case Field::kDomain:
            return "domain";
        case Field::kPayload:
            return "payload";
    }
    return "unknown";
}

Result<Pack> parse_pack_yaml(std::string_view yaml, const std::string& source) {
    Pack pack;
    PackReader reader(source);
    try {
        const YAML::Node root = YAML::Load(std::string(yaml));
        if (reader.check_keys(root, "pack file", {"pack", "description", "signatures"})) {
            const auto list = root["signatures"];
            if (!list || !list.IsSequence()) {
                reader.error(root, "signatures: must be a list");
            } else {
                for (const auto& node : list) read_signature(reader, node, pack);
            }
        }
    } catch (const YAML::ParserException& error) {
        return fail(ErrorCode::kParse, source + ":" + std::to_string(error.mark.line + 1) + ":" +
                                           std::to_string(error.mark.column + 1) +
                                           ": YAML syntax error: " + error.msg);
    } catch (const YAML::Exception& error) {
        return fail(ErrorCode::kParse, source + ": " + error.what());
    }
    if (!reader.errors().empty()) {
        std::string message;
        for (const auto& line : reader.errors()) message += (message.empty() ? "" : "\n") + line;
        return fail(ErrorCode::kParse, message);
    }
    return pack;
}

Result<Pack> load_builtin_pack() {
    Pack pack;
    for (const auto& file : embedded_pack_files()) {
        if (file.name.ends_with(".yar")) {
            pack.yara_sources.push_back({file.name, file.text});
            continue;
        }
        auto part = parse_pack_yaml(file.text, "<builtin>/" + file.name);
        if (!part) return Unexpected{part.error()};
        for (auto& signature : part->signatures) pack.signatures.push_back(std::move(signature));
    }
    if (auto checked = check_pack(pack); !checked) return Unexpected{checked.error()};
    return pack;
}

Result<Pack> load_pack_directory(const std::filesystem::path& directory) {
    Pack pack;
    for (const auto& [sub, extension] : {std::pair{"packs", ".yaml"}, std::pair{"yara", ".yar"}}) {
        std::vector<std::filesystem::path> files;
        auto entries = list_directory(directory / sub);
        if (!entries) {
            return fail(ErrorCode::kNotFound, "cannot list " + (directory / sub).string() + ": " +
                                                  std::strerror(entries.error().sys_errno));
        }
        for (const DirEntry& entry : *entries) {
            const auto path = directory / sub / entry.name;
            if (path.extension() == extension) files.push_back(path);
        }
        std::sort(files.begin(), files.end());
        for (const auto& path : files) {
            auto text = read_file(path);
            if (!text) {  // "cannot read PATH: ...", always kIo as a pack error
                return fail(ErrorCode::kIo, text.error().message, text.error().sys_errno);
            }
            if (std::string_view(extension) == ".yar") {
                pack.yara_sources.push_back({path.filename().string(), std::move(text).value()});
                continue;
            }
            auto part = parse_pack_yaml(*text, path.string());
            if (!part) return Unexpected{part.error()};
            for (auto& signature : part->signatures) {
                pack.signatures.push_back(std::move(signature));
            }
        }
    }
    if (auto checked = check_pack(pack); !checked) return Unexpected{checked.error()};
    return pack;
}

}  // namespace gpuguard::signatures
