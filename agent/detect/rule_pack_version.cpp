#include "gpuguard/detect/rule_pack_version.h"

#include <cstdint>
#include <string_view>

#include <fmt/format.h>

namespace gpuguard::agent {
namespace {

// FNV-1a over length-prefixed fields, so ("ab","c") and ("a","bc") differ.
class Digest {
  public:
    void add(std::string_view text) {
        add_number(text.size());
        for (const unsigned char c : text) mix(c);
    }
    void add_number(uint64_t value) {
        for (int shift = 0; shift < 64; shift += 8) mix(static_cast<unsigned char>(value >> shift));
    }
    uint64_t value() const { return hash_; }

  private:
    void mix(unsigned char byte) {
        hash_ ^= byte;
        hash_ *= 0x100000001b3ull;
    }
    uint64_t hash_ = 0xcbf29ce484222325ull;
};

}  // namespace

std::string rule_pack_version(const rules::RuleSet& rule_set,
                              const std::vector<rules::CorrelationRule>& correlation) {
    Digest digest;
    for (const auto& effective : rule_set.effective()) {
        const auto& signature = effective.signature;
        digest.add(signature.id);
        digest.add_number(static_cast<uint64_t>(signature.severity));
        digest.add(fmt::format("{:.6f}", signature.confidence));
        digest.add_number(static_cast<uint64_t>(effective.action));
        for (const auto& pattern : signature.patterns) {
            digest.add_number(static_cast<uint64_t>(pattern.field));
            digest.add_number(static_cast<uint64_t>(pattern.kind));
            digest.add_number(static_cast<uint64_t>(pattern.anchor));
            digest.add_number(pattern.caseless);
            digest.add(pattern.text);
        }
        for (const auto port : signature.ports) digest.add_number(port);
        for (const auto& yara : signature.yara_rules) digest.add(yara);
    }
    const auto& allowlist = rule_set.allowlist();
    for (const auto* list :
         {&allowlist.users, &allowlist.exe_paths, &allowlist.sha256, &allowlist.containers}) {
        digest.add_number(list->size());
        for (const auto& entry : *list) digest.add(entry);
    }
    for (const auto& sha256 : rule_set.known_bad_sha256()) digest.add(sha256);
    for (const auto& rule : correlation) {
        digest.add(rule.id);
        digest.add(rule.name);
        digest.add_number(static_cast<uint64_t>(rule.severity));
    }
    return fmt::format("{}s{}c-{:016x}", rule_set.effective().size(), correlation.size(),
                       digest.value());
}

}  // namespace gpuguard::agent
