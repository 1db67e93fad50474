// Loading miner-rules.yaml files into a RuleSet: reading them from disk,
// merging what each holds (rules/rule_file_reader.h) with the built-in pack and
// proving the rules' test vectors (RuleSet::build); and looking the result up
// (find, allowlisted, RuleScanner). Every problem is collected (not just the
// first) and reported as "file:line:col: message".
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

#include <fnmatch.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/common/trusted_file.h"
#include "gpuguard/rules/rules.h"
#include "rules/glob.h"
#include "rules/rule_file_reader.h"
#include "rules/yaml_diagnostics.h"

namespace gpuguard::rules {
namespace {

using signatures::PatternKind;
using signatures::Signature;
}  // namespace

Result<std::vector<RuleFile>> read_rule_files(const RulePaths& paths) {
    std::vector<std::filesystem::path> files;
    std::error_code ec;
    if (!paths.main_file.empty() && std::filesystem::exists(paths.main_file, ec)) {
        files.push_back(paths.main_file);
    }
    if (!paths.drop_in_dir.empty() && std::filesystem::is_directory(paths.drop_in_dir, ec)) {
        // Editors' temporary and backup files (.x.yaml.swp, x.yaml~) end otherwise.
        auto drop_ins = list_trusted_directory(paths.drop_in_dir, [](const std::string& name) {
            return name.ends_with(".yaml") && !name.starts_with(".");
        });
        if (!drop_ins) return Unexpected{drop_ins.error()};
        files.insert(files.end(), drop_ins->begin(), drop_ins->end());
    }
    std::vector<RuleFile> out;
    for (const auto& path : files) {
        auto text = read_trusted_file(path);
        if (!text) {
            if (text.error().sys_errno == 0) return Unexpected{text.error()};  // refused
            const int err = text.error().sys_errno;
            return fail(err == EACCES ? ErrorCode::kPermission : ErrorCode::kIo,
                        "cannot read " + path.string() + ": " + std::strerror(err), err);
        }
        out.push_back({path.string(), std::move(text).value()});
    }
    return out;
}

signatures::CompileCache default_compile_cache() {
    if (const char* chosen = std::getenv("GPUGUARD_RULE_CACHE_DIR")) return {chosen};
    if (geteuid() == 0) return {"/var/cache/gpuguard"};
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/') {
        return {std::filesystem::path(xdg) / "gpuguard"};
    }
    if (const char* home = std::getenv("HOME"); home && *home == '/') {
        return {std::filesystem::path(home) / ".cache" / "gpuguard"};
    }
    return {};
}

Result<std::shared_ptr<const signatures::Matcher>> compile_builtin_pack(
    const signatures::CompileCache& cache) {
    auto pack = signatures::load_builtin_pack();
    if (!pack) return Unexpected{pack.error()};
    auto matcher = signatures::Matcher::compile(std::move(pack->signatures), cache);
    if (!matcher) return Unexpected{matcher.error()};
    return std::make_shared<const signatures::Matcher>(std::move(matcher).value());
}

