// ExeScan::location_check: what a look-alike location's name claims,
// checked on the host while the process runs. A name alone exempts
// nothing: /tmp/.mount_X must be a FUSE (or squashfs) mount, a PyInstaller
// or staticx unpack directory must be in use by an ancestor outside it, a
// Nuitka one must carry the pid of the ancestor that unpacked it, an Ollama
// runner must descend from an ollama server (docs/detections.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuguard::agent {

// "" when `exe` is in no look-alike location; "verified: HOW" when the
// claim holds; "refused: WHY" when it does not (the location then counts as
// the temporary one it is).
std::string check_location(uint32_t pid, std::string_view exe, const std::string& proc_root);

}  // namespace gpuguard::agent
