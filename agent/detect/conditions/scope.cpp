// scope: who and where the rule applies to — users, groups, containers by
// id, name or image, pods by namespace, host or container, executables by
// path, process names exempt (not_comm). A name is exempt only while its
// executable is what the name claims: once the executable's scan says a
// package owns it unchanged (or the host has no package database) and no
// YARA rule hit it. An executable no package owns, one changed since its
// package installed it, or one YARA flags under an exempt name is judged
// after all, and the detection says why (docs/detections.md,
// "Exemptions"). An exempt executable path likewise, once YARA hits the
// file or it was deleted under the running process.
#include <algorithm>
#include <unordered_map>

#include <fnmatch.h>

#include "condition.h"

namespace gpuguard::agent {
namespace {

bool user_matches(const std::vector<std::string>& users, const ProcessInfo& info) {
    const std::string uid = std::to_string(info.uid);
    return std::any_of(users.begin(), users.end(), [&](const std::string& user) {
        return user == uid || (!info.user.empty() && user == info.user);
    });
}

bool group_matches(const std::vector<std::string>& groups, const ProcessInfo& info) {
    const std::string gid = std::to_string(info.gid);
    return std::any_of(groups.begin(), groups.end(), [&](const std::string& group) {
        return group == gid || (!info.group.empty() && group == info.group);
    });
}

// Globs over the container id and its "runtime://id" form; host processes match none.
bool container_matches(const std::vector<std::string>& globs, const ProcessInfo& info) {
    if (!info.container) return false;
    const std::string qualified = info.container->runtime + "://" + info.container->id;
    return std::any_of(globs.begin(), globs.end(), [&](const std::string& glob) {
        return fnmatch(glob.c_str(), info.container->id.c_str(), 0) == 0 ||
               fnmatch(glob.c_str(), qualified.c_str(), 0) == 0;
    });
}

// Whether any of `globs` matches `text`; an unknown ("") text matches none.
bool matches_a_glob(const std::vector<std::string>& globs, const std::string& text, int flags = 0) {
    return !text.empty() && std::any_of(globs.begin(), globs.end(), [&](const std::string& glob) {
        return fnmatch(glob.c_str(), text.c_str(), flags) == 0;
    });
}

constexpr std::string_view kDeleted = " (deleted)";

// The executable's path as exe_paths' globs see it: without the " (deleted)"
// the kernel adds to a file removed under the running process.
std::string exe_path_of(const ProcessInfo& info) {
    std::string_view exe = info.exe;
    if (exe.ends_with(kDeleted)) exe.remove_suffix(kDeleted.size());
    return std::string(exe);
}

bool in_scope(const rules::ScopeCondition& scope, const ProcessInfo& info) {
    if (!scope.users.empty() && !user_matches(scope.users, info)) return false;
    if (user_matches(scope.not_users, info)) return false;
    if (!scope.groups.empty() && !group_matches(scope.groups, info)) return false;
    if (group_matches(scope.not_groups, info)) return false;
    if (!scope.container_ids.empty() && !container_matches(scope.container_ids, info)) {
        return false;
    }
    if (container_matches(scope.not_container_ids, info)) return false;
    const std::string& name = info.container_details.name;  // "" unknown or on the host
    if (!scope.container_names.empty() && !matches_a_glob(scope.container_names, name)) {
        return false;
    }
    if (matches_a_glob(scope.not_container_names, name)) return false;
    const std::string& image = info.container_details.image;  // "" on the host
    if (!scope.container_images.empty() && !matches_a_glob(scope.container_images, image)) {
        return false;
    }
    if (matches_a_glob(scope.not_container_images, image)) return false;
    const std::string& pod_namespace = info.container_details.pod_namespace;
    if (!scope.pod_namespaces.empty() && !matches_a_glob(scope.pod_namespaces, pod_namespace)) {
        return false;
    }
    if (matches_a_glob(scope.not_pod_namespaces, pod_namespace)) return false;
    if (!scope.exe_paths.empty() &&
        !matches_a_glob(scope.exe_paths, exe_path_of(info), FNM_PATHNAME)) {
        return false;
    }
    switch (scope.containers) {
        case rules::ContainerScope::kAny:
            return true;
        case rules::ContainerScope::kHost:
            return !info.container.has_value();
        case rules::ContainerScope::kContainer:
            return info.container.has_value();
    }
    return true;
}

// Why an exempt name does not exempt this executable; "" when it does (or
// nothing is known of it yet: the scan comes back within milliseconds).
std::string exemption_refused(const ProcessEvidence& evidence) {
    const std::string& check = evidence.package_check;
    const std::string& path = evidence.exe_path;
    if (check == "agent") return "";
    if (check == "unowned") return "its executable " + path + " is owned by no package";
    if (check == "modified") {
        return "its executable " + path + " is not the file " + evidence.package + " installed";
    }
    if (evidence.exe_yara_hit) return "YARA rules hit its executable " + path;
    return "";
}

// Why an exempt executable path does not exempt this process; "" when it
// does. A package upgrade that replaced the file under it leaves the path
// exempt (the package's file is there now); any other deletion does not.
std::string path_exemption_refused(const ProcessInfo& info, const ProcessEvidence& evidence) {
    if (info.exe.ends_with(kDeleted) && info.exe_package.empty()) {
        return "its executable was deleted since it started";
    }
    if (evidence.exe_yara_hit) return "YARA rules hit its executable " + evidence.exe_path;
    return "";
}

// not_comm's globs, most of them plain names: those are looked up in a
// hash map, fnmatch runs only for the ones with a wildcard (the scope is
// judged for every process at every evaluation).
class NameExemptions {
  public:
    explicit NameExemptions(const std::vector<std::string>& globs) : globs_(globs) {
        for (size_t index = 0; index < globs.size(); ++index) {
            if (globs[index].find_first_of("*?[\\") == std::string::npos) {
                names_.try_emplace(globs[index], index);
            } else {
                wildcards_.push_back(index);
            }
        }
    }
    // The first glob, in the rule's order, that `comm` matches; null when none.
    const std::string* first_match(const std::string& comm) const {
        const auto named = names_.find(comm);
        const size_t by_name = named == names_.end() ? globs_.size() : named->second;
        for (size_t index : wildcards_) {
            if (index > by_name) break;
            if (fnmatch(globs_[index].c_str(), comm.c_str(), 0) == 0) return &globs_[index];
        }
        return by_name < globs_.size() ? &globs_[by_name] : nullptr;
    }

