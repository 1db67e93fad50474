#include "tests/support/temp_dir.h"

#include <fstream>
#include <iterator>
#include <stdexcept>

#include <linux/magic.h>
#include <stdlib.h>
#include <sys/statfs.h>
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

namespace {

bool in_memory_filesystem(const std::filesystem::path& dir) {
    struct statfs fs {};
    if (statfs(dir.c_str(), &fs) != 0) return true;
    return fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC;
}

}  // namespace

DiskScratchFile::DiskScratchFile(const std::string& prefix) {
    std::filesystem::path dir = std::filesystem::current_path();
    if (in_memory_filesystem(dir) && !in_memory_filesystem("/var/tmp")) dir = "/var/tmp";
    path_ = (dir / (prefix + "-" + std::to_string(getpid()) + ".bin")).string();
}

DiskScratchFile::~DiskScratchFile() { unlink(path_.c_str()); }

std::string file_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void replace_file(const std::filesystem::path& path, const std::string& text) {
    const auto temporary = path.string() + ".new";
    {
        std::ofstream out(temporary);
        out << text;
        if (!out) throw std::runtime_error("cannot write " + temporary);
    }
    std::filesystem::rename(temporary, path);
}

}  // namespace gpuguard::testing
