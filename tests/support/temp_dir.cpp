#include "tests/support/temp_dir.h"

#include <stdexcept>

#include <stdlib.h>
#include <unistd.h>

namespace gpuguard::testing {

TempDir::TempDir(const std::string& prefix) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern);
    path_ = pattern;
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

DiskScratchFile::DiskScratchFile(const std::string& prefix)
    : path_((std::filesystem::current_path() / (prefix + "-" + std::to_string(getpid()) + ".bin"))
                .string()) {}

DiskScratchFile::~DiskScratchFile() { unlink(path_.c_str()); }

}  // namespace gpuguard::testing