  private:
    std::vector<std::string> globs_;
    std::unordered_map<std::string, size_t> names_;  // a plain name -> its first index
    std::vector<size_t> wildcards_;                  // indexes of the rest, ascending
};

class Scope final : public Condition {
  public:
    explicit Scope(rules::ScopeCondition scope)
        : scope_(std::move(scope)), exempt_names_(scope_.not_comm) {}
    std::string_view name() const override { return "scope"; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        if (!in_scope(scope_, context.info)) return false;
        if (!not_exempt_by_path(context, in)) return false;
        const std::string& comm = context.info.comm;
        const std::string* exempt_name = exempt_names_.first_match(comm);
        if (!exempt_name) return true;
        const std::string refused = exemption_refused(context.evidence);
        if (refused.empty()) return false;
        in.extra.push_back(Evidence{
            context.evidence.scanned_ns, "event", "exe_scan", "", "exemption",
            "name '" + comm + "' is exempt (not_comm " + *exempt_name + "), but " + refused});
        return true;
    }

  private:
    // Whether the process stays in scope past not_exe_paths: no glob matches
    // its executable's path, or one does but the file is not to be trusted
    // (the evidence says why).
    bool not_exempt_by_path(const ConditionContext& context, RuleInputs& in) const {
        if (scope_.not_exe_paths.empty()) return true;  // most scopes: no path copied
        const std::string path = exe_path_of(context.info);
        const auto glob = std::find_if(
            scope_.not_exe_paths.begin(), scope_.not_exe_paths.end(), [&](const std::string& g) {
                return fnmatch(g.c_str(), path.c_str(), FNM_PATHNAME) == 0;
            });
        if (path.empty() || glob == scope_.not_exe_paths.end()) return true;
        const std::string refused = path_exemption_refused(context.info, context.evidence);
        if (refused.empty()) return false;
        in.extra.push_back(
            Evidence{context.evidence.scanned_ns, "event", "exe_scan", "", "exemption",
                     "path " + path + " is exempt (not_exe_paths " + *glob + "), but " + refused});
        return true;
    }

    rules::ScopeCondition scope_;
    NameExemptions exempt_names_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::scope(const rules::CorrelationRule& rule) {
    if (!rule.scope) return nullptr;
    return std::make_unique<Scope>(*rule.scope);
}

}  // namespace gpuguard::agent
