// A scratch directory removed with everything in it when the object dies.
#pragma once

#include <filesystem>
#include <string>

namespace gpuguard::testing {

class TempDir {
  public:
    explicit TempDir(const std::string& prefix = "gpuguard-test");
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

  private:
    std::filesystem::path path_;
};

// A file name for a test's own disk writes, removed at scope end: in the
// current directory (ctest runs a test in the build tree), else /var/tmp,
// whichever is not a tmpfs or ramfs (/tmp may be one): only writes to a
// disk filesystem count in /proc/PID/io's write_bytes.
class DiskScratchFile {
  public:
    explicit DiskScratchFile(const std::string& prefix);
    ~DiskScratchFile();
    DiskScratchFile(const DiskScratchFile&) = delete;
    DiskScratchFile& operator=(const DiskScratchFile&) = delete;

    const std::string& path() const { return path_; }

  private:
    std::string path_;
};

// The whole file as text ("" when it cannot be read).
std::string file_text(const std::filesystem::path& path);

// Writes `text` to `path` atomically (a temporary file renamed over it), as
// editors and configuration managers do.
void replace_file(const std::filesystem::path& path, const std::string& text);

}  // namespace gpuguard::testing
