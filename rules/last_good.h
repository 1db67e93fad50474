// The last rule files that built a rule set, kept so that a start never
// fails open: a copy of each file (its text, its name and its SHA-256) in a
// directory of the agent's state, replaced whole after every good load. A
// start whose files do not build runs on this copy; a copy whose checksum no
// longer matches is refused, never trusted. Private to the rules library.
#pragma once

#include <filesystem>
#include <vector>

#include "gpuguard/common/result.h"
#include "gpuguard/rules/rules.h"

namespace gpuguard::rules {

// Replaces the copy in `dir` with `files` (written beside it, then renamed
// into place, so a crash leaves the old copy or the new one).
Status save_last_good(const std::filesystem::path& dir, const std::vector<RuleFile>& files);

// The files of the copy in `dir`, named as they were ("PATH (last good copy)").
// kNotFound when there is none; kParse when a file is missing or its
// checksum does not match the manifest.
Result<std::vector<RuleFile>> read_last_good(const std::filesystem::path& dir);

}  // namespace gpuguard::rules
