// Kernel feature probe: loads (and where cheap, attaches) one tiny program
// per mechanism, so later features choose the best hook and say clearly when
// one is missing. Backs `gpuguard probe`.
#pragma once

#include <string>
#include <vector>

namespace gpuguard::agent {

struct FeatureStatus {
    std::string name;         // "ring_buffer", "fentry", ...
    std::string description;  // what the feature is for, one line
    bool available = false;
    bool required = false;    // the sensor cannot run without it
    std::string detail;       // how it was decided, or why it failed (errno name)
};

// Runs every probe. Never fails as a whole: each unavailable feature carries
// its reason. Mounts tracefs at `tracefs_dir` when missing and allowed.
std::vector<FeatureStatus> probe_kernel_features(const std::string& tracefs_dir,
                                                 bool allow_mount_tracefs);

}  // namespace gpuguard::agent
