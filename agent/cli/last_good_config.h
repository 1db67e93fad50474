// The configuration a start falls back on: a copy of the last file that
// loaded, with its SHA-256, kept in the agent's state directory — the first
// entry of $STATE_DIRECTORY, which systemd sets for the unit
// (StateDirectory=gpuguard), or $GPUGUARD_STATE_DIR — under
// last-good/config-<hash of the file's path>.yaml. Without a state directory
// nothing is kept and a broken file still stops the start.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "gpuguard/daemon/config.h"

namespace gpuguard::agent {

// Where the copy for `config_path` lives; nullopt without a state directory.
std::optional<std::filesystem::path> last_good_config_copy(const std::string& config_path);

// Keeps `text` (a configuration that loaded) as the copy at `copy`. Best effort.
void keep_last_good_config(const std::filesystem::path& copy, std::string_view text);

// The configuration kept at `copy`: kNotFound when there is none, kParse when
// its checksum does not match (a copy changed behind the agent is refused).
Result<Config> load_last_good_config(const std::filesystem::path& copy);

}  // namespace gpuguard::agent
