// libFuzzer target for the agent config file (gpuguard/daemon/config.h): any text
// must load or fail with kParse/kInvalidArgument naming the source, never
// crash or throw; a config that loads must survive config_to_yaml: the YAML
// it writes loads again and writes the same text. Seeds in corpus/config are
// the default config and the examples of docs/configuration.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpuguard/daemon/config.h"

namespace agent = gpuguard::agent;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto config = agent::load_config_text(text, "fuzz.yaml");
    if (!config) {
        const auto& error = config.error();
        if ((error.code != gpuguard::ErrorCode::kParse &&
             error.code != gpuguard::ErrorCode::kInvalidArgument) ||
            error.message.find("fuzz.yaml") == std::string::npos) {
            std::fprintf(stderr, "unexpected error: %s\n", error.message.c_str());
            std::abort();
        }
        return 0;
    }
    const std::string yaml = agent::config_to_yaml(*config);
    auto again = agent::load_config_text(yaml, "written.yaml");
    if (!again) {
        std::fprintf(stderr, "written config does not load: %s\n%s\n",
                     again.error().message.c_str(), yaml.c_str());
        std::abort();
    }
    if (agent::config_to_yaml(*again) != yaml) {
        std::fprintf(stderr, "config changed on the round trip:\n%s\n", yaml.c_str());
        std::abort();
    }
    return 0;
}
