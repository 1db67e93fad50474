// Runs a signature's test vectors: a vector "matches" when the signature's id
// comes back from any field the signature has patterns in, from its port
// list (vector = port number) or from its YARA rules (vector = file content).
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "gpuguard/signatures/signatures.h"

namespace gpuguard::signatures::testing {

inline bool contains(const std::vector<std::string_view>& ids, std::string_view id) {
    for (const auto& hit : ids) {
        if (hit == id) return true;
    }
    return false;
}

inline bool vector_matches(const Signature& signature, std::string_view text, Scanner& scanner,
                           YaraScanner& yara) {
    std::set<Field> fields;
    for (const auto& pattern : signature.patterns) {
        fields.insert(pattern.field);
        if (pattern.kind == PatternKind::kDomainSuffix) {
            fields.insert(Field::kCmdline);
            fields.insert(Field::kConfig);
        }
    }
    for (const Field field : fields) {
        if (contains(scanner.match(field, text), signature.id)) return true;
    }
    if (!signature.ports.empty()) {
        char* end = nullptr;
        const std::string number(text);
        const long port = std::strtol(number.c_str(), &end, 10);
        if (*end == '\0' && port > 0 && port < 65536 &&
            contains(scanner.match_port(static_cast<uint16_t>(port)), signature.id)) {
            return true;
        }
    }
    if (!signature.yara_rules.empty()) {
        auto report = yara.scan_bytes(text);
        if (report) {
            for (const auto& id : report->signature_ids) {
                if (id == signature.id) return true;
            }
        }
    }
    return false;
}

}  // namespace gpuguard::signatures::testing
