// A short, stable name for the rules in force: what `gpuguard status`
// shows and every journal segment header records, so a responder can tell
// whether two alerts were judged by the same rules.
#pragma once

#include <string>
#include <vector>

#include "gpuguard/rules/correlation.h"
#include "gpuguard/rules/rules.h"

namespace gpuguard::agent {

// "<signatures>s<correlation rules>c-<16 hex digits>": counts, then a 64-bit
// FNV-1a digest of every effective signature (id, severity, confidence,
// action, patterns, ports, YARA rules), the allowlist, the known-bad hashes
// and each correlation rule's id, name and severity. Equal rules give equal
// versions on every host and build; it identifies, it does not authenticate.
std::string rule_pack_version(const rules::RuleSet& rule_set,
                              const std::vector<rules::CorrelationRule>& correlation);

}  // namespace gpuguard::agent
