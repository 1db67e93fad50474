// BPF objects as the tamper tests handle them: the link of a process's
// program found through its fds, and a link of the caller's own.
#pragma once

#include <cstdint>
#include <string>

#include <sys/types.h>

namespace gpuguard::testing {

// The id of the link whose program is named `program` among the fds of
// `pid` (/proc/PID/fdinfo link_id and prog_id, the program's info); 0 when
// it holds none.
uint32_t link_id_of_program(pid_t pid, const std::string& program);

// An empty raw tracepoint program on task_rename, attached by the calling
// process: a link that is not the agent's. Its fd, or -1 when refused.
int own_raw_tracepoint_link();

}  // namespace gpuguard::testing
