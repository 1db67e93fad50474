#include "tests/support/agent_config.h"

namespace gpuguard::testing {

std::string scratch_paths_config(const std::filesystem::path& dir) {
    std::filesystem::create_directories(dir / "rules.d");
    return "journal:\n  dir: " + (dir / "journal").string() + "\n" +
           "rules:\n  main_file: " + (dir / "miner-rules.yaml").string() +
           "\n  drop_in_dir: " + (dir / "rules.d").string() + "\n";
}

}  // namespace gpuguard::testing
