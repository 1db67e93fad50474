// Files the agent takes orders from (its configuration, rule files, rule
// directories): when the agent runs as root, only root may be able to change
// them, or whoever can write one can turn detection off or make the agent
// kill what it likes. The check is on the file actually opened (fstat of the
// descriptor), not on a path looked at before the open.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <sys/types.h>

#include "gpuguard/common/result.h"

namespace gpuguard {

// The owner the agent's config and rule files must have: root (0) while the
// agent runs as root (euid 0); nullopt (no check) otherwise, where an
// unprivileged agent cannot act beyond its own user anyway.
std::optional<uid_t> required_owner();

// Why a file or directory with `st` is not trusted, in words ("writable by
// group (mode 0664, owner root:staff)"), or "" when it is owned by `owner`
// and writable by nobody else. Group or other write on a directory with the
// sticky bit is still refused: the files in it are the agent's orders.
std::string trust_problem(const struct stat& st, uid_t owner);

// The whole contents of `path` when it passes the check (owner given), else
// kPermission with one line naming the file, its mode and owner:
// "PATH: writable by group (mode 0664, owner root:staff): refused; make it
// writable by root only". Read errors as read_file() reports them.
Result<std::string> read_trusted_file(const std::filesystem::path& path,
                                      std::optional<uid_t> owner = required_owner());

// The entries of directory `dir` for which `keep(name)` holds, sorted, as
// paths under `dir`, when the directory itself passes the check (the files
// are checked when read). Fails with kPermission as read_trusted_file(), or
// kNotFound/kIo "cannot list DIR: STRERROR".
Result<std::vector<std::filesystem::path>> list_trusted_directory(
    const std::filesystem::path& dir, const std::function<bool(const std::string&)>& keep,
    std::optional<uid_t> owner = required_owner());

}  // namespace gpuguard
