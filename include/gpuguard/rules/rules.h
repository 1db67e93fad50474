// miner-rules.yaml: what admins add to, remove from and re-grade in the
// built-in signature pack, and what to do on a match. The effective RuleSet is
// the built-in pack (loaded first, compiled once) plus the main rule file
// (/etc/gpuguard/miner-rules.yaml) and /etc/gpuguard/rules.d/*.yaml in name
// order. RuleSetWatcher reloads it on change (inotify) and keeps the last good
// set when a change is invalid. Format and examples: docs/rules.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "gpuguard/common/result.h"
#include "gpuguard/signatures/signatures.h"

namespace gpuguard::rules {

using signatures::Field;
using signatures::Severity;

enum class Action { kAlert, kKill, kKillNow, kBlockIp, kDenyGpu };
const char* to_string(Action action);
std::optional<Action> parse_action(std::string_view name);

// "100MH/s", "1.5 GH/s", "250kH/s", "900H/s" -> hashes per second. Units are
// H, kH, MH, GH, TH per second (case as written). Fails with kInvalidArgument.
Result<double> parse_hash_rate(std::string_view text);

struct RulePaths {
    std::filesystem::path main_file = "/etc/gpuguard/miner-rules.yaml";
    std::filesystem::path drop_in_dir = "/etc/gpuguard/rules.d";
    // Where the watcher keeps a copy of the last files that built a rule set
    // (rules/last_good.h); "" keeps none, and a start on bad files fails.
    std::filesystem::path last_good_dir{};
};

struct RuleFile {
    std::string name;  // path as shown in errors
    std::string text;
};

// Reads the main file and the drop-in directory's *.yaml (sorted by name).
// A missing main file or directory is not an error (the built-in pack alone
// applies); an unreadable one is (kIo, kPermission).
Result<std::vector<RuleFile>> read_rule_files(const RulePaths& paths);

// Who a process is, for allowlist checks.
struct ProcessIdentity {
    std::string user;            // user name ("" if unknown)
    int64_t uid = -1;            // -1 if unknown
    std::string exe;             // executable path
    std::string sha256;          // of the executable, lowercase hex ("" if not hashed)
    std::string container_id;    // full container id ("" on the host)
    std::string container_name;  // ("" if unknown)
};

struct Allowlist {
    std::vector<std::string> users;       // names or numeric uids
    std::vector<std::string> exe_paths;   // globs (fnmatch, '*' stops at '/')
    std::vector<std::string> sha256;      // lowercase hex
    std::vector<std::string> containers;  // id, id prefix (>= 12 chars) or name glob
};

// One signature as it applies now: the pack's or a user rule's, with
// overrides applied, and the action to take on a match.
struct EffectiveSignature {
    signatures::Signature signature;
    Action action = Action::kAlert;
    std::string origin;  // "builtin" or the rule file:line that defined/overrode it
    // A user rule written without an id: its id is local-<file stem>-<8 hex
    // digits of sha256 of its patterns>, the same on every load and host.
    bool id_derived = false;
};

class RuleSet;

// Matches through a RuleSet: built-in signatures minus the disabled ones,
// plus user rules. One per thread (owns Hyperscan scratch).
class RuleScanner {
  public:
    std::vector<std::string_view> match(Field field, std::string_view text);
    std::vector<std::string_view> match_process(std::string_view comm, std::string_view exe);
    std::vector<std::string_view> match_port(uint16_t port);

  private:
    friend class RuleSet;
    RuleScanner(std::shared_ptr<const std::set<std::string, std::less<>>> disabled,
                signatures::Scanner builtin, std::optional<signatures::Scanner> user)
        : disabled_(std::move(disabled)), builtin_(std::move(builtin)), user_(std::move(user)) {}
    std::vector<std::string_view> merge(std::vector<std::string_view> builtin,
                                        std::vector<std::string_view> user) const;

    std::shared_ptr<const std::set<std::string, std::less<>>> disabled_;
    signatures::Scanner builtin_;
    std::optional<signatures::Scanner> user_;
};

class RuleSet {
  public:
    // Builds the effective set from a compiled built-in pack and rule files
    // (in order). On failure the Error's message holds every problem, one per
    // line, as "file:line:col: message" (kParse or kInvalidArgument).
    static Result<RuleSet> build(std::shared_ptr<const signatures::Matcher> builtin,
                                 const std::vector<RuleFile>& files);

