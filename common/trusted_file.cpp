#include "gpuguard/common/trusted_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include "gpuguard/common/dir_entries.h"
#include "gpuguard/common/read_file.h"
#include "gpuguard/common/unique_fd.h"

namespace gpuguard {
namespace {

std::string user_name(uid_t uid) {
    struct passwd entry {};
    struct passwd* found = nullptr;
    char buffer[1024];
    if (getpwuid_r(uid, &entry, buffer, sizeof buffer, &found) == 0 && found) {
        return found->pw_name;
    }
    return std::to_string(uid);
}

std::string group_name(gid_t gid) {
    struct group entry {};
    struct group* found = nullptr;
    char buffer[4096];
    if (getgrgid_r(gid, &entry, buffer, sizeof buffer, &found) == 0 && found) {
        return found->gr_name;
    }
    return std::to_string(gid);
}

Unexpected refused(const std::filesystem::path& path, const struct stat& st, uid_t owner) {
    const std::string who = owner == 0 ? "root" : "uid " + std::to_string(owner);
    return fail(ErrorCode::kPermission,
                path.string() + ": " + trust_problem(st, owner) + ": refused; make it " +
                    (st.st_uid != owner ? "owned by " + who + " and " : "") + "writable by " + who +
                    " only",
                0);  // no errno: callers pass this message on as it is
}

Unexpected open_error(const std::string& what, const std::filesystem::path& path, int err) {
    ErrorCode code = ErrorCode::kIo;
    if (err == ENOENT || err == ENOTDIR) code = ErrorCode::kNotFound;
    if (err == EACCES || err == EPERM) code = ErrorCode::kPermission;
    return fail(code, what + " " + path.string() + ": " + std::strerror(err), err);
}

}  // namespace

std::optional<uid_t> required_owner() {
    if (geteuid() == 0) return uid_t{0};
    return std::nullopt;
}

std::string trust_problem(const struct stat& st, uid_t owner) {
    std::string problem;
    if (st.st_uid != owner) {
        problem = "owned by " + user_name(st.st_uid);
    } else if (st.st_mode & S_IWGRP) {
        problem = (st.st_mode & S_IWOTH) ? "writable by group and others" : "writable by group";
    } else if (st.st_mode & S_IWOTH) {
        problem = "writable by others";
    } else {
        return "";
    }
    char mode[8];
    snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return problem + " (mode " + mode + ", owner " + user_name(st.st_uid) + ":" +
           group_name(st.st_gid) + ")";
}

Result<std::string> read_trusted_file(const std::filesystem::path& path,
                                      std::optional<uid_t> owner) {
    if (!owner) return read_file(path);
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return open_error("cannot read", path, errno);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return open_error("cannot stat", path, errno);
    if (!trust_problem(st, *owner).empty()) return refused(path, st, *owner);
    return read_open_file(fd.get(), path);  // the file just checked, not the path again
}

Result<std::vector<std::filesystem::path>> list_trusted_directory(
    const std::filesystem::path& dir, const std::function<bool(const std::string&)>& keep,
    std::optional<uid_t> owner) {
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return open_error("cannot list", dir, errno);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return open_error("cannot stat", dir, errno);
    if (owner) {
        if (!trust_problem(st, *owner).empty()) return refused(dir, st, *owner);
    }
    auto entries = list_open_directory(fd.get(), dir);
    if (!entries) return Unexpected{entries.error()};
    std::vector<std::filesystem::path> out;
    for (const DirEntry& entry : *entries) {
        if (keep(entry.name)) out.push_back(dir / entry.name);
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace gpuguard
