// What the agent adds from /proc to a file change, an exec and a new GPU
// process before any is journaled (so replay judges the same): the
// absolute path of a relative one, the libraries /etc/ld.so.preload names
// after a change, and the library variables of a process's environment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpuguard/events/event.h"
#include "gpuguard/events/file_watch.h"

namespace gpuguard::agent {

// Completes `change`, written by `pid`: a relative path is made absolute
// through the fd it opened (/proc/PID/fd/N), else the dirfd or the working
// directory (raw_path keeps what the process passed); a change of kind ""
// is named by `patterns` once absolute; for kind "preload" (not an unlink)
// the libraries the file names are read through the process's root (for an
// open for writing, waiting up to 200 ms while the writer holds it open and
// it names none yet). Parts that cannot be read (the process is gone) are
// left as they were.
void complete_file_change(uint32_t pid, FileChange& change,
                          const std::vector<WatchPattern>& patterns,
                          const std::string& proc_root = "/proc");

// Completes `exec` of `pid` when its filename does not name the executable
// (an fd path: /proc/self/fd/N, /proc/PID/fd/N, /dev/fd/N, as execve of a
// memfd or fexecve pass it; or a relative path): exe is what /proc/PID/exe
// says, e.g. "/memfd:NAME (deleted)". When the filename is absolute but not
// the file's real path (a symlink, "..", "//", /proc/self/root in it), exe
// is its real path in the process's root. Read right after the event, so a
// process that exec'd again since shows its newer image (its own exec
// event follows and replaces it); left "" when the process is gone.
void complete_exec(uint32_t pid, Exec& exec, const std::string& proc_root = "/proc");

// The library names of an ld.so.preload file's contents: separated by
// white space or ':', '#' to the end of a line a comment.
std::vector<std::string> preload_libraries(std::string_view contents);

// LD_PRELOAD and LD_LIBRARY_PATH of `pid`'s environment as its current
// image started (/proc/PID/environ); error says why when it could not be
// read: the process is gone, or is in the middle of an exec (its new
// image's environment is not there yet; read it after the exec event).
ProcessEnv read_process_env(uint32_t pid, const std::string& proc_root = "/proc");

}  // namespace gpuguard::agent