    Result<RuleScanner> scanner() const;

    // The signature (built-in or user rule) as it applies now; nullptr when
    // unknown or disabled.
    const EffectiveSignature* find(std::string_view id) const;
    // Every enabled signature: built-in first (pack order), then user rules.
    const std::vector<EffectiveSignature>& effective() const { return *effective_; }
    const std::set<std::string, std::less<>>& disabled() const { return *disabled_; }

    bool allowlisted(const ProcessIdentity& process) const;
    const Allowlist& allowlist() const { return allowlist_; }
    // `known_bad.sha256` of all files: executables killed on sight (action
    // kill_now of GG-CORR-0010), by content.
    const std::set<std::string, std::less<>>& known_bad_sha256() const { return known_bad_sha256_; }
    // Process names the kernel kills at exec (kill_now): the literal
    // process_name patterns (no glob characters) of enabled signatures whose
    // action is kill_now, cut to the kernel's 15-byte comm, with the id.
    std::vector<std::pair<std::string, std::string>> kill_now_names() const;
    // Hashes per second above which a GPU process counts as mining; unset when
    // no file sets hash_rate_threshold.
    std::optional<double> hash_rate_threshold() const { return hash_rate_threshold_; }
    const std::vector<std::string>& files() const { return files_; }

  private:
    RuleSet() = default;

    std::shared_ptr<const signatures::Matcher> builtin_;
    std::shared_ptr<const signatures::Matcher> user_;  // null when there are no user rules
    std::shared_ptr<const std::set<std::string, std::less<>>> disabled_;
    std::shared_ptr<const std::vector<EffectiveSignature>> effective_;
    Allowlist allowlist_;
    std::set<std::string, std::less<>> known_bad_sha256_;
    std::optional<double> hash_rate_threshold_;
    std::vector<std::string> files_;
};

// Where compiled signature databases are cached (docs/signatures.md#compiled-pack-cache):
// $GPUGUARD_RULE_CACHE_DIR when set (empty: no cache), else /var/cache/gpuguard
// as root, else $XDG_CACHE_HOME/gpuguard or ~/.cache/gpuguard.
signatures::CompileCache default_compile_cache();

// The built-in pack, compiled (about a second: do it once and share it), or
// loaded from `cache` when it holds the same pack compiled by the same
// Hyperscan (milliseconds). Matcher::cache_note() says which.
Result<std::shared_ptr<const signatures::Matcher>> compile_builtin_pack(
    const signatures::CompileCache& cache = default_compile_cache());

// Watches the rule files and rebuilds the RuleSet when they change. The
// callbacks run on the watcher's own thread.
// A valid change is active within about `debounce` + the user rules' compile
// time (well under a second); an invalid one is logged (logger "rules"),
// passed to on_error, and the last good set stays active.
class RuleSetWatcher {
  public:
    struct Callbacks {
        std::function<void(std::shared_ptr<const RuleSet>)> on_reload;  // after a good reload
        std::function<void(const Error&)> on_error;                     // after a rejected one
    };

    // Loads the initial set and starts the watching thread. Fails when
    // inotify is unavailable, or when the files do not build and
    // paths.last_good_dir is "". With a last_good_dir, files that do not
    // build start it on the copy kept there, or on the built-in pack alone
    // when there is none (start_error() and started_on() say so).
    static Result<std::unique_ptr<RuleSetWatcher>> start(
        RulePaths paths, std::shared_ptr<const signatures::Matcher> builtin, Callbacks callbacks,
        std::chrono::milliseconds debounce = std::chrono::milliseconds(100));

    ~RuleSetWatcher();  // stops and joins the thread
    RuleSetWatcher(const RuleSetWatcher&) = delete;
    RuleSetWatcher& operator=(const RuleSetWatcher&) = delete;

    // The active set; never null. Safe from any thread.
    std::shared_ptr<const RuleSet> current() const;
    uint64_t reloads() const;   // good reloads since start
    uint64_t rejected() const;  // rejected reloads since start
    // Why the files given at start were not used; nullopt when they were.
    const std::optional<Error>& start_error() const;
    // What it started on instead: "the last good rule set (N file(s) kept in
    // DIR)" or "the built-in pack alone (WHY)"; "" when start_error() is unset.
    const std::string& started_on() const;

    struct Impl;

  private:
    explicit RuleSetWatcher(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace gpuguard::rules
