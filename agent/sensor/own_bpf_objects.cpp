#include "own_bpf_objects.h"

#include <sstream>

#include "events.h"
#include "gpuguard/common/dir_entries.h"
#include "gpuguard/common/read_file.h"
#include "gpuguard/sensor/sensor_support.h"

namespace gpuguard::agent {

BpfObjects held_bpf_objects(const std::string& fdinfo_dir) {
    BpfObjects objects;
    auto fds = list_numbered_entries(fdinfo_dir);
    if (!fds) return objects;
    for (uint32_t fd : *fds) {
        auto text = read_file(fdinfo_dir + "/" + std::to_string(fd));
        if (!text) continue;  // closed since the listing
        std::istringstream info(*text);
        uint32_t link_id = 0, prog_id = 0;
        for (std::string key; info >> key;) {
            if (key == "link_id:") info >> link_id;
            if (key == "prog_id:") info >> prog_id;
        }
        if (link_id) objects.emplace(GG_BPF_OBJECT_LINK, link_id);
        if (prog_id) objects.emplace(GG_BPF_OBJECT_PROG, prog_id);
    }
    return objects;
}

Status sync_bpf_objects(bpf_map* map, const BpfObjects& wanted, BpfObjects& loaded) {
    for (auto it = loaded.begin(); it != loaded.end();) {
        if (wanted.contains(*it)) {
            ++it;
            continue;
        }
        const gg_bpf_object_key key{it->second, it->first};
        (void)bpf_map__delete_elem(map, &key, sizeof(key), 0);
        it = loaded.erase(it);
    }
    const uint8_t present = 1;
    for (const auto& object : wanted) {
        if (loaded.contains(object)) continue;
        const gg_bpf_object_key key{object.second, object.first};
        if (int err = bpf_map__update_elem(map, &key, sizeof(key), &present, sizeof(present), 0);
            err) {
            return Unexpected{
                libbpf_error("listing the agent's BPF objects for the tamper hook "
                             "(agent_bpf_objects full?)",
                             err)};
        }
        loaded.insert(object);
    }
    return {};
}

}  // namespace gpuguard::agent
