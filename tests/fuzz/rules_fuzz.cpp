// libFuzzer target for rule files (miner-rules.yaml, rules.d/*.yaml) and
// signature pack YAML: any text given to RuleSet::build next to the
// built-in pack must build or fail with problems of the form
// "file:line:col: message", never crash or throw; what builds must give a
// working scanner. Seeds in corpus/rules are the shipped rule files, the
// test fixtures and a signature pack.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "gpuguard/rules/rules.h"
#include "gpuguard/signatures/signatures.h"

namespace rules = gpuguard::rules;
namespace signatures = gpuguard::signatures;

namespace {

// Compiled once per process: about a second, as in the agent.
std::shared_ptr<const signatures::Matcher> builtin() {
    static const auto compiled = []() -> std::shared_ptr<const signatures::Matcher> {
        auto pack = signatures::load_builtin_pack();
        if (!pack) std::abort();
        auto matcher = signatures::Matcher::compile(std::move(pack->signatures));
        if (!matcher) std::abort();
        return std::make_shared<const signatures::Matcher>(std::move(*matcher));
    }();
    return compiled;
}

void check_problems(const gpuguard::Error& error, const char* file) {
    if (error.code != gpuguard::ErrorCode::kParse &&
        error.code != gpuguard::ErrorCode::kInvalidArgument) {
        std::fprintf(stderr, "unexpected error code: %s\n", error.message.c_str());
        std::abort();
    }
    // Every problem line names the file it is in.
    if (error.message.rfind(file, 0) != 0) {
        std::fprintf(stderr, "problem without its file: %s\n", error.message.c_str());
        std::abort();
    }
}

}  // namespace

// The built-in pack is compiled here, before the first input: libFuzzer's
// per-input timeout does not apply, and on a loaded host that compile alone
// can take longer than it (a run under -timeout=10 on 8 parallel fuzzers
// reported the empty first input as a timeout).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
    (void)builtin();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > 16384) return 0;  // rule files are small; big inputs only slow Hyperscan down
    const std::string text(reinterpret_cast<const char*>(data), size);

    auto set = rules::RuleSet::build(builtin(), {{"fuzz.yaml", text}});
    if (!set) {
        check_problems(set.error(), "fuzz.yaml");
    } else {
        auto scanner = set->scanner();
        if (!scanner) {
            std::fprintf(stderr, "a built rule set has no scanner: %s\n",
                         scanner.error().message.c_str());
            std::abort();
        }
        for (const auto& signature : set->effective()) {
            if (set->find(signature.signature.id) == nullptr) std::abort();
        }
        (void)set->kill_now_names();
        // The rules as built match on what a process shows.
        const std::string sample = text.substr(0, 256);
        (void)scanner->match(signatures::Field::kCmdline, sample);
        (void)scanner->match_process(sample.substr(0, 15), sample);
        (void)scanner->match_port(static_cast<uint16_t>(size));
    }

    auto pack = signatures::parse_pack_yaml(text, "pack.yaml");
    if (!pack) check_problems(pack.error(), "pack.yaml");
    return 0;
}