Result<RuleSet> RuleSet::build(std::shared_ptr<const signatures::Matcher> builtin,
                               const std::vector<RuleFile>& files) {
    std::vector<std::string> errors;
    std::vector<ParsedRule> rules;
    std::map<std::string, std::pair<Override, std::string>> overrides;  // id -> (override, file)
    auto disabled = std::make_shared<std::set<std::string, std::less<>>>();
    RuleSet set;
    set.builtin_ = builtin;
    Action default_action = Action::kAlert;
    std::map<std::string, std::string> rule_ids;  // id -> where first defined

    for (const auto& file : files) {
        Diagnostics diag(file.name);
        ParsedFile parsed = parse_file(diag, file);
        set.files_.push_back(file.name);
        for (auto& rule : parsed.rules) {
            const std::string& id = rule.effective.signature.id;
            if (id.empty()) continue;
            if (builtin->find(id)) {
                diag.error(rule.id_node, "duplicate id '" + id + "': a built-in signature has it");
            } else if (auto [it, inserted] = rule_ids.emplace(id, diag.where(rule.id_node));
                       !inserted) {
                diag.error(rule.id_node,
                           rule.effective.id_derived
                               ? "same patterns as the rule at " + it->second + " (derived id '" +
                                     id + "'): remove one, or give each an id"
                               : "duplicate id '" + id + "' (first defined at " + it->second + ")");
            } else {
                rules.push_back(std::move(rule));
            }
        }
        for (const auto& [id, node] : parsed.disable) {
            if (!builtin->find(id)) {
                diag.error(node, "signatures.disable: unknown signature id '" + id + "'");
            } else {
                disabled->insert(id);
            }
        }
        std::set<std::string> seen_here;
        for (auto& entry : parsed.overrides) {
            if (!builtin->find(entry.id)) {
                diag.error(entry.node,
                           "signatures.override: unknown signature id '" + entry.id + "'");
            } else if (!seen_here.insert(entry.id).second) {
                diag.error(entry.node,
                           "signatures.override: duplicate id '" + entry.id + "' in this file");
            } else {
                overrides[entry.id] = {entry, file.name};  // a later file wins
            }
        }
        auto& allow = set.allowlist_;
        for (auto [from, to] : {std::pair{&parsed.allowlist.users, &allow.users},
                                std::pair{&parsed.allowlist.exe_paths, &allow.exe_paths},
                                std::pair{&parsed.allowlist.sha256, &allow.sha256},
                                std::pair{&parsed.allowlist.containers, &allow.containers}}) {
            to->insert(to->end(), from->begin(), from->end());
        }
        for (auto& hash : parsed.known_bad_sha256) set.known_bad_sha256_.insert(hash);
        if (parsed.hash_rate) set.hash_rate_threshold_ = parsed.hash_rate;
        if (parsed.default_action) default_action = *parsed.default_action;
        const auto sorted = diag.sorted_errors();
        errors.insert(errors.end(), sorted.begin(), sorted.end());
    }

    // User rules: one small Hyperscan database set of their own, so a reload
    // never recompiles the built-in pack.
    if (errors.empty() && !rules.empty()) {
        std::vector<Signature> user_signatures;
        for (const auto& rule : rules) user_signatures.push_back(rule.effective.signature);
        auto matcher = signatures::Matcher::compile(std::move(user_signatures));
        if (!matcher) {
            errors.push_back(matcher.error().message);
        } else {
            set.user_ = std::make_shared<const signatures::Matcher>(std::move(matcher).value());
        }
    }
    // The rules' own test vectors, so `rules check` proves them.
    if (errors.empty() && set.user_) {
        auto scanner = set.user_->scanner();
        if (!scanner) return Unexpected{scanner.error()};
        for (const auto& rule : rules) {
            const Signature& signature = rule.effective.signature;
            auto matches = [&](const std::string& text) {
                std::set<Field> fields;
                for (const auto& pattern : signature.patterns) {
                    fields.insert(pattern.field);
                    if (pattern.kind == PatternKind::kDomainSuffix) fields.insert(Field::kCmdline);
                }
                for (const Field field : fields) {
                    for (const auto& id : scanner->match(field, text)) {
                        if (id == signature.id) return true;
                    }
                }
                if (auto port = parse_port(text)) {
                    for (const auto& id : scanner->match_port(*port)) {
                        if (id == signature.id) return true;
                    }
                }
                return false;
            };
            const std::string file = signature.source.substr(0, signature.source.rfind(':'));
            Diagnostics diag(file);
            for (const auto& [text, node] : rule.must_match) {
                if (!matches(text)) {
                    diag.error(node, signature.id + ": test vector '" + text +
                                         "' should match but does not");
                }
            }
            for (const auto& [text, node] : rule.must_not_match) {
                if (matches(text)) {
                    diag.error(node, signature.id + ": test vector '" + text +
                                         "' should not match but does");
                }
            }
            const auto sorted = diag.sorted_errors();
            errors.insert(errors.end(), sorted.begin(), sorted.end());
        }
    }
    if (!errors.empty()) {
        std::string message;
        for (const auto& line : errors) message += (message.empty() ? "" : "\n") + line;
        return fail(ErrorCode::kInvalidArgument, message);
    }

    auto effective = std::make_shared<std::vector<EffectiveSignature>>();
    for (const auto& signature : builtin->signatures()) {
        if (disabled->contains(signature.id)) continue;
        EffectiveSignature entry{signature, default_action, "builtin"};
        if (const auto it = overrides.find(signature.id); it != overrides.end()) {
            const Override& change = it->second.first;
            if (change.severity) entry.signature.severity = *change.severity;
            if (change.confidence) entry.signature.confidence = *change.confidence;
            if (change.action) entry.action = *change.action;
            entry.origin = change.origin;
        }
        effective->push_back(std::move(entry));
    }
    for (auto& rule : rules) {
        rule.effective.action = rule.action.value_or(default_action);
        effective->push_back(std::move(rule.effective));
    }
    set.effective_ = std::move(effective);
    set.disabled_ = std::move(disabled);
    return set;
}

