// Pod identity and the kubelet's GPU allocation (gpuguard/state/pod_allocation.h).
#include "gpuguard/state/pod_allocation.h"

#include <algorithm>

#include "gpuguard/common/dir_entries.h"
#include "gpuguard/common/read_file.h"
#include "gpuguard/common/text.h"
#include "gpuguard/state/workload.h"

namespace gpuguard::agent {
namespace {

// A pod UID: 36 characters of hex and dashes; a static pod's is 32 hex.
bool pod_uid_shaped(std::string_view text) {
    if (text.size() != 36 && text.size() != 32) return false;
    return std::all_of(text.begin(), text.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-';
    });
}

std::string uid_of_component(std::string_view component) {
    // cgroupfs: "pod<uid>".
    if (component.starts_with("pod") && pod_uid_shaped(component.substr(3))) {
        return std::string(component.substr(3));
    }
    // systemd: "kubepods-besteffort-pod<uid with _>.slice", "kubepods-pod<uid>.slice".
    if (!component.starts_with("kubepods") || !component.ends_with(".slice")) return "";
    const size_t pod = component.rfind("-pod");
    if (pod == std::string_view::npos) return "";
    std::string uid(component.substr(pod + 4, component.size() - pod - 4 - 6));
    std::replace(uid.begin(), uid.end(), '_', '-');
    return pod_uid_shaped(uid) ? uid : "";
}

bool loopback_address(std::string_view address) {
    return address.starts_with("127.") || address == "::1" || address.starts_with("fe00::") ||
           address.starts_with("fe80::") || address.starts_with("ff0");
}

// The pod's hostname in the kubelet's etc-hosts: the last entry before the
// HostAliases the pod spec adds, the last name of its line.
std::string hostname_in_etc_hosts(std::string_view text) {
    if (!text.starts_with("# Kubernetes-managed hosts file.")) return "";  // host network
    std::string name;
    size_t start = 0;
    while (start < text.size()) {
        const size_t end = std::min(text.find('\n', start), text.size());
        const std::string_view line = text.substr(start, end - start);
        start = end + 1;
        if (line.starts_with("# Entries added by HostAliases")) break;
        if (line.starts_with('#')) continue;
        const auto fields = split_fields(line);
        if (fields.size() < 2 || loopback_address(fields[0])) continue;
        name = std::string(fields.back());
    }
    return name;
}

}  // namespace

std::string kubepods_pod_uid(std::string_view proc_cgroup) {
    size_t start = 0;
    while (start < proc_cgroup.size()) {
        const size_t end = std::min(proc_cgroup.find('\n', start), proc_cgroup.size());
        const std::string_view line = proc_cgroup.substr(start, end - start);
        start = end + 1;
        const size_t path = line.find(":/");
        if (path == std::string_view::npos || line.find("kubepods") == std::string_view::npos) {
            continue;
        }
        std::string_view rest = line.substr(path + 2);
        while (!rest.empty()) {
            const size_t slash = rest.find('/');
            std::string uid = uid_of_component(rest.substr(0, slash));
            if (!uid.empty()) return uid;
            if (slash == std::string_view::npos) break;
            rest = rest.substr(slash + 1);
        }
    }
    return "";
}

PodIdentity pod_identity_from_kubelet_dir(const std::string& pod_dir) {
    PodIdentity out;
    if (auto hosts = read_file(pod_dir + "/etc-hosts")) out.name = hostname_in_etc_hosts(*hosts);
    const std::string projected = pod_dir + "/volumes/kubernetes.io~projected";
    for (const DirEntry& volume : entries_of(projected)) {
        auto text = read_file(projected + "/" + volume.name + "/namespace");
        if (!text) continue;
        std::string name = *text;
        while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
        if (!name.empty()) {
            out.pod_namespace = std::move(name);
            break;
        }
    }
    return out;
}

std::string nvidia_gpu_node(const std::string& index, const std::string& host_root) {
    std::string number = device_number_of(host_root + "/dev/nvidia" + index);
    return number.empty() ? "195:" + index : number;
}

ResolvedGpus resolve_kubelet_device_ids(const std::vector<std::string>& ids,
                                        const GpuByUuid& gpu_by_uuid,
                                        const std::string& host_root) {
    ResolvedGpus out;
    for (const std::string& id : ids) {
        std::vector<std::string> nodes;
        if (!id.empty() && std::all_of(id.begin(), id.end(), ::isdigit) && id.size() <= 3) {
            nodes.push_back(nvidia_gpu_node(id, host_root));
        } else if (id.starts_with("GPU-") || id.starts_with("MIG-")) {
            const std::string uuid = id.substr(0, id.find("::"));  // a time-sliced replica's
            if (gpu_by_uuid) nodes = gpu_by_uuid(uuid);
            if (nodes.empty()) {
                out.unresolved = "'" + uuid + "' is not in the agent's GPU inventory";
            }
        } else {
            out.unresolved = "'" + id + "' is not a GPU index, GPU UUID or MIG UUID";
        }
        if (!out.unresolved.empty()) {
            out.allocated.clear();
            return out;
        }
        for (std::string& number : nodes) {
            if (std::find(out.allocated.begin(), out.allocated.end(), number) ==
                out.allocated.end()) {
                out.allocated.push_back(std::move(number));
            }
        }
    }
    return out;
}

}  // namespace gpuguard::agent
