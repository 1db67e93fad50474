// The pack files (signatures/packs/*.yaml, signatures/yara/*.yar) as compiled
// into the library by the build-time tool signatures/embed_pack_tool.cpp.
#pragma once

#include <string>
#include <vector>

namespace gpuguard::signatures {

// The embedded bytes are XOR-ed with this so the binary holds no clear miner strings.
inline constexpr unsigned char kEmbedMask = 0xa5;

struct EmbeddedFile {
    std::string name;  // "packs/xmrig.yaml" style, relative to signatures/
    std::string text;
};

// Pack YAML files first (sorted by name), then YARA sources (sorted).
std::vector<EmbeddedFile> embedded_pack_files();

}  // namespace gpuguard::signatures
