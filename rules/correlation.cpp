// Correlation rules' model (include/gpuguard/rules/correlation.h): evaluating
// conditions (time windows, signature and priority patterns), field and
// location names, and parsing durations and sizes. Reading them from YAML:
// correlation_reader.cpp.
#include "gpuguard/rules/correlation.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

#include <date/tz.h>

#include "gpuguard/common/text.h"
#include "rules/correlation_reader.h"
#include "rules/glob.h"

namespace gpuguard::rules {
namespace {

constexpr std::pair<EvidenceField, const char*> kFieldNames[] = {
    {EvidenceField::kProcess, "process"}, {EvidenceField::kCmdline, "cmdline"},
    {EvidenceField::kConfig, "config"},   {EvidenceField::kDomain, "domain"},
    {EvidenceField::kPayload, "payload"}, {EvidenceField::kPort, "port"},
    {EvidenceField::kYara, "yara"}};

}  // namespace

bool TimeWindowCondition::contains(int64_t unix_ns) const {
    using namespace std::chrono;
    const date::time_zone* zone = nullptr;
    try {
        zone = date::locate_zone(time_zone);
    } catch (const std::exception&) {
        return false;  // checked at load; a tz database that lost it matches nothing
    }
    const auto local = zone->to_local(sys_time<nanoseconds>(nanoseconds(unix_ns)));
    const auto day_start = floor<std::chrono::days>(local);
    const int minute = static_cast<int>(duration_cast<minutes>(local - day_start).count());
    const int weekday = static_cast<int>(date::weekday(day_start).c_encoding());
    const auto on = [&](int day) {
        return days.empty() || std::find(days.begin(), days.end(), day) != days.end();
    };
    if (from_minute < to_minute) return on(weekday) && minute >= from_minute && minute < to_minute;
    // Past midnight: the evening part is today's window, the morning part yesterday's.
    if (minute >= from_minute) return on(weekday);
    return minute < to_minute && on((weekday + 6) % 7);
}

const char* to_string(EvidenceField field) {
    for (const auto& [value, name] : kFieldNames) {
        if (value == field) return name;
    }
    return "unknown";
}

std::optional<EvidenceField> parse_evidence_field(std::string_view name) {
    for (const auto& [value, text] : kFieldNames) {
        if (name == text) return value;
    }
    return std::nullopt;
}

const char* to_string(ExeLocation location) {
    for (const auto& [value, name] : kLocationNames) {
        if (value == location) return name;
    }
    return "unknown";
}

const char* to_string(LibrarySign sign) {
    for (const auto& [value, name] : kLibrarySignNames) {
        if (value == sign) return name;
    }
    return "unknown";
}

const char* to_string(ModuleLoadContext context) {
    switch (context) {
        case ModuleLoadContext::kGpuProcess:
            return "gpu_process";
        case ModuleLoadContext::kFlaggedLineage:
            return "flagged_lineage";
        case ModuleLoadContext::kMinerOnHost:
            return "miner_on_host";
        case ModuleLoadContext::kAny:
            return "any";
    }
    return "unknown";
}

namespace {

// The directory part of `exe` below a temporary directory, or "" when it is
// not in one: "/tmp/_MEI123/x" -> "_MEI123/x".
std::string_view below_temp_dir(std::string_view exe) {
    for (std::string_view root : {"/tmp/", "/var/tmp/", "/dev/shm/"}) {
        if (exe.starts_with(root)) return exe.substr(root.size());
    }
    return {};
}

// The runtime whose unpack directory `below_tmp` is in (the first directory
// below the temporary one carries the runtime's own prefix), and the length
// of that directory's name.
std::optional<std::pair<LookAlike, size_t>> extracted_runtime(std::string_view below_tmp) {
    const auto slash = below_tmp.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    const std::string_view dir = below_tmp.substr(0, slash);
    if (dir.starts_with("_MEI")) return std::pair{LookAlike::kPyInstaller, slash};
    if (dir.starts_with("onefile_")) return std::pair{LookAlike::kNuitka, slash};
    if (dir.starts_with("staticx-")) return std::pair{LookAlike::kStaticx, slash};
    // Ollama (before 0.5.8) unpacked its GPU runners to $TMPDIR/ollamaNNN/runners/.
    if (dir.starts_with("ollama") && below_tmp.substr(slash + 1).starts_with("runners/")) {
        return std::pair{LookAlike::kOllama, slash};
    }
    return std::nullopt;
}

}  // namespace

bool temporary_path(std::string_view path) {
    for (std::string_view root : {"/tmp", "/var/tmp", "/dev/shm"}) {
        if (path.starts_with(root) && (path.size() == root.size() || path[root.size()] == '/')) {
            return true;
        }
    }
    return false;
}

bool temporary_look_alike(std::string_view path) {
    // "/tmp/_MEI123" itself, as PyInstaller's LD_LIBRARY_PATH names it.
    const std::string dir = std::string(path) + "/";
    return dir.starts_with("/tmp/.mount_") || extracted_runtime(below_temp_dir(dir)).has_value();
}

const char* to_string(LookAlike kind) {
    switch (kind) {
        case LookAlike::kAppImage:
            return "AppImage";
        case LookAlike::kPyInstaller:
            return "PyInstaller";
        case LookAlike::kNuitka:
            return "Nuitka";
        case LookAlike::kStaticx:
            return "staticx";
        case LookAlike::kOllama:
            return "Ollama";
    }
    return "unknown";
}

std::optional<LookAlikeClaim> look_alike_claim(std::string_view exe_as_written) {
    constexpr std::string_view kDeletedMark = " (deleted)";
    std::string exe = normal_path(exe_as_written);
    if (exe.ends_with(kDeletedMark)) exe.resize(exe.size() - kDeletedMark.size());
    constexpr std::string_view kMount = "/tmp/.mount_";
    if (exe.starts_with(kMount)) {
        const size_t end = exe.find('/', kMount.size());
        if (end == std::string::npos) return std::nullopt;
        return LookAlikeClaim{LookAlike::kAppImage, exe.substr(0, end)};
    }
    const std::string_view below_tmp = below_temp_dir(exe);
    const auto runtime = extracted_runtime(below_tmp);
    if (!runtime) return std::nullopt;
    const size_t root = exe.size() - below_tmp.size();
    return LookAlikeClaim{runtime->first, exe.substr(0, root + runtime->second)};
}

std::vector<ExeLocation> exe_locations(std::string_view exe_as_written,
                                       std::string_view exe_package, bool look_alike_refused) {
    std::vector<ExeLocation> out;
    if (exe_as_written.starts_with("/memfd:")) return {ExeLocation::kMemfd};
    std::string respelled;  // only when the path as written is not normal
    if (!is_normal_path(exe_as_written)) respelled = normal_path(exe_as_written);
    const std::string_view exe = respelled.empty() ? exe_as_written : respelled;
    constexpr std::string_view kDeletedMark = " (deleted)";
    const bool deleted = exe.ends_with(kDeletedMark);
    const std::string_view path =
        std::string_view(exe).substr(0, exe.size() - (deleted ? kDeletedMark.size() : 0));
    const std::string_view below_tmp = below_temp_dir(path);
    // What the name claims counts only until the agent found it untrue.
    const bool look_alike = !look_alike_refused && (path.starts_with("/tmp/.mount_") ||
                                                    extracted_runtime(below_tmp).has_value());
    if (look_alike && path.starts_with("/tmp/.mount_")) {
        out.push_back(ExeLocation::kAppImage);
    } else if (look_alike) {
        out.push_back(ExeLocation::kExtractedRuntime);
    } else if (path.starts_with("/tmp/")) {
        out.push_back(ExeLocation::kTmp);
    } else if (path.starts_with("/var/tmp/")) {
        out.push_back(ExeLocation::kVarTmp);
    } else if (path.starts_with("/dev/shm/")) {
        out.push_back(ExeLocation::kDevShm);
    }
    // A runtime removes what it unpacked, an AppImage unmounts when it ends.
    if (deleted && !exe_package.empty() && !path.starts_with("/usr/local/")) {
        out.push_back(ExeLocation::kPackageReplaced);
    } else if (deleted && !look_alike) {
        out.push_back(ExeLocation::kDeleted);
    }
    return out;
}

bool SignatureCondition::matches(EvidenceField field, std::string_view id,
                                 double confidence) const {
    if (confidence < min_confidence) return false;
    if (!fields.empty() && std::find(fields.begin(), fields.end(), field) == fields.end()) {
        return false;
    }
    if (!ids.empty() && std::none_of(ids.begin(), ids.end(),
                                     [&](const auto& glob) { return glob_matches(glob, id); })) {
        return false;
    }
    return std::none_of(exclude.begin(), exclude.end(),
                        [&](const auto& glob) { return glob_matches(glob, id); });
}

bool PriorityPattern::matches(std::string_view comm_value, std::string_view exe_value,
                              std::string_view cmdline_value, uint32_t uid,
                              std::string_view user) const {
    const auto any = [](const std::vector<std::string>& patterns, std::string_view text) {
        return patterns.empty() ||
               std::any_of(patterns.begin(), patterns.end(),
                           [&](const std::string& glob) { return glob_matches(glob, text); });
    };
    if (!any(comm, comm_value) || !any(exe, exe_value) || !any(cmdline, cmdline_value)) {
        return false;
    }
    if (users.empty()) return true;
    const std::string id = std::to_string(uid);
    return std::any_of(users.begin(), users.end(), [&](const std::string& name) {
        return name == id || (!user.empty() && name == user);
    });
}

int PriorityPolicy::priority_of(std::string_view comm, std::string_view exe,
                                std::string_view cmdline, uint32_t uid,
                                std::string_view user) const {
    for (const auto& pattern : processes) {
        if (pattern.matches(comm, exe, cmdline, uid, user)) return pattern.priority;
    }
    return default_priority;
}

std::optional<std::chrono::seconds> parse_duration(std::string_view text) {
    if (text.empty()) return std::nullopt;
    uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr == text.data()) return std::nullopt;
    const std::string_view unit(ptr, text.data() + text.size() - ptr);
    uint64_t scale = 0;
    if (unit == "s" || unit.empty()) {
        scale = 1;
    } else if (unit == "m") {
        scale = 60;
    } else if (unit == "h") {
        scale = 3600;
    } else if (unit == "d") {
        scale = 86400;
    } else {
        return std::nullopt;
    }
    if (value > (uint64_t{1} << 40)) return std::nullopt;
    return std::chrono::seconds(value * scale);
}

std::optional<uint64_t> parse_bytes(std::string_view text) {
    double value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr == text.data() || value < 0 || !std::isfinite(value)) {
        return std::nullopt;
    }
    std::string_view unit(ptr, text.data() + text.size() - ptr);
    while (unit.starts_with(' ')) unit.remove_prefix(1);
    static constexpr std::pair<std::string_view, double> kUnits[] = {{"", 1},
                                                                     {"B", 1},
                                                                     {"kB", 1e3},
                                                                     {"KB", 1e3},
                                                                     {"MB", 1e6},
                                                                     {"GB", 1e9},
                                                                     {"TB", 1e12},
                                                                     {"KiB", 1024.0},
                                                                     {"MiB", 1048576.0},
                                                                     {"GiB", 1073741824.0},
                                                                     {"TiB", 1099511627776.0}};
    for (const auto& [name, scale] : kUnits) {
        if (unit == name) {
            const double bytes = value * scale;
            if (bytes > 1.8e19) return std::nullopt;
            return static_cast<uint64_t>(std::llround(bytes));
        }
    }
    return std::nullopt;
}

}  // namespace gpuguard::rules
