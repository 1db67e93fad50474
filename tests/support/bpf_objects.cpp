#include "tests/support/bpf_objects.h"

#include <filesystem>
#include <sstream>

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include "gpuguard/common/read_file.h"

namespace gpuguard::testing {

uint32_t link_id_of_program(pid_t pid, const std::string& program) {
    std::error_code ec;
    for (const auto& entry :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fdinfo", ec)) {
        auto text = read_file(entry.path());
        if (!text) continue;  // closed since
        std::istringstream info(*text);
        uint32_t link_id = 0, prog_id = 0;
        for (std::string key; info >> key;) {
            if (key == "link_id:") info >> link_id;
            if (key == "prog_id:") info >> prog_id;
        }
        if (!link_id || !prog_id) continue;
        const int prog = bpf_prog_get_fd_by_id(prog_id);
        if (prog < 0) continue;
        bpf_prog_info prog_info{};
        uint32_t size = sizeof(prog_info);
        const bool named = bpf_obj_get_info_by_fd(prog, &prog_info, &size) == 0 &&
                           program.compare(0, sizeof(prog_info.name) - 1, prog_info.name) == 0;
        close(prog);
        if (named) return link_id;
    }
    return 0;
}

int own_raw_tracepoint_link() {
    const bpf_insn empty[] = {
        {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0},  // r0 = 0
        {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
    };
    const int prog =
        bpf_prog_load(BPF_PROG_TYPE_RAW_TRACEPOINT, "gg_not_agent", "GPL", empty, 2, nullptr);
    if (prog < 0) return -1;
    const int link = bpf_raw_tracepoint_open("task_rename", prog);
    close(prog);
    return link;
}

}  // namespace gpuguard::testing
