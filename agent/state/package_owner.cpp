#include "gpuguard/state/package_owner.h"

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <sys/stat.h>

#include "gpuguard/common/dir_entries.h"
#include "gpuguard/common/read_file.h"

namespace gpuguard::agent {
namespace {

constexpr size_t kMaxCachedAnswers = 512;

// The spellings of `path` a list may hold: on a merged-/usr system dpkg
// keeps /bin/ls while the kernel resolves /usr/bin/ls, and the reverse.
std::vector<std::string> spellings(const std::string& path) {
    std::vector<std::string> out{path};
    for (std::string_view top : {"/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/"}) {
        if (path.starts_with(top)) out.push_back("/usr" + path);
        if (path.starts_with(std::string("/usr") + std::string(top))) out.push_back(path.substr(4));
    }
    return out;
}

bool lists(const std::string& contents, const std::string& path) {
    for (size_t at = contents.find(path); at != std::string::npos;
         at = contents.find(path, at + 1)) {
        const size_t end = at + path.size();
        if ((at == 0 || contents[at - 1] == '\n') &&
            (end == contents.size() || contents[end] == '\n')) {
            return true;
        }
    }
    return false;
}

std::string scan(const std::string& info_dir, const std::string& path) {
    auto entries = list_directory(info_dir);
    if (!entries) return "";
    const auto candidates = spellings(path);
    for (const DirEntry& entry : *entries) {
        if (!entry.name.ends_with(".list")) continue;
        auto contents = read_file(info_dir + "/" + entry.name);
        if (!contents) continue;
        for (const std::string& candidate : candidates) {
            if (!lists(*contents, candidate)) continue;
            // "libc6:amd64.list": the package, without its architecture.
            std::string package = entry.name.substr(0, entry.name.size() - 5);
            package = package.substr(0, package.find(':'));
            return "dpkg:" + package;
        }
    }
    return "";
}

}  // namespace

std::string package_owner(const std::string& root, const std::string& path) {
    if (path.empty() || path.front() != '/' || path.starts_with("/usr/local/")) return "";
    const std::string info_dir = (root == "/" ? "" : root) + "/var/lib/dpkg/info";
    struct stat st {};
    if (::stat(info_dir.c_str(), &st) != 0) return "";
    // dpkg replaces a list by rename when it installs or removes a package:
    // the directory's mtime moves and the cached answers of it are stale.
    using Key = std::tuple<dev_t, ino_t, int64_t, int64_t, std::string>;
    static std::mutex mutex;
    static std::map<Key, std::string> answers;
    const Key key{st.st_dev, st.st_ino, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, path};
    {
        std::lock_guard lock(mutex);
        if (auto found = answers.find(key); found != answers.end()) return found->second;
    }
    std::string owner = scan(info_dir, path);
    std::lock_guard lock(mutex);
    if (answers.size() >= kMaxCachedAnswers) answers.clear();
    answers.emplace(key, owner);
    return owner;
}

}  // namespace gpuguard::agent
