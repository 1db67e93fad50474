// Edits of a ProcessInfo both halves of the process table make (private to
// the state room): process_table.cpp from events, process_table_host.cpp
// from /proc.
#pragma once

#include "gpuguard/state/process_table.h"

namespace gpuguard::agent {

// What the kernel says about a task, which is newer than anything /proc gave.
inline void take_identity(ProcessInfo& info, const TaskInfo& task) {
    info.pid = task.pid;
    info.ppid = task.ppid;
    info.uid = task.uid;
    info.gid = task.gid;
    info.comm = task.comm;
    info.cgroup_id = task.cgroup_id;
}

inline void add_gpu(ProcessInfo& info, const GpuHandle& handle) {
    // An open seen: the sensor is not blind to this process after all.
    if (!handle.reported_only) {
        for (auto& existing : info.gpus) existing.reported_only = false;
    }
    for (auto& existing : info.gpus) {
        if (existing.major == handle.major && existing.minor == handle.minor &&
            (existing.fd == handle.fd || existing.fd < 0 || handle.fd < 0)) {
            if (existing.fd < 0) existing.fd = handle.fd;
            return;
        }
    }
    info.gpus.push_back(handle);
}

}  // namespace gpuguard::agent
