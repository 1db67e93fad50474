// The YAML reader behind correlation.h's parse_* functions, shared by
// correlation_reader.cpp (rule files, guard policies, scalar values) and
// correlation_conditions.cpp (a rule's `when:` conditions), and the location
// names both it and correlation.cpp use.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "gpuguard/rules/correlation.h"
#include "rules/yaml_diagnostics.h"

namespace gpuguard::rules {

inline constexpr std::pair<ExeLocation, const char*> kLocationNames[] = {
    {ExeLocation::kTmp, "tmp"},
    {ExeLocation::kVarTmp, "var_tmp"},
    {ExeLocation::kDevShm, "dev_shm"},
    {ExeLocation::kDeleted, "deleted"},
    {ExeLocation::kMemfd, "memfd"},
    {ExeLocation::kAppImage, "appimage"},
    {ExeLocation::kExtractedRuntime, "extracted_runtime"},
    {ExeLocation::kPackageReplaced, "package_replaced"}};

inline constexpr std::pair<LibrarySign, const char*> kLibrarySignNames[] = {
    {LibrarySign::kTemporary, "temporary"},
    {LibrarySign::kRecent, "recently_written"},
    {LibrarySign::kOthersCanWrite, "writable_by_others"},
    {LibrarySign::kMinerSignature, "miner_signature"}};

// `text` as a finite number, all of it.
std::optional<double> parse_number(const std::string& text);

// Reads one YAML document; every problem goes to errors().
class RuleReader {
  public:
    explicit RuleReader(const std::string& source);

    // The `rules:` list (correlation rules).
    std::vector<CorrelationRule> read(const YAML::Node& root);
    std::vector<std::string> errors() const;
    // The `priority_guard:` section, when there is one.
    std::optional<PriorityPolicy> read_priority(const YAML::Node& root);

  private:
    // correlation_reader.cpp: scalars, one rule, one guard process pattern.
    std::optional<std::string> string(const YAML::Node& map, const char* key,
                                      const std::string& path, bool required);
    std::optional<double> number(const YAML::Node& node, const std::string& path, double lo,
                                 double hi);
    static std::string fmt_number(double value);
    std::optional<std::chrono::seconds> duration(const YAML::Node& node, const std::string& path);
    std::optional<int> whole(const YAML::Node& node, const std::string& path);
    std::optional<bool> boolean(const YAML::Node& node, const std::string& path);
    std::vector<std::string> globs(const YAML::Node& node, const std::string& path);
    CorrelationRule read_rule(const YAML::Node& node, const std::string& path);
    std::optional<Severity> severity(const YAML::Node& map, const std::string& where,
                                     bool required);
    std::optional<std::string> action(const YAML::Node& map, const std::string& where);
    // correlation_override.cpp: an `{id, override: {...}}` entry.
    CorrelationRule read_override(const YAML::Node& node, const std::string& path);
    void read_confidence(const YAML::Node& node, const std::string& path, CorrelationRule& rule);
    std::shared_ptr<const SupportingSignals> read_supporting(const YAML::Node& node,
                                                             const std::string& path);
    void read_priority_pattern(const YAML::Node& item, const std::string& where,
                               PriorityPolicy& policy);

    // correlation_conditions.cpp: the `when:` conditions, one function per kind.
    int read_conditions(const YAML::Node& when, const std::string& path, CorrelationRule& rule);
    SignatureCondition read_signature(const YAML::Node& node, const std::string& path);
    void read_agent_tamper(const YAML::Node& node, const std::string& where,
                           std::vector<std::string>& kinds);
    // The values a list of names stands for by `names` (kLocationNames,
    // kLibrarySignNames); an unknown `what` is named with every known one.
    template <typename Value, size_t N>
    void read_names(const YAML::Node& node, const std::string& where, const char* what,
                    const std::pair<Value, const char*> (&names)[N], std::vector<Value>& out) {
        for (auto& [text, item] : diag_.scalar_list(node, where)) {
            const auto found =
                std::find_if(std::begin(names), std::end(names),
                             [&text = text](const auto& entry) { return text == entry.second; });
            if (found != std::end(names)) {
                out.push_back(found->first);
                continue;
            }
            std::string known;
            for (const auto& entry : names)
                known += (known.empty() ? "" : ", ") + std::string(entry.second);
            diag_.error(item, where + ": unknown " + what + " '" + text + "' (" + known + ")");
        }
    }
    MemoryGrowthCondition read_memory_growth(const YAML::Node& node, const std::string& where);
    void read_statistic(const YAML::Node& node, const std::string& where, UtilizationStatistic& by,
                        int& percentile);
    SustainedCpuCondition read_sustained_cpu(const YAML::Node& node, const std::string& where);
    UnexplainedGpuLoadCondition read_unexplained_gpu_load(const YAML::Node& node,
                                                          const std::string& where);
    SustainedUtilizationCondition read_sustained_utilization(const YAML::Node& node,
                                                             const std::string& where);
    QuietIoCondition read_quiet_io(const YAML::Node& node, const std::string& where);
    GpuPipeMixCondition read_gpu_pipe_mix(const YAML::Node& node, const std::string& where);
    ModuleLoadCondition read_module_load(const YAML::Node& node, const std::string& where);
    TrustChangeCondition read_trust_change(const YAML::Node& node, const std::string& where);
    std::optional<uint64_t> read_gpu_memory_above(const YAML::Node& node, const std::string& where);
    void read_gpu_index_not_in(const YAML::Node& node, const std::string& where,
                               std::vector<uint32_t>& indexes);
    ScopeCondition read_scope(const YAML::Node& node, const std::string& where);
    TimeWindowCondition read_time_window(const YAML::Node& node, const std::string& where);
    std::optional<int> clock_minutes(const YAML::Node& node, const std::string& path);
    void size(const YAML::Node& node, const char* key, const std::string& where, uint64_t& bytes);

    Diagnostics diag_;
    std::string source_;
};

}  // namespace gpuguard::rules
