// One `when:` condition of a correlation rule (docs/rules.md), judged over
// the evidence book: whether it holds for a process now, and the evidence
// that says so. Each condition is a class of its own in this folder, made
// from the rule as rules/ parsed it; conditions_of() lists a rule's in the
// order their evidence is reported. A condition reads the book, never
// writes it, and depends on nothing but the context it is given, so that
// live and replay judge alike.
//
// Adding a condition: its field in rules::CorrelationRule and its reader in
// rules/correlation_conditions.cpp (the YAML, with file:line:col errors),
// then a class here (name(), time_dependent(), holds(), needs() when it
// cannot hold without one of the facts facts_of reads), its line in
// condition_list.cpp and its unit test in tests/agent/detect/conditions/.
// docs/architecture.md walks through one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string_view>
#include <vector>

#include "evidence_book.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/rules/rules.h"

namespace gpuguard::agent {

// What one rule's judgement of a process gathers; reused across a
// process's rules (the executable's locations are read once).
struct RuleInputs {
    std::vector<rules::ExeLocation> locations;  // of the executable
    bool locations_known = false;
    std::vector<const Hit*> hits;  // the signature hits the rule names
    std::vector<Evidence> extra;   // the evidence beyond them, in the conditions' order
};

// A rule's index among the correlator's rules, or kSupportingSignal for a
// supporting signal (verdicts are cached per rule, and some evidence goes
// with a rule but not with its signals).
inline constexpr size_t kSupportingSignal = SIZE_MAX;

// What a condition may read.
struct ConditionContext {
    const rules::CorrelationRule& rule;  // the rule or supporting signal judged
    size_t rule_index;                   // kSupportingSignal for a supporting signal
    uint32_t pid;
    const ProcessInfo& info;
    const ProcessEvidence& evidence;  // the process's own
    const EvidenceBook& book;         // the other processes, the host's GPUs
    const rules::RuleSet& rule_set;   // hash_rate_threshold, known_bad
    uint64_t ts_ns;                   // now, by the events' clock
    int64_t realtime_offset_ns;       // ts_ns + this: the wall clock (0: unknown)
    // The GPU judged, for a rule judged per GPU (Condition::judges_gpu):
    // `info` is then its subject, pid 0. Null when a process is judged.
    const GpuLoad* gpu = nullptr;
};

// Facts about a process that some conditions need before they can hold,
// read once per evaluation (facts_of): a rule needing one the process lacks
// is passed over without its conditions being judged (most processes hold
// no GPU and carry no signature hit, tamper, trust change or module load).
enum Fact : uint32_t {
    kFactHoldsGpu = 1u << 0,
    kFactHoldsNoGpu = 1u << 1,
    kFactHits = 1u << 2,
    kFactTampers = 1u << 3,
    kFactTrustChanges = 1u << 4,
    kFactFileChanges = 1u << 5,
    kFactModuleLoads = 1u << 6,
    kFactHidden = 1u << 7,
    kFactProbes = 1u << 8,
    kFactGpuFaults = 1u << 9,
};

inline uint32_t facts_of(const ProcessInfo& info, const ProcessEvidence& evidence) {
    uint32_t facts = info.holds_gpu() ? kFactHoldsGpu : kFactHoldsNoGpu;
    if (!evidence.hits.empty()) facts |= kFactHits;
    if (!evidence.tampers.empty()) facts |= kFactTampers;
    if (!evidence.trust_changes.empty()) facts |= kFactTrustChanges;
    if (!evidence.files.empty()) facts |= kFactFileChanges;
    if (!evidence.modules.empty()) facts |= kFactModuleLoads;
    if (evidence.hidden_ns != 0) facts |= kFactHidden;
    if (!evidence.probes.empty()) facts |= kFactProbes;
    if (!evidence.gpu_faults.empty()) facts |= kFactGpuFaults;
    return facts;
}

class Condition {
  public:
    virtual ~Condition() = default;
    // The rule language's key under `when:`.
    virtual std::string_view name() const = 0;
    // Whether it can change as time passes with no new event (telemetry
    // over a window, the wall clock): the correlator then judges a process
    // at each sample, not only when its evidence changed.
    virtual bool time_dependent() const { return false; }
    // Whether it judges a GPU rather than a process: a rule with it is
    // judged at each telemetry sample of each GPU, its detection naming
    // the GPU (pid 0), never for a process.
    virtual bool judges_gpu() const { return false; }
    // Whether it holds; its evidence goes to `in` (hits it names to
    // in.hits, the rest to in.extra). Left as it was when it does not.
    virtual bool holds(const ConditionContext& context, RuleInputs& in) const = 0;
    // The facts (Fact) without which holds() is false for a process.
    virtual uint32_t needs() const { return 0; }
    // Once every condition of the rule held: evidence too costly to build
    // for each rule tried (gpu_held's, a detection's first item).
    virtual void held(const ConditionContext&, RuleInputs&) const {}
};

// The `percentile` (1..99) of `readings` by nearest rank: p20 is the
// reading that four in five are at or above. Reorders them; not empty.
inline double nearest_rank(std::vector<double>& readings, int percentile) {
    const size_t rank =
        static_cast<size_t>(std::ceil(percentile / 100.0 * static_cast<double>(readings.size())));
    const size_t index = rank == 0 ? 0 : rank - 1;
    std::nth_element(readings.begin(), readings.begin() + index, readings.end());
    return readings[index];
}

// " (95 %: LOW to HIGH)" of a hash rate's interval, "" when unknown.
inline std::string hash_rate_interval(const std::optional<double>& low,
                                      const std::optional<double>& high) {
    if (!low || !high) return "";
    char text[64];
    snprintf(text, sizeof(text), " (95 %%: %.2g to %.2g)", *low, *high);
    return text;
}

// "20.0 GiB", as evidence writes a size.
inline std::string gib(uint64_t bytes) {
    char text[32];
    snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
    return text;
}

// "wrote PATH", "renamed onto PATH", "unlinked PATH", with the libraries a
// preload file names.
inline std::string describe_file_change(const std::string& operation, const std::string& path,
                                        const std::vector<std::string>& libraries) {
    std::string text = (operation == "write"    ? "wrote "
                        : operation == "rename" ? "renamed onto "
                                                : "unlinked ") +
                       path;
    if (!libraries.empty()) text += " (libraries: " + join(libraries, ", ") + ")";
    return text;
}

using Conditions = std::vector<std::unique_ptr<const Condition>>;

// The conditions `rule` sets, in the order their evidence is reported.
Conditions conditions_of(const rules::CorrelationRule& rule);
// Whether any of them depends on time.
bool time_dependent(const Conditions& conditions);

// Each condition's factory (one per file here): the condition when `rule`
// sets it, else null.
namespace conditions {
std::unique_ptr<const Condition> gpu_held(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> scope(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> signature(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> exe_location(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> hash_rate_above_threshold(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> known_bad_executable(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> agent_tamper(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> trust_change(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> disguised(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> memory_growth(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> sustained_utilization(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> sustained_cpu(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> gpu_unseen(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> unexplained_gpu_load(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> gpu_stack(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> unreadable(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> quiet_io(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> gpu_memory_above(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> gpu_not_allowed(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> max_gpu_processes(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> gpu_outside_allocation(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> gpu_xid(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> gpu_pipe_mix(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> opaque_peer(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> mining_flow(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> pool_answered(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> hidden_from_proc(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> module_load(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> file_changed(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> library_injection(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> persistence_after_detection(const rules::CorrelationRule& rule);
std::unique_ptr<const Condition> time_window(const rules::CorrelationRule& rule);
}  // namespace conditions

}  // namespace gpuguard::agent
