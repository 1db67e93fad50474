#include "gpuguard/detect/config_scanner.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "gpuguard/common/logging.h"
#include "gpuguard/common/sha256.h"
#include "gpuguard/netintel/stratum.h"

namespace gpuguard::agent {
namespace {

using signatures::Field;

bool holds(const std::vector<std::string_view>& ids, std::string_view id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// Where the pieces of `text` start: line i is [starts[i], starts[i + 1] - 1).
std::vector<size_t> line_starts(std::string_view text) {
    std::vector<size_t> starts{0};
    for (size_t at = text.find('\n'); at != std::string_view::npos; at = text.find('\n', at + 1)) {
        starts.push_back(at + 1);
    }
    return starts;
}

// Index of the line holding byte `offset`.
size_t line_of(const std::vector<size_t>& starts, size_t offset) {
    return static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), offset) -
                               starts.begin()) -
           1;
}

std::string_view without_cr(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
}

// The shortest piece of `text` that `id` matches in: the first end where a
// prefix matches, then the last start from which that prefix still does.
std::pair<size_t, size_t> narrowest(rules::RuleScanner& scanner, std::string_view text,
                                    std::string_view id) {
    size_t low = 1, high = text.size();
    while (low < high) {
        const size_t mid = low + (high - low) / 2;
        if (holds(scanner.match(Field::kConfig, text.substr(0, mid)), id)) {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    const size_t end = high;
    size_t first = 0, last = end - 1;
    while (first < last) {
        const size_t mid = first + (last - first + 1) / 2;
        if (holds(scanner.match(Field::kConfig, text.substr(mid, end - mid)), id)) {
            first = mid;
        } else {
            last = mid - 1;
        }
    }
    return {first, end};
}

bool wallet_token(std::string_view token) {
    const std::string_view wallet = token.substr(0, token.find_first_of("./+"));
    return wallet.size() > 16 && std::all_of(wallet.begin(), wallet.end(), [](char c) {
               return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
           });
}

}  // namespace

std::vector<ConfigLine> select_config_lines(rules::RuleScanner& scanner, std::string_view text,
                                            const ConfigLineLimits& limits) {
    std::vector<ConfigLine> out;
    const auto whole = scanner.match(Field::kConfig, text);
    if (whole.empty()) return out;
    std::set<std::string, std::less<>> uncovered(whole.begin(), whole.end());
    const std::vector<size_t> starts = line_starts(text);
    for (size_t i = 0; i < starts.size() && out.size() < limits.max_lines; ++i) {
        const size_t end = i + 1 < starts.size() ? starts[i + 1] - 1 : text.size();
        const std::string_view line = without_cr(text.substr(starts[i], end - starts[i]));
        if (line.empty() || line.size() > limits.max_line_bytes) continue;
        const auto ids = scanner.match(Field::kConfig, line);
        if (ids.empty()) continue;
        out.push_back(ConfigLine{static_cast<uint32_t>(i + 1), std::string(line)});
        for (auto id : ids) {
            if (auto found = uncovered.find(id); found != uncovered.end()) uncovered.erase(found);
        }
    }
    while (!uncovered.empty() && out.size() < limits.max_lines) {
        const std::string id = *uncovered.begin();
        uncovered.erase(uncovered.begin());
        const auto [from, to] = narrowest(scanner, text, id);
        // Whole lines around the piece when they fit, else the piece alone.
        const size_t first_line = line_of(starts, from);
        const size_t last_line = line_of(starts, to - 1);
        const size_t run_end =
            last_line + 1 < starts.size() ? starts[last_line + 1] - 1 : text.size();
        std::string_view piece = text.substr(starts[first_line], run_end - starts[first_line]);
        if (piece.size() > limits.max_line_bytes) piece = text.substr(from, to - from);
        piece = without_cr(piece);
        if (piece.size() > limits.max_line_bytes) continue;
        const auto ids = scanner.match(Field::kConfig, piece);
        if (!holds(ids, id)) continue;  // matched only where the file went on
        out.push_back(ConfigLine{static_cast<uint32_t>(first_line + 1), std::string(piece)});
        for (auto other : ids) {
            if (auto found = uncovered.find(other); found != uncovered.end()) {
                uncovered.erase(found);
            }
        }
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const ConfigLine& a, const ConfigLine& b) { return a.line < b.line; });
    return out;
}

std::string redact_config_line(std::string_view text) {
    // One line: a run of lines joined by a space, each without its indentation.
    std::string flat;
    for (size_t start = 0; start <= text.size();) {
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = without_cr(text.substr(start, end - start));
        line.remove_prefix(std::min(line.find_first_not_of(" \t"), line.size()));
        if (!flat.empty() && !line.empty()) flat += ' ';
        flat += line;
        start = end + 1;
    }
    // Quoted values first (JSON), then bare tokens (INI, key: value lines).
    const std::string quoted = stratum::redact_wallets(flat);
    std::string out;
    out.reserve(quoted.size());
    bool in_string = false;
    size_t at = 0;
    while (at < quoted.size()) {
        const char c = quoted[at];
        if (c == '"') in_string = !in_string;
        const bool separator =
            c == '"' || c == ' ' || c == '\t' || c == '=' || c == ',' || c == ';';
        if (in_string || separator) {
            out += c;
            ++at;
            continue;
        }
        const size_t end = std::min(quoted.find_first_of(" \t=,;\"", at), quoted.size());
        const std::string_view token(quoted.data() + at, end - at);
        out += wallet_token(token) ? stratum::redact_login(token) : std::string(token);
        at = end;
    }
    const size_t first = out.find_first_not_of(" \t");
    if (first == std::string::npos) return "";
    return out.substr(first, out.find_last_not_of(" \t") + 1 - first);
}