Result<RuleScanner> RuleSet::scanner() const {
    auto builtin = builtin_->scanner();
    if (!builtin) return Unexpected{builtin.error()};
    std::optional<signatures::Scanner> user;
    if (user_) {
        auto scanner = user_->scanner();
        if (!scanner) return Unexpected{scanner.error()};
        user.emplace(std::move(scanner).value());
    }
    return RuleScanner(disabled_, std::move(builtin).value(), std::move(user));
}

const EffectiveSignature* RuleSet::find(std::string_view id) const {
    for (const auto& entry : *effective_) {
        if (entry.signature.id == id) return &entry;
    }
    return nullptr;
}

std::vector<std::pair<std::string, std::string>> RuleSet::kill_now_names() const {
    std::vector<std::pair<std::string, std::string>> names;
    for (const auto& effective : *effective_) {
        if (effective.action != Action::kKillNow) continue;
        for (const auto& pattern : effective.signature.patterns) {
            if (pattern.field != Field::kProcess) continue;
            if (pattern.kind != PatternKind::kGlob && pattern.kind != PatternKind::kLiteral) {
                continue;
            }
            // A glob or a path is judged in user space; the kernel compares
            // comm byte for byte (TASK_COMM_LEN 16, NUL included).
            if (pattern.text.empty() || pattern.text.find_first_of("*?[/") != std::string::npos) {
                continue;
            }
            names.emplace_back(pattern.text.substr(0, 15), effective.signature.id);
        }
    }
    return names;
}

bool RuleSet::allowlisted(const ProcessIdentity& process) const {
    for (const auto& user : allowlist_.users) {
        if ((!process.user.empty() && user == process.user) ||
            (process.uid >= 0 && user == std::to_string(process.uid))) {
            return true;
        }
    }
    for (const auto& glob : allowlist_.exe_paths) {
        if (!process.exe.empty() && glob_matches(glob, process.exe, FNM_PATHNAME)) return true;
    }
    for (const auto& hash : allowlist_.sha256) {
        if (!process.sha256.empty() && hash == process.sha256) return true;
    }
    for (const auto& container : allowlist_.containers) {
        if (!process.container_id.empty() &&
            (container == process.container_id ||
             (container.size() >= 12 && process.container_id.starts_with(container)))) {
            return true;
        }
        if (!process.container_name.empty() && glob_matches(container, process.container_name, 0)) {
            return true;
        }
    }
    return false;
}

std::vector<std::string_view> RuleScanner::merge(std::vector<std::string_view> builtin,
                                                 std::vector<std::string_view> user) const {
    std::erase_if(builtin, [this](std::string_view id) { return disabled_->contains(id); });
    builtin.insert(builtin.end(), user.begin(), user.end());
    std::sort(builtin.begin(), builtin.end());
    return builtin;
}

std::vector<std::string_view> RuleScanner::match(Field field, std::string_view text) {
    return merge(builtin_.match(field, text),
                 user_ ? user_->match(field, text) : std::vector<std::string_view>{});
}

std::vector<std::string_view> RuleScanner::match_process(std::string_view comm,
                                                         std::string_view exe) {
    return merge(builtin_.match_process(comm, exe),
                 user_ ? user_->match_process(comm, exe) : std::vector<std::string_view>{});
}

std::vector<std::string_view> RuleScanner::match_port(uint16_t port) {
    return merge(builtin_.match_port(port),
                 user_ ? user_->match_port(port) : std::vector<std::string_view>{});
}

}  // namespace gpuguard::rules
