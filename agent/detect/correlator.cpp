#include "gpuguard/detect/correlator.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <fnmatch.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/netintel/stratum.h"

namespace gpuguard::agent {
namespace {

using rules::CorrelationRule;
using rules::EvidenceField;

// Strength order of actions, for "from_signatures": the strongest wins.
int action_rank(std::string_view action) {
    static constexpr std::string_view kOrder[] = {"alert",    "pause", "block_ip",
                                                  "deny_gpu", "kill",  "kill_now"};
    for (size_t i = 0; i < std::size(kOrder); ++i) {
        if (kOrder[i] == action) return static_cast<int>(i);
    }
    return 0;
}

std::string basename_of(std::string_view path) {
    const auto slash = path.rfind('/');
    return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// FNV-1a: detection ids must be the same live and in replay, on any host.
uint64_t fnv1a(std::string_view text, uint64_t hash = 1469598103934665603ull) {
    for (unsigned char c : text) {
        hash ^= c;
        hash *= 1099511628211ull;
    }
    return hash;
}

std::string detection_id(const std::string& rule_id, uint32_t pid, uint64_t first_ns) {
    const uint64_t hash =
        fnv1a(rule_id + "/" + std::to_string(pid) + "/" + std::to_string(first_ns));
    std::string text(16, '0');  // "%016" PRIx64
    for (int i = 15, shift = 0; i >= 0; --i, shift += 4) {
        text[i] = "0123456789abcdef"[(hash >> shift) & 0xf];
    }
    return text;
}

std::string gib(uint64_t bytes) {
    char text[32];
    snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
    return text;
}

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

bool in_scope(const rules::ScopeCondition& scope, const ProcessInfo& info) {
    if (!scope.users.empty() && !user_matches(scope.users, info)) return false;
    if (user_matches(scope.not_users, info)) return false;
    if (!scope.groups.empty() && !group_matches(scope.groups, info)) return false;
    if (group_matches(scope.not_groups, info)) return false;
    if (!scope.container_ids.empty() && !container_matches(scope.container_ids, info)) {
        return false;
    }
    if (container_matches(scope.not_container_ids, info)) return false;
    const auto name_matches = [&](const std::vector<std::string>& globs) {
        return !info.container_name.empty() &&
               std::any_of(globs.begin(), globs.end(), [&](const std::string& glob) {
                   return fnmatch(glob.c_str(), info.container_name.c_str(), 0) == 0;
               });
    };
    if (!scope.container_names.empty() && !name_matches(scope.container_names)) return false;
    if (name_matches(scope.not_container_names)) return false;
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

}  // namespace

Result<std::unique_ptr<Correlator>> Correlator::create(
    std::vector<rules::CorrelationRule> rules, std::shared_ptr<const rules::RuleSet> rule_set,
    const ProcessTable& table, CorrelatorOptions options) {
    auto scanner = rule_set->scanner();
    if (!scanner) return Unexpected{scanner.error()};
    return std::unique_ptr<Correlator>(
        new Correlator(std::move(rules), std::move(rule_set), std::move(*scanner), table, options));
}

Correlator::Correlator(std::vector<rules::CorrelationRule> rules,
                       std::shared_ptr<const rules::RuleSet> rule_set, rules::RuleScanner scanner,
                       const ProcessTable& table, CorrelatorOptions options)
    : rules_(std::move(rules)),
      rule_set_(std::move(rule_set)),
      scanner_(std::move(scanner)),
      table_(table),
      options_(options),
      has_time_rules_(time_dependent(rules_)) {
    reset_rule_set_caches();
}

void Correlator::reset_rule_set_caches() {
    signatures_.clear();
    for (const auto& entry : rule_set_->effective()) {
        signatures_.try_emplace(entry.signature.id, &entry);  // the first wins, as in find()
    }
    for (auto& cache : match_cache_) cache.clear();
    port_cache_.clear();
    verdicts_.clear();  // set_rule_set() drops every hit that points here
}

const rules::EffectiveSignature* Correlator::signature(std::string_view id) const {
    const auto found = signatures_.find(id);
    return found == signatures_.end() ? nullptr : found->second;
}

const std::vector<std::string_view>& Correlator::match_cached(signatures::Field field,
                                                              const std::string& text) {
    auto& cache = match_cache_[static_cast<size_t>(field)];
    const auto found = cache.find(text);
    if (found != cache.end()) return found->second;
    // Bounded: start over rather than grow with every distinct command line.
    if (cache.size() >= 4096) cache.clear();
    return cache.emplace(text, scanner_.match(field, text)).first->second;
}

const std::vector<std::string_view>& Correlator::match_port_cached(uint16_t port) {
    const auto found = port_cache_.find(port);
    if (found != port_cache_.end()) return found->second;
    return port_cache_.emplace(port, scanner_.match_port(port)).first->second;
}

Status Correlator::set_rule_set(std::shared_ptr<const rules::RuleSet> rule_set) {
    auto scanner = rule_set->scanner();
    if (!scanner) return Unexpected{scanner.error()};
    scanner_ = std::move(*scanner);
    rule_set_ = std::move(rule_set);
    reset_rule_set_caches();
    // Signature evidence depends on the rules: match every image again.
    for (auto&& [pid, state] : states_) {
        state.matched = false;
        state.hits.clear();
        state.disguise_ids.clear();
        state.dirty = true;
    }
    return {};
}

bool Correlator::time_dependent(const std::vector<rules::CorrelationRule>& rules) {
    return std::any_of(rules.begin(), rules.end(), [](const auto& rule) {
        return rule.memory_growth || rule.sustained_utilization || rule.quiet_io ||
               rule.gpu_memory_above || rule.time_window || !rule.gpu_index_not_in.empty() ||
               !rule.gpu_vendor_not_in.empty();
    });
}

void Correlator::set_rules(std::vector<rules::CorrelationRule> rules) {
    rules_ = std::move(rules);
    has_time_rules_ = time_dependent(rules_);
    for (auto& [key, verdict] : verdicts_) verdict = Verdict{};
    for (auto&& [pid, state] : states_) {
        state.dirty = true;
    }
}

bool Correlator::signature_matches(size_t index, const Hit& hit) const {
    const rules::SignatureCondition& condition = *rules_[index].signature;
    if (index >= 64) return condition.matches(hit.field, hit.id, hit.confidence);
    Verdict& verdict = *hit.verdict;
    const uint64_t bit = uint64_t{1} << index;
    if (!(verdict.judged & bit)) {
        verdict.judged |= bit;
        if (condition.matches(hit.field, hit.id, hit.confidence)) verdict.matches |= bit;
    }
    return (verdict.matches & bit) != 0;
}

Correlator::ProcessState& Correlator::state(uint32_t pid) { return states_[pid]; }

void Correlator::add_hits(ProcessState& state, EvidenceField field,
                          const std::vector<std::string_view>& ids, uint64_t ts_ns,
                          const std::string& detail) {
    for (std::string_view id : ids) {
        const bool known = std::any_of(state.hits.begin(), state.hits.end(), [&](const Hit& hit) {
            return hit.field == field && hit.id == id && hit.detail == detail;
        });
        if (known) continue;
        const rules::EffectiveSignature* effective = signature(id);
        if (!effective) continue;  // disabled since the match
        Verdict* verdict = &verdicts_[{field, effective->signature.id}];
        state.hits.push_back(Hit{field, std::string(id), effective->signature.confidence,
                                 rules::to_string(effective->action), ts_ns, detail, verdict});
        state.dirty = true;
    }
}

void Correlator::match_image(ProcessState& state, const ProcessInfo& info, uint64_t ts_ns) {
    state.matched = true;
    state.matched_comm = info.comm;
    state.dirty = true;
    // "/memfd:NAME (deleted)" and "/path/NAME (deleted)" run as NAME.
    std::string exe_name = basename_of(info.exe);
    if (exe_name.ends_with(" (deleted)")) exe_name.resize(exe_name.size() - 10);
    if (exe_name.starts_with("memfd:")) exe_name.erase(0, 6);
    static const std::vector<std::string_view> kNone;
    // A copy (empty but for miners): looking up the exe may clear the cache.
    const std::vector<std::string_view> by_comm =
        match_cached(signatures::Field::kProcess, info.comm);
    const auto& by_exe =
        info.exe.empty() ? kNone : match_cached(signatures::Field::kProcess, info.exe);
    add_hits(state, EvidenceField::kProcess, by_comm, ts_ns, info.comm);
    add_hits(state, EvidenceField::kProcess, by_exe, ts_ns, info.exe);
    // Disguise: the name the process shows is not its executable's, and only
    // the executable is a known one.
    state.disguise_ids.clear();
    const bool renamed = !info.comm.empty() && !exe_name.empty() &&
                         exe_name.compare(0, info.comm.size(), info.comm) != 0;
    if (renamed && by_comm.empty()) {
        for (auto id : by_exe) state.disguise_ids.emplace_back(id);
    }
    if (!info.cmdline.empty()) {
        const std::string cmdline = join(info.cmdline, " ");
        add_hits(state, EvidenceField::kCmdline, match_cached(signatures::Field::kCmdline, cmdline),
                 ts_ns, cmdline);
    }
}

void Correlator::observe(const Event& event, std::vector<Detection>& out) {
    std::vector<const Detection*> reported;
    observe(event, reported);
    for (const Detection* detection : reported) out.push_back(*detection);
}

void Correlator::report(const Detection& detection, std::vector<const Detection*>& out) {
    for (const Detection*& earlier : out) {
        if (earlier == &detection) {
            reported_twice_.push_back(detection);
            earlier = &reported_twice_.back();
        }
    }
    out.push_back(&detection);
}

void Correlator::observe(const Event& event, std::vector<const Detection*>& out) {
    reported_twice_.clear();
    ++stats_.events;
    const uint32_t pid = event.task.pid;
    struct Visitor {
        Correlator& self;
        const Event& event;
        uint32_t pid;
        std::vector<const Detection*>& out;

        void judge(uint32_t target) { self.evaluate(target, event.ts_ns, out); }

        void operator()(const Exec&) {
            ProcessState& state = self.states_[pid];
            state.matched = false;
            state.hits.erase(std::remove_if(state.hits.begin(), state.hits.end(),
                                            [](const Hit& hit) {
                                                // Network evidence outlives exec; the image's does
                                                // not.
                                                return hit.field != EvidenceField::kPort &&
                                                       hit.field != EvidenceField::kDomain &&
                                                       hit.field != EvidenceField::kPayload;
                                            }),
                             state.hits.end());
            state.dirty = true;
            state.scan_asked = false;
            state.sha256.clear();
            judge(pid);
        }
        void operator()(const ProcessSnapshot&) { (*this)(Exec{}); }
        void operator()(const ExeScan& scan) {
            // A verdict that arrives after the exit has nobody to judge.
            const ProcessInfo* info = self.table_.find(pid);
            if (!info || info->exited) return;
            ProcessState& state = self.states_[pid];
            state.scan_asked = true;
            if (!scan.error.empty()) return;
            state.sha256 = scan.sha256;
            state.scanned_ns = event.ts_ns;
            std::vector<std::string_view> ids(scan.signature_ids.begin(), scan.signature_ids.end());
            std::string detail = scan.path + " sha256:" + scan.sha256;
            if (!scan.rules.empty()) detail += " yara:" + join(scan.rules, " ");
            self.add_hits(state, EvidenceField::kYara, ids, event.ts_ns, detail);
            state.dirty = true;  // the sha256 may allowlist it
            judge(pid);
        }
        void operator()(const GpuOpen& open) {
            if (open.succeeded()) judge(pid);
        }
        void operator()(const GpuIoctl&) { judge(pid); }
        void operator()(const Connect& connect) {
            ProcessState& state = self.states_[pid];
            state.connect_ts.push_back(event.ts_ns);
            if (state.connect_ts.size() > 64) state.connect_ts.erase(state.connect_ts.begin());
            if (connect.result == 0 || connect.result == -115 /* EINPROGRESS */) {
                const auto& ids = self.match_port_cached(connect.port);
                if (!ids.empty()) {
                    const std::string peer =
                        connect.ip_version == 6
                            ? "[" + connect.address + "]:" + std::to_string(connect.port)
                            : connect.address + ":" + std::to_string(connect.port);
                    self.add_hits(state, EvidenceField::kPort, ids, event.ts_ns, peer);
                    state.peer = DetectionPeer{connect.address, connect.port, connect.domain, ""};
                }
                // The name an observed DNS answer gave the address (net_intel.h).
                if (!connect.domain.empty()) {
                    const auto& by_domain =
                        self.match_cached(signatures::Field::kDomain, connect.domain);
                    if (!by_domain.empty()) {
                        self.add_hits(state, EvidenceField::kDomain, by_domain, event.ts_ns,
                                      connect.domain);
                        state.peer =
                            DetectionPeer{connect.address, connect.port, connect.domain, ""};
                    }
                }
            }
            judge(pid);
        }
        void operator()(const NetPayload&) {}  // raw samples: net_intel.h derives Stratum events
        void operator()(const Stratum& stratum) {
            ProcessState& state = self.states_[pid];
            for (const auto& message : stratum.messages) {
                // Signatures see the raw line; the evidence (alerts) a wallet cut to a prefix.
                const auto ids = self.scanner_.match(signatures::Field::kPayload, message);
                if (!ids.empty()) {
                    self.add_hits(state, EvidenceField::kPayload, ids, event.ts_ns,
                                  agent::stratum::redact_wallets(message));
                }
            }
            // hash_rate_threshold (miner-rules.yaml): a rate above it is one more
            // piece of evidence on the payload signatures that matched.
            const auto threshold = self.rule_set_->hash_rate_threshold();
            const auto flagged = [](const Hit& hit) {
                return hit.detail.starts_with("hash rate ");
            };
            if (stratum.hash_rate && threshold && *stratum.hash_rate >= *threshold &&
                std::none_of(state.hits.begin(), state.hits.end(), flagged)) {
                std::vector<std::string> ids;
                for (const Hit& hit : state.hits) {
                    if (hit.field == EvidenceField::kPayload) ids.push_back(hit.id);
                }
                char detail[128];
                snprintf(detail, sizeof(detail),
                         "hash rate %.4g H/s above hash_rate_threshold %.4g H/s",
                         *stratum.hash_rate, *threshold);
                self.add_hits(state, EvidenceField::kPayload,
                              std::vector<std::string_view>(ids.begin(), ids.end()), event.ts_ns,
                              detail);
            }
            state.peer = DetectionPeer{stratum.pool_address, stratum.pool_port, stratum.pool_domain,
                                       stratum.protocol};
            if (stratum.hash_rate && *stratum.hash_rate > state.hash_rate.value_or(0)) {
                state.hash_rate = stratum.hash_rate;  // the fastest session so far
                state.hash_rate_ns = event.ts_ns;
                state.dirty = true;
            }
            judge(pid);
        }
        void operator()(const ProcessIo& io) {
            ProcessState& state = self.states_[pid];
            state.io.push_back(IoSample{event.ts_ns, io});
            if (state.io.size() > self.options_.max_telemetry_samples) {
                state.io.erase(state.io.begin());
            }
            state.dirty = true;
            judge(pid);
        }
        void operator()(const Fork&) {}
        void operator()(const KillNow&) {}  // already enforced in the kernel; exit follows
        void operator()(const Exit&) {
            self.states_.erase(pid);
            auto first = self.open_.lower_bound({pid, std::string()});
            auto last = first;
            while (last != self.open_.end() && last->first.first == pid) ++last;
            self.open_.erase(first, last);
        }
        void operator()(const Telemetry& telemetry) {
            for (const auto& device : telemetry.devices) {
                GpuTelemetry& reading = self.gpu_by_device_[device];  // updated in place
                reading.index = telemetry.gpu_index;
                reading.vendor = telemetry.vendor;
                reading.utilization_percent = telemetry.utilization_percent;
                reading.processes.clear();
                for (const auto& usage : telemetry.processes) {
                    auto same = std::find_if(
                        reading.processes.begin(), reading.processes.end(),
                        [&](const ProcessGpuUsage& known) { return known.pid == usage.pid; });
                    if (same != reading.processes.end()) {
                        *same = usage;
                    } else {
                        reading.processes.push_back(usage);
                    }
                }
            }
            for (const auto& usage : telemetry.processes) {
                ProcessState& state = self.states_[usage.pid];
                state.usage.push_back(
                    UsageSample{event.ts_ns, usage.memory_bytes, usage.compute_percent});
                if (state.usage.size() > self.options_.max_telemetry_samples) {
                    state.usage.erase(state.usage.begin());
                }
                state.dirty = true;
                judge(usage.pid);
            }
        }
    };
    std::visit(Visitor{*this, event, pid, out}, event.data);
}

void Correlator::evaluate(uint32_t pid, uint64_t ts_ns, std::vector<const Detection*>& out) {
    const ProcessInfo* info = table_.find(pid);
    if (!info) return;
    ProcessState& state = states_[pid];
    // Again when the process renamed itself since (PR_SET_NAME): a process
    // judged under its parent's name before its own events came is judged
    // under the name it took.
    if (!state.matched || state.matched_comm != info->comm) match_image(state, *info, ts_ns);
    if (info->holds_gpu() != state.held_gpu) {
        state.held_gpu = info->holds_gpu();
        if (state.held_gpu && state.first_gpu_ns == 0) state.first_gpu_ns = ts_ns;
        state.dirty = true;
    }
    // Known-bad hashes need every executable's hash; otherwise GPU users
    // and processes with a signature hit are worth the scan.
    const bool hash_all = !rule_set_->known_bad_sha256().empty();
    if (options_.request_scans && !state.scan_asked &&
        (state.held_gpu || !state.hits.empty() || hash_all)) {
        state.scan_asked = true;
        scan_requests_.push_back(ScanRequest{pid, ts_ns, info->exe,
                                             state.held_gpu       ? "gpu_open"
                                             : state.hits.empty() ? "known_bad"
                                                                  : "signature"});
    }
    // Telemetry conditions depend on time passing; everything else only on
    // new evidence.
    if (!state.dirty && !(has_time_rules_ && (!state.usage.empty() || !state.io.empty()))) {
        return;
    }
    state.dirty = false;
    ++stats_.evaluations;

    std::vector<rules::ExeLocation> locations;
    bool locations_known = false;
    std::optional<bool> allowlisted;
    std::vector<const Hit*> hits;
    std::vector<Evidence> extra;
    for (const CorrelationRule& rule : rules_) {
        if (!rule.enabled) continue;
        if (rule.gpu_held && *rule.gpu_held != info->holds_gpu()) continue;
        if (rule.scope && !in_scope(*rule.scope, *info)) continue;
        hits.clear();
        extra.clear();
        // The first piece of extra evidence, made once the rule holds.
        const bool gpu_evidence = rule.gpu_held.value_or(false) && !info->gpus.empty();
        if (rule.signature) {
            const auto index = static_cast<size_t>(&rule - rules_.data());
            for (const Hit& hit : state.hits) {
                if (signature_matches(index, hit)) hits.push_back(&hit);
            }
            if (hits.empty()) continue;
        }
        if (!rule.exe_location.empty()) {
            if (!locations_known) {
                locations = rules::exe_locations(info->exe);
                locations_known = true;
            }
            const bool inside =
                std::any_of(rule.exe_location.begin(), rule.exe_location.end(), [&](auto where) {
                    return std::find(locations.begin(), locations.end(), where) != locations.end();
                });
            if (!inside) continue;
            extra.push_back(
                Evidence{ts_ns, "event", "exec", "", "process", "executable " + info->exe});
        }
        if (rule.hash_rate_above_threshold) {
            const auto threshold = rule_set_->hash_rate_threshold();
            if (!threshold || !state.hash_rate || *state.hash_rate < *threshold) continue;
            char detail[128];
            snprintf(detail, sizeof(detail),
                     "hash rate %.4g H/s above hash_rate_threshold %.4g H/s", *state.hash_rate,
                     *threshold);
            extra.push_back(
                Evidence{state.hash_rate_ns, "event", "stratum", "", "hash_rate", detail});
        }
        if (rule.known_bad_executable) {
            if (state.sha256.empty() || !rule_set_->known_bad_sha256().contains(state.sha256)) {
                continue;
            }
            extra.push_back(
                Evidence{state.scanned_ns, "event", "exe_scan", "", "sha256",
                         info->exe + " sha256:" + state.sha256 + " is in known_bad.sha256"});
        }
        if (rule.disguised) {
            // Only executables the rule's signature condition names count.
            const auto disguises = [&](const Hit& hit) {
                return hit.field == EvidenceField::kProcess && hit.detail == info->exe &&
                       std::find(state.disguise_ids.begin(), state.disguise_ids.end(), hit.id) !=
                           state.disguise_ids.end();
            };
            std::vector<const Hit*> disguise;
            for (const Hit* hit : hits) {
                if (disguises(*hit)) disguise.push_back(hit);
            }
            if (!rule.signature) {
                for (const Hit& hit : state.hits) {
                    if (disguises(hit)) disguise.push_back(&hit);
                }
            }
            if (disguise.empty()) continue;
            hits = std::move(disguise);
            extra.push_back(Evidence{ts_ns, "event", "exec", "", "process",
                                     "comm '" + info->comm + "' hides executable " + info->exe});
        }
        if (rule.memory_growth) {
            std::string detail;
            if (!memory_growth(*rule.memory_growth, state, ts_ns, detail)) continue;
            extra.push_back(Evidence{ts_ns, "telemetry", "telemetry", "", "memory", detail});
        }
        if (rule.sustained_utilization) {
            std::string detail;
            if (!sustained(*rule.sustained_utilization, state, ts_ns, detail)) continue;
            extra.push_back(Evidence{ts_ns, "telemetry", "telemetry", "", "utilization", detail});
        }
        if (rule.quiet_io) {
            std::string detail;
            if (!quiet_io(*rule.quiet_io, state, ts_ns, detail)) continue;
            extra.push_back(Evidence{ts_ns, "telemetry", "process_io", "", "io", detail});
        }
        if (rule.gpu_memory_above) {
            const auto& latest = state.usage.empty() ? UsageSample{} : state.usage.back();
            if (!latest.memory_bytes || *latest.memory_bytes <= *rule.gpu_memory_above) continue;
            extra.push_back(Evidence{latest.ts_ns, "policy", "telemetry", "", "memory",
                                     "GPU memory " + gib(*latest.memory_bytes) +
                                         " over the limit " + gib(*rule.gpu_memory_above)});
        }
        if (!rule.gpu_index_not_in.empty() || !rule.gpu_vendor_not_in.empty()) {
            std::string outside;
            for (const auto& gpu : gpus_of(*info)) {
                if (!rule.gpu_index_not_in.empty() && gpu.index >= 0 &&
                    std::find(rule.gpu_index_not_in.begin(), rule.gpu_index_not_in.end(),
                              static_cast<uint32_t>(gpu.index)) == rule.gpu_index_not_in.end()) {
                    outside = "GPU " + std::to_string(gpu.index) + " is not an allowed GPU";
                }
                if (!rule.gpu_vendor_not_in.empty() && !gpu.vendor.empty() &&
                    std::find(rule.gpu_vendor_not_in.begin(), rule.gpu_vendor_not_in.end(),
                              gpu.vendor) == rule.gpu_vendor_not_in.end()) {
                    outside = "GPU " + std::to_string(gpu.index) + " is " + gpu.vendor +
                              ", not an allowed vendor";
                }
            }
            if (outside.empty()) continue;
            extra.push_back(Evidence{ts_ns, "policy", "gpu_open", "", "gpu", outside});
        }
        if (rule.max_gpu_processes) {
            std::string detail;
            if (!over_process_limit(pid, *info, *rule.max_gpu_processes, detail)) continue;
            extra.push_back(Evidence{ts_ns, "policy", "gpu_open", "", "processes", detail});
        }
        if (rule.time_window) {
            // Last: the window alone never makes a violation, it scopes one.
            const int64_t wall_ns = static_cast<int64_t>(ts_ns) + realtime_offset_ns_;
            if (!rule.time_window->contains(wall_ns)) continue;
            extra.push_back(
                Evidence{ts_ns, "policy", "", "", "time",
                         "inside the policy's time window (" + rule.time_window->time_zone + ")"});
        }
        if (gpu_evidence) {
            const GpuHandle& first = info->gpus.front();
            extra.insert(extra.begin(), Evidence{state.first_gpu_ns, "event",
                                                 first.inherited ? "fork" : "gpu_open", "", "gpu",
                                                 "holds GPU device " + std::to_string(first.major) +
                                                     ":" + std::to_string(first.minor)});
        }
        raise(rule, *info, state, hits, extra, ts_ns, out, allowlisted);
    }
}

bool Correlator::over_process_limit(uint32_t pid, const ProcessInfo& info, uint32_t limit,
                                    std::string& detail) const {
    // The user's live GPU processes in order of first GPU use (pid breaks
    // ties): the first `limit` are within it.
    std::vector<std::pair<uint64_t, uint32_t>> holders;
    for (const auto& [other_pid, other] : states_) {
        if (!other.held_gpu) continue;
        const ProcessInfo* other_info = table_.find(other_pid);
        if (!other_info || other_info->exited || other_info->uid != info.uid) continue;
        holders.emplace_back(other.first_gpu_ns, other_pid);
    }
    if (holders.size() <= limit) return false;
    std::sort(holders.begin(), holders.end());
    const auto rank = std::find_if(holders.begin(), holders.end(),
                                   [&](const auto& holder) { return holder.second == pid; });
    if (rank == holders.end() || rank - holders.begin() < static_cast<std::ptrdiff_t>(limit)) {
        return false;
    }
    detail = "user " + (info.user.empty() ? std::to_string(info.uid) : info.user) + " runs " +
             std::to_string(holders.size()) + " GPU processes, limit " + std::to_string(limit);
    return true;
}

bool Correlator::memory_growth(const rules::MemoryGrowthCondition& condition,
                               const ProcessState& state, uint64_t ts_ns,
                               std::string& detail) const {
    if (state.usage.empty() || !state.usage.back().memory_bytes) return false;
    const auto& latest = state.usage.back();
    const uint64_t since = ts_ns > static_cast<uint64_t>(condition.within.count()) * 1'000'000'000
                               ? ts_ns - condition.within.count() * 1'000'000'000ull
                               : 0;
    std::optional<uint64_t> lowest;
    double busiest = 0;
    for (const auto& sample : state.usage) {
        if (sample.ts_ns < since) continue;
        if (sample.memory_bytes && (!lowest || *sample.memory_bytes < *lowest)) {
            lowest = sample.memory_bytes;
        }
        if (sample.compute_percent) busiest = std::max(busiest, *sample.compute_percent);
    }
    if (!lowest || *latest.memory_bytes < *lowest ||
        *latest.memory_bytes - *lowest <= condition.bytes) {
        return false;
    }
    if (busiest > condition.max_utilization_percent) return false;
    char text[160];
    snprintf(text, sizeof(text),
             "GPU memory grew from %s to %s within %llds, compute at most %.0f%%",
             gib(*lowest).c_str(), gib(*latest.memory_bytes).c_str(),
             static_cast<long long>(condition.within.count()), busiest);
    detail = text;
    return true;
}

bool Correlator::sustained(const rules::SustainedUtilizationCondition& condition,
                           const ProcessState& state, uint64_t ts_ns, std::string& detail) const {
    const uint64_t duration_ns = condition.duration.count() * 1'000'000'000ull;
    if (ts_ns < duration_ns || state.usage.empty()) return false;
    const uint64_t since = ts_ns - duration_ns;
    // Every reading of the window must be above the threshold, and the
    // samples must cover the whole window. A sample may lack the process's
    // reading: NVML leaves a busy process out of an interval now and then
    // (on an H200 shared by two CUDA processes, one 500 ms interval in five).
    // Such samples are passed over, but at least half must carry a reading.
    if (state.usage.front().ts_ns > since) return false;
    double lowest = 100;
    size_t samples = 0, readings = 0;
    for (auto sample = state.usage.rbegin(); sample != state.usage.rend(); ++sample) {
        ++samples;
        if (sample->compute_percent) {
            if (*sample->compute_percent <= condition.above_percent) return false;
            lowest = std::min(lowest, *sample->compute_percent);
            ++readings;
        }
        if (sample->ts_ns <= since) break;
    }
    if (readings * 2 < samples) return false;
    const auto connects = std::count_if(state.connect_ts.begin(), state.connect_ts.end(),
                                        [&](uint64_t ts) { return ts >= since; });
    if (connects > static_cast<long>(condition.max_connects) ||
        state.connect_ts.size() < condition.min_connects) {
        return false;
    }
    char text[200];
    int length =
        snprintf(text, sizeof(text),
                 "compute above %.0f%% (lowest %.0f%%) for %llds with %ld new connections",
                 condition.above_percent, lowest,
                 static_cast<long long>(condition.duration.count()), static_cast<long>(connects));
    if (readings < samples && length > 0 && static_cast<size_t>(length) < sizeof(text)) {
        snprintf(text + length, sizeof(text) - length, "; %zu of %zu samples without a reading",
                 samples - readings, samples);
    }
    detail = text;
    return true;
}

bool Correlator::quiet_io(const rules::QuietIoCondition& condition, const ProcessState& state,
                          uint64_t ts_ns, std::string& detail) {
    const uint64_t duration_ns = condition.duration.count() * 1'000'000'000ull;
    if (ts_ns < duration_ns || state.io.empty()) return false;
    const uint64_t since = ts_ns - duration_ns;
    // The counters at the window's start: the newest reading at or before
    // it. None means nobody watched the whole window.
    auto first =
        std::upper_bound(state.io.begin(), state.io.end(), since,
                         [](uint64_t ts, const IoSample& sample) { return ts < sample.ts_ns; });
    if (first == state.io.begin()) return false;
    const ProcessIo& start = std::prev(first)->counters;
    const ProcessIo& end = state.io.back().counters;
    if (!start.file_write_bytes || !end.file_write_bytes || !start.net_send_bytes ||
        !end.net_send_bytes || !start.net_sends || !end.net_sends) {
        return false;  // a counter is missing: cannot say the process is quiet
    }
    // A counter that went back belongs to another process (a reused pid).
    if (*end.file_write_bytes < *start.file_write_bytes ||
        *end.net_send_bytes < *start.net_send_bytes || *end.net_sends < *start.net_sends) {
        return false;
    }
    const uint64_t file_bytes = *end.file_write_bytes - *start.file_write_bytes;
    const uint64_t net_bytes = *end.net_send_bytes - *start.net_send_bytes;
    const uint64_t sends = *end.net_sends - *start.net_sends;
    if (file_bytes > condition.max_file_write_bytes || sends == 0 ||
        net_bytes > condition.max_net_send_bytes ||
        net_bytes > condition.max_bytes_per_send * sends) {
        return false;
    }
    // Periodic: the longest silence, from the window's start through every
    // reading where the send count moved to now, stays within max_send_gap.
    const uint64_t max_gap_ns = condition.max_send_gap.count() * 1'000'000'000ull;
    uint64_t last_send_ns = since, longest_gap_ns = 0;
    uint64_t previous_sends = *start.net_sends;
    for (auto sample = first; sample != state.io.end(); ++sample) {
        const uint64_t count = sample->counters.net_sends.value_or(previous_sends);
        if (count == previous_sends) continue;
        longest_gap_ns = std::max(longest_gap_ns, sample->ts_ns - last_send_ns);
        last_send_ns = sample->ts_ns;
        previous_sends = count;
    }
    longest_gap_ns = std::max(longest_gap_ns, ts_ns - last_send_ns);
    if (longest_gap_ns > max_gap_ns) return false;
    char text[200];
    snprintf(text, sizeof(text),
             "in %llds: %llu bytes written to files, %llu network sends of %llu bytes "
             "(longest pause %llds)",
             static_cast<long long>(condition.duration.count()),
             static_cast<unsigned long long>(file_bytes), static_cast<unsigned long long>(sends),
             static_cast<unsigned long long>(net_bytes),
             static_cast<long long>(longest_gap_ns / 1'000'000'000ull));
    detail = text;
    return true;
}

std::vector<DetectionGpu> Correlator::gpus_of(const ProcessInfo& info) const {
    std::vector<DetectionGpu> gpus;
    for (const auto& handle : info.gpus) {
        const bool seen = std::any_of(gpus.begin(), gpus.end(), [&](const DetectionGpu& known) {
            return known.major == handle.major && known.minor == handle.minor;
        });
        if (seen) continue;
        DetectionGpu gpu;
        gpu.major = handle.major;
        gpu.minor = handle.minor;
        char device[24];  // "major:minor", the key of gpu_by_device_
        char* end = std::to_chars(device, device + 10, handle.major).ptr;
        *end++ = ':';
        end = std::to_chars(end, device + sizeof(device), handle.minor).ptr;
        const auto found = gpu_by_device_.find(std::string_view(device, end - device));
        if (found != gpu_by_device_.end()) {
            const GpuTelemetry& reading = found->second;
            gpu.index = static_cast<int>(reading.index);
            gpu.vendor = reading.vendor;
            gpu.utilization_percent = reading.utilization_percent;
            const auto usage =
                std::find_if(reading.processes.begin(), reading.processes.end(),
                             [&](const ProcessGpuUsage& known) { return known.pid == info.pid; });
            if (usage != reading.processes.end()) {
                gpu.memory_used_bytes = usage->memory_bytes;
                gpu.process_utilization_percent = usage->compute_percent;
            }
        }
        gpus.push_back(std::move(gpu));
    }
    return gpus;
}

void Correlator::refresh(Detection& detection, const ProcessInfo& info, const ProcessState& state,
                         const std::vector<const Hit*>& hits, uint64_t ts_ns) const {
    for (const Hit* hit : hits) detection.signature_ids.push_back(hit->id);
    std::sort(detection.signature_ids.begin(), detection.signature_ids.end());
    detection.signature_ids.erase(
        std::unique(detection.signature_ids.begin(), detection.signature_ids.end()),
        detection.signature_ids.end());
    detection.last_seen_ns = ts_ns;
    detection.time_unix_ns =
        realtime_offset_ns_ ? static_cast<int64_t>(ts_ns) + realtime_offset_ns_ : 0;
    detection.process = describe_process(info);
    detection.gpus = gpus_of(info);
    if (state.peer) detection.peer = state.peer;
}

bool Correlator::adds_evidence(const Detection& detection, const std::vector<const Hit*>& hits,
                               const std::vector<Evidence>& extra) const {
    // The test raise() applies to each item; an item it would take is one
    // that no evidence of the open detection already covers.
    if (detection.evidence.size() >= options_.max_evidence) return false;
    const auto known = [&](std::string_view kind, std::string_view signature_id,
                           std::string_view field, std::string_view detail) {
        const bool by_value = kind == "signature" || kind == "yara";
        return std::any_of(detection.evidence.begin(), detection.evidence.end(),
                           [&](const Evidence& seen) {
                               return seen.kind == kind && seen.signature_id == signature_id &&
                                      seen.field == field && (!by_value || seen.detail == detail);
                           });
    };
    for (const Hit* hit : hits) {
        if (!known(hit->field == EvidenceField::kYara ? "yara" : "signature", hit->id,
                   rules::to_string(hit->field), hit->detail)) {
            return true;
        }
    }
    return std::any_of(extra.begin(), extra.end(), [&](const Evidence& item) {
        return !known(item.kind, item.signature_id, item.field, item.detail);
    });
}

void Correlator::raise(const CorrelationRule& rule, const ProcessInfo& info,
                       const ProcessState& state, const std::vector<const Hit*>& hits,
                       std::vector<Evidence>& extra, uint64_t ts_ns,
                       std::vector<const Detection*>& out, std::optional<bool>& allowlisted) {
    double confidence = rule.base_confidence;
    std::string action = rule.action == "from_signatures" ? "alert" : rule.action;
    for (const Hit* hit : hits) {
        confidence = rule.combine == rules::Combine::kMax
                         ? std::max(confidence, hit->confidence)
                         : 1.0 - (1.0 - confidence) * (1.0 - hit->confidence);
        if (rule.action == "from_signatures" && action_rank(hit->action) > action_rank(action)) {
            action = hit->action;
        }
    }
    confidence = std::round(std::min(confidence, 1.0) * 1000) / 1000;  // stable in JSON
    if (confidence < rule.min_confidence) return;

    if (!allowlisted) {
        // The sha256 is known once the executable's exe_scan came back.
        rules::ProcessIdentity identity{
            info.user,    static_cast<int64_t>(info.uid),           info.exe,
            state.sha256, info.container ? info.container->id : "", ""};
        allowlisted = rule_set_->allowlisted(identity);
    }
    if (*allowlisted) {
        ++stats_.allowlisted;
        return;
    }
    const auto key = std::make_pair(info.pid, rule.id);
    auto found = open_.find(key);
    const bool open = found != open_.end() && ts_ns < found->second.window_end_ns;
    // Most reports of an open detection bring nothing new: say so before
    // building its evidence.
    if (open && !adds_evidence(found->second.detection, hits, extra)) return;

    std::vector<Evidence> evidence;
    evidence.reserve(hits.size() + extra.size());
    for (const Hit* hit : hits) {
        const char* event_type = hit->field == EvidenceField::kPort      ? "connect"
                                 : hit->field == EvidenceField::kDomain  ? "connect"
                                 : hit->field == EvidenceField::kPayload ? "stratum"
                                 : hit->field == EvidenceField::kProcess ? "exec"
                                 : hit->field == EvidenceField::kCmdline ? "exec"
                                 : hit->field == EvidenceField::kYara    ? "exe_scan"
                                                                         : "";
        evidence.push_back(
            Evidence{hit->ts_ns, hit->field == EvidenceField::kYara ? "yara" : "signature",
                     event_type, hit->id, rules::to_string(hit->field), hit->detail});
    }
    for (auto& item : extra) evidence.push_back(std::move(item));
    // Oldest first, equal times in the order above: an insertion sort, which
    // for a detection's few items costs less than stable_sort's buffer.
    for (size_t i = 1; i < evidence.size(); ++i) {
        for (size_t j = i; j > 0 && evidence[j].ts_ns < evidence[j - 1].ts_ns; --j) {
            std::swap(evidence[j], evidence[j - 1]);
        }
    }

    if (open) {
        // Within the window: update when something new arrived.
        Detection& detection = found->second.detection;
        bool changed = false;
        for (auto& item : evidence) {
            // Signature evidence is new when its value is; an event or a
            // telemetry condition once per field (its numbers change every sample).
            const bool by_value = item.kind == "signature" || item.kind == "yara";
            const bool known = std::any_of(
                detection.evidence.begin(), detection.evidence.end(), [&](const Evidence& seen) {
                    return seen.kind == item.kind && seen.signature_id == item.signature_id &&
                           seen.field == item.field && (!by_value || seen.detail == item.detail);
                });
            if (known || detection.evidence.size() >= options_.max_evidence) continue;
            detection.evidence.push_back(std::move(item));
            changed = true;
        }
        if (!changed) return;
        detection.confidence = std::max(detection.confidence, confidence);
        if (action_rank(action) > action_rank(detection.action)) detection.action = action;
        refresh(detection, info, state, hits, ts_ns);
        ++detection.update;
        ++stats_.updates;
        report(detection, out);
        return;
    }

    // Built where it stays open (a window that ended is replaced).
    ++stats_.detections;
    Open& stored = found != open_.end() ? found->second : open_.try_emplace(key).first->second;
    stored.window_end_ns = ts_ns + static_cast<uint64_t>(rule.window.count()) * 1'000'000'000ull;
    Detection& detection = stored.detection;
    detection = Detection{};
    detection.first_seen_ns = evidence.empty() ? ts_ns : std::min(ts_ns, evidence.front().ts_ns);
    detection.id = detection_id(rule.id, info.pid, ts_ns);
    detection.rule_id = rule.id;
    detection.rule_name = rule.name;
    detection.ruleset = "gpuguard-correlation";
    detection.description = rule.description;
    detection.severity = rule.severity;
    detection.confidence = confidence;
    detection.mitre_technique_id = rule.mitre_id;
    detection.mitre_technique_name = rule.mitre_name;
    detection.mitre_tactic = rule.mitre_tactic;
    refresh(detection, info, state, hits, ts_ns);
    if (evidence.size() > options_.max_evidence) evidence.resize(options_.max_evidence);
    detection.evidence = std::move(evidence);
    detection.action = std::move(action);
    detection.dry_run = options_.dry_run || rule.dry_run;
    report(detection, out);
}

}  // namespace gpuguard::agent