Result<std::unique_ptr<ConfigScanWorker>> ConfigScanWorker::create(
    std::shared_ptr<const rules::RuleSet> rule_set, Deliver deliver, ConfigScanOptions options) {
    auto scanner = rule_set->scanner();
    if (!scanner) return Unexpected{scanner.error()};
    return std::unique_ptr<ConfigScanWorker>(
        new ConfigScanWorker(std::move(*scanner), std::move(deliver), std::move(options)));
}

ConfigScanWorker::ConfigScanWorker(rules::RuleScanner scanner, Deliver deliver,
                                   ConfigScanOptions options)
    : scanner_(std::move(scanner)),
      deliver_(std::move(deliver)),
      options_(std::move(options)),
      worker_([this](ProcessWorker::Request& request) { work(request); }, options_.proc_root,
              options_.max_queue) {}

ConfigScanWorker::~ConfigScanWorker() = default;

bool ConfigScanWorker::submit(const TaskInfo& task, uint64_t start_time_ns) {
    return worker_.submit(task, false, {}, start_time_ns);
}

void ConfigScanWorker::set_rule_set(std::shared_ptr<const rules::RuleSet> rule_set) {
    std::lock_guard lock(mutex_);
    next_rules_ = std::move(rule_set);
}

ConfigScanStats ConfigScanWorker::stats() const {
    std::lock_guard lock(mutex_);
    ConfigScanStats stats = stats_;
    stats.requested = worker_.requested();
    stats.dropped += worker_.dropped();
    return stats;
}

std::optional<ConfigScanWorker::Answer> ConfigScanWorker::answer(uint32_t pid,
                                                                 const ConfigCandidate& candidate,
                                                                 const std::string& cwd,
                                                                 std::string& path) {
    auto file = open_config_file(pid, candidate, cwd, options_.proc_root);
    if (!file) {
        const ErrorCode code = file.error().code;
        if (code == ErrorCode::kNotFound) return std::nullopt;
        logger("config")->debug("pid {}: {}", pid, file.error().message);
        {
            std::lock_guard lock(mutex_);
            ++stats_.refused;
        }
        // A file root could not read: one the command line names (a FUSE
        // mount without allow_other refuses root), or any that failed with
        // an I/O error. Root refused a default candidate's lookup also on an
        // NFS home with root_squash: not reported.
        const bool named = candidate.reason == "argument";
        if (code == ErrorCode::kIo || (named && code == ErrorCode::kPermission)) {
            path = candidate.path.starts_with("/") || cwd.empty()
                       ? candidate.path
                       : (cwd.ends_with("/") ? cwd : cwd + "/") + candidate.path;
            Answer refused;
            refused.error = file.error().message;
            return refused;
        }
        return std::nullopt;
    }
    path = file->path();
    if (auto cached = cache_.find(file->version()); cached != cache_.end()) {
        std::lock_guard lock(mutex_);
        ++stats_.cache_hits;
        return cached->second;
    }
    bool truncated = false;
    auto text = file->read(options_.max_bytes, truncated);
    if (!text) {
        logger("config")->debug("pid {}: {}", pid, text.error().message);
        std::lock_guard lock(mutex_);
        ++stats_.refused;
        Answer unread;  // opened, then the read failed: reported, not cached
        unread.size = file->version().size;
        unread.error = text.error().message;
        return unread;
    }
    Answer result;
    result.size = file->version().size;
    result.sha256 = sha256_hex(*text);
    result.truncated = truncated;
    result.lines = select_config_lines(scanner_, *text, options_.limits);
    {
        std::lock_guard lock(mutex_);
        ++stats_.files_read;
        stats_.truncated += truncated;
    }
    if (cache_.size() >= options_.max_cached) cache_.clear();
    cache_.emplace(file->version(), result);
    return result;
}

std::vector<ConfigFile> ConfigScanWorker::scan(uint32_t pid) {
    std::vector<ConfigFile> out;
    auto context = read_config_context(pid, options_.proc_root);
    if (!context) return out;
    std::set<std::string> seen;  // one file reached by two candidates is reported once
    for (const auto& candidate : config_candidates(*context)) {
        std::string path;
        auto found = answer(pid, candidate, context->cwd, path);
        if (!found || (found->lines.empty() && found->error.empty()) || !seen.insert(path).second) {
            continue;
        }
        out.push_back(ConfigFile{path, candidate.reason, found->size, found->sha256,
                                 found->truncated, std::move(found->lines),
                                 std::move(found->error)});
    }
    return out;
}

void ConfigScanWorker::work(ProcessWorker::Request& request) {
    const auto log = logger("config");
    std::shared_ptr<const rules::RuleSet> rules;
    {
        std::lock_guard lock(mutex_);
        rules = std::exchange(next_rules_, nullptr);
    }
    if (rules) {
        if (auto scanner = rules->scanner()) {
            scanner_ = std::move(*scanner);
            cache_.clear();
        } else {
            log->error("config files: new rules not applied: {}", scanner.error().message);
        }
    }
    auto files = scan(request.task.pid);
    // Exited meanwhile: what /proc showed may be a later process's.
    const bool gone = request.process.exited();
    size_t delivered = 0;
    for (auto& file : files) {
        if (gone) break;
        log->debug("pid {}: {} ({}): {} matching line(s){}", request.task.pid, file.path,
                   file.reason, file.lines.size(), file.error.empty() ? "" : ", " + file.error);
        Event event;
        event.task = request.task;
        event.data = std::move(file);
        deliver_(std::move(event));
        ++delivered;
    }
    std::lock_guard lock(mutex_);
    stats_.dropped += gone;
    stats_.reported += delivered;
}

}  // namespace gpuguard::agent
