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

}  // namespace gpuguard::testing
