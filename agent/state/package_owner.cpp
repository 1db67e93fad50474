#include "gpuguard/state/package_owner.h"

#include <map>
#include <mutex>
#include <optional>
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

// The stem of the list that names `path` ("curl", "libc6:amd64"), "" none.
std::string scan(const std::string& info_dir, const std::string& path) {
    auto entries = list_directory(info_dir);
    if (!entries) return "";
    const auto candidates = spellings(path);
    for (const DirEntry& entry : *entries) {
        if (!entry.name.ends_with(".list")) continue;
        auto contents = read_file(info_dir + "/" + entry.name);
        if (!contents) continue;
        for (const std::string& candidate : candidates) {
            if (lists(*contents, candidate)) return entry.name.substr(0, entry.name.size() - 5);
        }
    }
    return "";
}

std::string info_dir_of(const std::string& root) {
    return (root == "/" ? "" : root) + "/var/lib/dpkg/info";
}

// The list stem owning `path` under `root`, cached; nullopt without a dpkg database.
std::optional<std::string> owning_list(const std::string& root, const std::string& path) {
    const std::string info_dir = info_dir_of(root);
    struct stat st {};
    if (::stat(info_dir.c_str(), &st) != 0) return std::nullopt;
    if (path.empty() || path.front() != '/' || path.starts_with("/usr/local/")) return "";
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
    std::string stem = scan(info_dir, path);
    std::lock_guard lock(mutex);
    if (answers.size() >= kMaxCachedAnswers) answers.clear();
    answers.emplace(key, stem);
    return stem;
}

// "libc6:amd64" -> "dpkg:libc6".
std::string package_of(const std::string& stem) {
    return stem.empty() ? "" : "dpkg:" + stem.substr(0, stem.find(':'));
}

}  // namespace

std::string package_owner(const std::string& root, const std::string& path) {
    return package_of(owning_list(root, path).value_or(""));
}

PackageFileCheck check_package_file(const std::string& root, const std::string& path,
                                    const std::string& md5) {
    const auto stem = owning_list(root, path);
    if (!stem) return {};
    if (stem->empty()) return {"", "unowned"};
    PackageFileCheck check{package_of(*stem), "unverified"};
    // "d41d8cd98f00b204e9800998ecf8427e  usr/bin/curl": paths without their '/'.
    auto sums = read_file(info_dir_of(root) + "/" + *stem + ".md5sums");
    if (!sums) return check;
    for (const std::string& spelling : spellings(path)) {
        const std::string tail = "  " + spelling.substr(1);
        for (size_t at = sums->find(tail); at != std::string::npos; at = sums->find(tail, at + 1)) {
            const size_t end = at + tail.size();
            const size_t line = sums->rfind('\n', at);
            const size_t start = line == std::string::npos ? 0 : line + 1;
            if ((end != sums->size() && (*sums)[end] != '\n') || at - start != 32) continue;
            check.check = sums->compare(start, 32, md5) == 0 ? "intact" : "modified";
            return check;
        }
    }
    return check;
}

}  // namespace gpuguard::agent
