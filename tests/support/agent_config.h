// Config text for agents started by tests.
#pragma once

#include <filesystem>
#include <string>

namespace gpuguard::testing {

// The sections that keep an agent under test inside `dir`: its journal
// (dir/journal) and rules (dir/miner-rules.yaml, dir/rules.d, created here),
// never the host's /var/lib/gpuguard or /etc/gpuguard, nor another test's.
// rules: comes last, so a test may append its own keys under it.
std::string scratch_paths_config(const std::filesystem::path& dir);

}  // namespace gpuguard::testing
