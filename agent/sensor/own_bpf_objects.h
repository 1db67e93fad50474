// The agent's own BPF links and programs, as the kernel's tamper hook
// (bpf/tamper.bpf.c, agent_bpf_objects) needs them: a bpf(2) detach or
// link update is reported only when the fd it names holds one of these.
// Private to the sensor room; Sensor::protect_own_bpf_objects forwards.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include <bpf/libbpf.h>

#include "gpuguard/common/result.h"

namespace gpuguard::agent {

// (gg_bpf_object_kind, id) of every link and program whose fd the process
// of `fdinfo_dir` (/proc/self/fdinfo) holds: a link fd's fdinfo names the
// link and its program (link_id, prog_id), a program fd's its program.
using BpfObjects = std::set<std::pair<uint32_t, uint32_t>>;
BpfObjects held_bpf_objects(const std::string& fdinfo_dir = "/proc/self/fdinfo");

// Makes `map` hold exactly `wanted`, given that it holds `loaded` now
// (updated to what it holds after, also on failure).
Status sync_bpf_objects(bpf_map* map, const BpfObjects& wanted, BpfObjects& loaded);

}  // namespace gpuguard::agent
