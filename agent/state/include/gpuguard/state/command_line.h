// A command line the exec record cut short (bpf/sched.bpf.c copies at most
// sensor.argv_max_bytes of it), read again from /proc/PID/cmdline right
// after the exec: a miner's pool and wallet after a kilobyte of padding
// are then seen by the command-line signatures too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/events/event.h"

namespace gpuguard::agent {

// How much of /proc/PID/cmdline is read: more than ARG_MAX-sized padding
// is cut (ProcessCmdline::truncated), and the rest stays a bounded string
// for matching and alerts.
inline constexpr size_t kMaxCmdlineBytes = 64 * 1024;

// `bytes` (a cmdline's NUL-separated arguments, at most `max_bytes` of it
// kept) against the arguments the exec record copied, `exec_argv`: whether
// they start the same (ProcessCmdline without error).
ProcessCmdline full_cmdline_of(std::string_view bytes, const std::vector<std::string>& exec_argv,
                               size_t max_bytes = kMaxCmdlineBytes);

// The same for a live process, read from `proc_root`/PID/cmdline; nullopt
// when it cannot be read (the process is gone) or is empty (exiting).
std::optional<ProcessCmdline> read_full_cmdline(uint32_t pid,
                                                const std::vector<std::string>& exec_argv,
                                                const std::string& proc_root = "/proc",
                                                size_t max_bytes = kMaxCmdlineBytes);

}  // namespace gpuguard::agent
