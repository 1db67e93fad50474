// read_workload (gpuguard/state/workload.h): a Slurm job or pod and the
// GPUs it was given, read from /proc and gres.conf at a process's first GPU
// use. The job's own environment can say anything, so its word on the job
// yields to slurmstepd's cgroup, which only root writes.
#include "gpuguard/state/workload.h"

#include <algorithm>
#include <map>

#include <fnmatch.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "gpuguard/common/read_file.h"
#include "gpuguard/common/text.h"

namespace gpuguard::agent {
namespace {

constexpr const char* kEnvNames[] = {
    "SLURM_JOB_ID",         "SLURM_JOBID",         "SLURM_STEP_ID",   "SLURM_JOB_USER",
    "SLURM_JOB_ACCOUNT",    "SLURM_JOB_PARTITION", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS",
    "CUDA_VISIBLE_DEVICES", "SLURM_CONF",          "SLURMD_NODENAME", "NVIDIA_VISIBLE_DEVICES",
};

using Environment = std::map<std::string, std::string, std::less<>>;

Environment relevant_environment(std::string_view environ) {
    Environment out;
    for (const auto& entry : split_nul_separated(environ)) {
        const size_t equals = entry.find('=');
        if (equals == std::string::npos) continue;
        const std::string_view name(entry.data(), equals);
        if (std::find(std::begin(kEnvNames), std::end(kEnvNames), name) == std::end(kEnvNames)) {
            continue;
        }
        out.insert_or_assign(std::string(name), entry.substr(equals + 1));
    }
    return out;
}

const std::string* lookup(const Environment& env, std::string_view name) {
    const auto found = env.find(name);
    return found == env.end() ? nullptr : &found->second;
}

std::string value_of(const Environment& env, std::string_view name) {
    const std::string* value = lookup(env, name);
    return value ? *value : "";
}

// The path component after `marker` ("job_", "step_") up to the next '/'.
std::string component_after(std::string_view path, std::string_view marker) {
    const size_t at = path.find(marker);
    if (at == std::string_view::npos) return "";
    const size_t start = at + marker.size();
    const size_t end = path.find('/', start);
    return std::string(path.substr(start, end == std::string_view::npos ? end : end - start));
}

std::vector<std::string> split(std::string_view text, char separator) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (start <= text.size()) {
        const size_t end = text.find(separator, start);
        const std::string_view part = text.substr(
            start, end == std::string_view::npos ? std::string_view::npos : end - start);
        if (!part.empty()) parts.emplace_back(part);
        if (end == std::string_view::npos) break;
        start = end + 1;
    }
    return parts;
}

// gres.conf beside the slurm.conf the job's environment names, when root
// owns it and nobody else can write it (the job could name one of its own);
// else Slurm's default.
std::string gres_conf_path(const Environment& env, const std::string& host_root) {
    const std::string conf = value_of(env, "SLURM_CONF");
    if (conf.starts_with('/')) {
        const std::string beside = conf.substr(0, conf.rfind('/')) + "/gres.conf";
        struct stat st {};
        if (::stat((host_root + beside).c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
            st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0) {
            return beside;
        }
    }
    return "/etc/slurm/gres.conf";
}

std::string short_hostname() {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) != 0) return "";
    std::string out(name);
    return out.substr(0, out.find('.'));
}

// Appends `number` unless `numbers` has it.
void add_once(std::vector<std::string>& numbers, const std::string& number) {
    if (std::find(numbers.begin(), numbers.end(), number) == numbers.end()) {
        numbers.push_back(number);
    }
}

// Turns `value` (the indices or names the source wrote) into device numbers
// in `workload`; `gres` numbers GRES indices (each its device numbers); GPU
// and MIG UUIDs (what NVIDIA's container toolkit writes) go through the
// agent's GPU inventory.
void resolve(Workload& workload, const std::string& value,
             const std::vector<std::vector<std::string>>& gres,
             const WorkloadReadOptions& options) {
    const std::string& host_root = options.host_root;
    workload.allocation = value;
    if (value == "all") {
        workload.unresolved = "all GPUs";
        return;
    }
    // In a pod, NVIDIA's CDI specifications (the device plugin's CDI
    // strategies, its DRA driver, the GPU Operator with CDI) set "void" so
    // that the legacy runtime hook injects nothing: the GPUs are the
    // runtime's device edits, which this variable does not name. Only the
    // kubelet can say which they were. (In a Slurm job, enroot writes "void"
    // for a job given no GPU: none given there.)
    if (value == "void" && workload.allocation_source == "NVIDIA_VISIBLE_DEVICES" &&
        workload.scheduler == "kubernetes") {
        workload.unresolved =
            "NVIDIA_VISIBLE_DEVICES=void: its GPUs, if any, came by CDI, which the variable "
            "does not name";
        return;
    }
    if (value == "void" || value == "none" || value == "NoDevFiles") return;  // none given
    for (const std::string& item : split(value, ',')) {
        const auto index = parse_u32(item);
        if (!index && (item.starts_with("GPU-") || item.starts_with("MIG-"))) {
            std::vector<std::string> nodes;
            if (options.kubelet.gpu_by_uuid) nodes = options.kubelet.gpu_by_uuid(item);
            if (nodes.empty()) {
                workload.unresolved = "'" + item + "' is not in the agent's GPU inventory";
                workload.allocated.clear();
                return;
            }
            for (const std::string& node : nodes) add_once(workload.allocated, node);
            // A UUID is all the nodes of its GPU or MIG instance: the
            // inventory's nodes are what counts as a GPU then.
            if (workload.node_gpus.empty() && options.kubelet.inventory_gpus) {
                workload.node_gpus = options.kubelet.inventory_gpus();
            }
            continue;
        }
        if (!index) {
            workload.unresolved = "'" + item + "' is not a GPU index or UUID (a MIG index?)";
            workload.allocated.clear();
            return;
        }
        if (*index < gres.size()) {
            for (const std::string& number : gres[*index]) add_once(workload.allocated, number);
            continue;
        }
        // NVIDIA's GPU nodes: /dev/nvidiaN is minor N.
        workload.allocated.push_back(nvidia_gpu_node(item, host_root));
    }
}

// cgroup v1: "/slurm/uid_<uid>/job_...", or "/slurm_<node>/uid_<uid>/..."
// where slurmd is built for several per host (Debian's is).
bool slurm_v1_path(std::string_view path) {
    const size_t uid = path.find("/uid_");
    if (uid == std::string_view::npos || uid == 0) return false;
    const size_t parent = path.rfind('/', uid - 1);
    if (parent == std::string_view::npos) return false;
    const std::string_view name = path.substr(parent + 1, uid - parent - 1);
    return name == "slurm" || name.starts_with("slurm_");
}

// The pod's UID, namespace, name and container: the runtime's labels
// first, the kubelet's pod directory for what they lack.
void name_pod(Workload& workload, std::string_view cgroup, const ContainerDetails& labels,
              const WorkloadReadOptions& options) {
    workload.pod_uid = labels.pod_uid.empty() ? kubepods_pod_uid(cgroup) : labels.pod_uid;
    workload.pod_namespace = labels.pod_namespace;
    workload.pod_name = labels.pod_name;
    workload.container = labels.kube_container;
    if ((workload.pod_namespace.empty() || workload.pod_name.empty()) &&
        !workload.pod_uid.empty()) {
        const PodIdentity found = pod_identity_from_kubelet_dir(
            options.host_root + options.kubelet.kubelet_root + "/pods/" + workload.pod_uid);
        if (workload.pod_namespace.empty()) workload.pod_namespace = found.pod_namespace;
        if (workload.pod_name.empty()) workload.pod_name = found.name;
    }
}

// The device plugin's device IDs (the kubelet's, or the volume-mounts'
// names) as `workload`'s allocation; what counts as a GPU is then the
// inventory's GPUs, all their nodes: a GPU's nvidia-drm render node is that
// GPU as much as its /dev/nvidiaN.
void allocate_device_ids(Workload& workload, const std::vector<std::string>& ids,
                         const WorkloadReadOptions& options) {
    ResolvedGpus resolved =
        resolve_kubelet_device_ids(ids, options.kubelet.gpu_by_uuid, options.host_root);
    workload.allocated = std::move(resolved.allocated);
    workload.unresolved = std::move(resolved.unresolved);
    if (options.kubelet.inventory_gpus) workload.node_gpus = options.kubelet.inventory_gpus();
}

// NVIDIA's device plugin with DEVICE_LIST_STRATEGY=volume-mounts (the
// hardened setting, where the runtime ignores the variable's device list)
// writes this directory into NVIDIA_VISIBLE_DEVICES and bind-mounts
// /dev/null at <dir>/<device ID> for each device it gave: the IDs the
// kubelet lists. The container's root may show /var/run as /run.
constexpr std::string_view kVolumeMountsDir = "/var/run/nvidia-container-devices";

bool volume_mounts_dir(std::string_view value) {
    if (value.ends_with('/')) value.remove_suffix(1);
    return value == kVolumeMountsDir || value == kVolumeMountsDir.substr(4);
}

// The device IDs mounted under kVolumeMountsDir in /proc/PID/mountinfo's
// text (each line's fifth field is the mount point, in the process's root).
std::vector<std::string> volume_mount_device_ids(std::string_view mountinfo) {
    std::vector<std::string> ids;
    for (const std::string& line : split(mountinfo, '\n')) {
        const std::vector<std::string_view> fields = split_fields(line);
        if (fields.size() < 5) continue;
        const std::string_view point = fields[4];
        for (const std::string_view dir : {kVolumeMountsDir, kVolumeMountsDir.substr(4)}) {
            if (!point.starts_with(dir) || point.size() <= dir.size() + 1 ||
                point[dir.size()] != '/') {
                continue;
            }
            const std::string id(point.substr(dir.size() + 1));
            if (id.find('/') == std::string::npos) add_once(ids, id);
        }
    }
    return ids;
}

// The allocation the volume-mounts strategy gave the process whose /proc
// directory is `proc_dir`, as the kubelet's device IDs are resolved.
void resolve_volume_mounts(Workload& workload, const std::string& value,
                           const std::string& proc_dir, const WorkloadReadOptions& options) {
    workload.allocation = value;
    auto mountinfo = read_file(proc_dir + "/mountinfo");
    const std::vector<std::string> ids =
        mountinfo ? volume_mount_device_ids(*mountinfo) : std::vector<std::string>{};
    if (ids.empty()) {
        workload.unresolved = "NVIDIA_VISIBLE_DEVICES=" + value +
                              " (the device plugin's volume-mounts) but no device mounted there";
        return;
    }
    workload.allocation += " (" + join(ids, ",") + ")";
    allocate_device_ids(workload, ids, options);
}

// A pod of the GPU infrastructure (its namespace one of
// infrastructure_namespaces): named, its allocation unresolved, whatever
// the kubelet or its environment say.
bool infrastructure_pod(Workload& workload, const WorkloadReadOptions& options) {
    if (workload.pod_namespace.empty()) return false;
    for (const std::string& glob : options.kubelet.infrastructure_namespaces) {
        if (fnmatch(glob.c_str(), workload.pod_namespace.c_str(), 0) != 0) continue;
        workload.allocation_source = kGpuInfrastructureSource;
        workload.allocation = workload.pod_namespace;
        workload.unresolved = "a pod of the GPU infrastructure (namespace " +
                              workload.pod_namespace + " matches '" + glob +
                              "', kubelet.gpu_infrastructure_namespaces): not judged";
        return true;
    }
    return false;
}

// The kubelet's allocation for the pod, preferred to any environment's;
// false when the kubelet was not asked or has not named the pod.
bool kubelet_allocation(Workload& workload, const WorkloadReadOptions& options) {
    if (!options.kubelet.gpu_ids || workload.pod_namespace.empty() || workload.pod_name.empty()) {
        return false;
    }
    const auto given = options.kubelet.gpu_ids(
        PodQuery{workload.pod_namespace, workload.pod_name, workload.container});
    if (!given) return false;
    workload.allocation_source = "kubelet";
    workload.allocation = join(given->device_ids, ",");
    // GPUs a DRA claim gave: no device node the agent can name without the
    // driver's ResourceSlice, so not judged (and never "given none").
    if (!given->gpu_claims.empty()) {
        if (!workload.allocation.empty()) workload.allocation += ",";
        workload.allocation += join(given->gpu_claims, ",");
        workload.unresolved = "GPUs given by DRA claims: " + join(given->gpu_claims, ", ");
        return true;
    }
    allocate_device_ids(workload, given->device_ids, options);
    return true;
}

}  // namespace

SlurmCgroup slurm_cgroup_of(std::string_view proc_cgroup) {
    SlurmCgroup out;
    for (const auto& line : split(proc_cgroup, '\n')) {
        // "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0",
        // "4:devices:/slurm/uid_1000/job_42/step_batch/task_0",
        // "6:freezer:/slurm_node1/uid_0/job_42/step_batch".
        const size_t path_at = line.find(":/");
        if (path_at == std::string::npos) continue;
        const std::string_view path = std::string_view(line).substr(path_at + 1);
        const bool v2 = path.find("/slurmstepd.scope/job_") != std::string_view::npos;
        if (!v2 && !slurm_v1_path(path)) continue;
        std::string job = component_after(path, "/job_");
        if (!parse_u32(job)) continue;
        out.job_id = std::move(job);
        out.step_id = component_after(path, "/step_");
        return out;
    }
    return out;
}

bool in_kubepods(std::string_view proc_cgroup) {
    return proc_cgroup.find("/kubepods") != std::string_view::npos;
}

std::vector<std::string> expand_gres_files(std::string_view value) {
    std::vector<std::string> files;
    size_t start = 0;
    while (start < value.size()) {
        // One file: up to a comma outside brackets.
        size_t end = start;
        int depth = 0;
        for (; end < value.size(); ++end) {
            if (value[end] == '[') ++depth;
            if (value[end] == ']') --depth;
            if (value[end] == ',' && depth == 0) break;
        }
        const std::string_view file = value.substr(start, end - start);
        start = end + 1;
        const size_t open = file.find('[');
        const size_t close = file.find(']', open);
        if (open == std::string_view::npos || close == std::string_view::npos) {
            if (!file.empty()) files.emplace_back(file);
            continue;
        }
        const std::string prefix(file.substr(0, open));
        const std::string suffix(file.substr(close + 1));
        for (const auto& range : split(file.substr(open + 1, close - open - 1), ',')) {
            const size_t dash = range.find('-');
            const std::string low_text = range.substr(0, dash);
            const auto low = parse_u32(low_text);
            const auto high = dash == std::string::npos ? low : parse_u32(range.substr(dash + 1));
            if (!low || !high || *high < *low || *high - *low > 1024) continue;
            for (uint32_t n = *low; n <= *high; ++n) {
                std::string digits = std::to_string(n);
                // "[00-03]" keeps its width.
                if (digits.size() < low_text.size()) {
                    digits.insert(0, low_text.size() - digits.size(), '0');
                }
                files.push_back(prefix + digits + suffix);
            }
        }
    }
    return files;
}

std::vector<std::vector<std::string>> gres_gpu_files(std::string_view gres_conf,
                                                     std::string_view node) {
    std::vector<std::vector<std::string>> gres;
    for (std::string line : split(gres_conf, '\n')) {
        line = line.substr(0, line.find('#'));
        bool gpu = false, this_node = true, one_gres = false;
        std::vector<std::string> line_files;
        for (const auto& word : split(line, ' ')) {
            for (const auto& item : split(word, '\t')) {
                const size_t equals = item.find('=');
                if (equals == std::string::npos) continue;
                std::string key = item.substr(0, equals);
                std::transform(key.begin(), key.end(), key.begin(), ::tolower);
                const std::string value = item.substr(equals + 1);
                if (key == "name") gpu = value == "gpu";
                if (key == "nodename") {
                    this_node = value == node || value.find('[') != std::string::npos;
                }
                if (key == "file") line_files = expand_gres_files(value);
                if (key == "multiplefiles") {
                    line_files = expand_gres_files(value);
                    one_gres = true;
                }
            }
        }
        if (!gpu || !this_node || line_files.empty()) continue;
        if (one_gres) {
            gres.push_back(std::move(line_files));
        } else {
            for (std::string& file : line_files) gres.push_back({std::move(file)});
        }
    }
    return gres;
}

std::string device_number_of(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return "";
    return std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
}

WorkloadReadOptions host_workload_options(const std::string& proc_root) {
    WorkloadReadOptions options;
    options.proc_root = proc_root;
    options.host_root = proc_root + "/1/root";
    if (::access(options.host_root.c_str(), X_OK) != 0) options.host_root.clear();
    return options;
}

std::optional<Workload> read_workload(uint32_t pid, const WorkloadReadOptions& options,
                                      const ContainerDetails& labels) {
    const std::string dir = options.proc_root + "/" + std::to_string(pid);
    auto cgroup = read_file(dir + "/cgroup");
    if (!cgroup) return std::nullopt;
    auto environ = read_file(dir + "/environ");
    const Environment env = environ ? relevant_environment(*environ) : Environment{};

    Workload workload;
    const SlurmCgroup from_cgroup = slurm_cgroup_of(*cgroup);
    std::string env_job = value_of(env, "SLURM_JOB_ID");
    if (env_job.empty()) env_job = value_of(env, "SLURM_JOBID");
    if (!from_cgroup.job_id.empty() || !env_job.empty()) {
        workload.scheduler = "slurm";
    } else if (in_kubepods(*cgroup)) {
        workload.scheduler = "kubernetes";
    } else {
        return std::nullopt;
    }
    SlurmJob& job = workload.slurm;
    if (workload.scheduler == "slurm") {
        job.job_id = from_cgroup.job_id.empty() ? env_job : from_cgroup.job_id;
        job.step_id =
            from_cgroup.step_id.empty() ? value_of(env, "SLURM_STEP_ID") : from_cgroup.step_id;
        job.user = value_of(env, "SLURM_JOB_USER");
        job.account = value_of(env, "SLURM_JOB_ACCOUNT");
        job.partition = value_of(env, "SLURM_JOB_PARTITION");
        job.gpus = value_of(env, "SLURM_STEP_GPUS");
        if (job.gpus.empty()) job.gpus = value_of(env, "SLURM_JOB_GPUS");
    }
    if (workload.scheduler == "kubernetes") {
        name_pod(workload, *cgroup, labels, options);
        if (infrastructure_pod(workload, options)) return workload;
        if (kubelet_allocation(workload, options)) return workload;
    }
    const bool env_is_the_jobs =
        env_job.empty() || from_cgroup.job_id.empty() || env_job == from_cgroup.job_id;

    // The source, most authoritative first (docs/detections.md).
    for (const char* source :
         {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"}) {
        const std::string* value = lookup(env, source);
        if (!value) continue;
        workload.allocation_source = source;
        std::vector<std::vector<std::string>> gres_files;
        if (workload.scheduler == "slurm") {
            const std::string path = gres_conf_path(env, options.host_root);
            std::string node = value_of(env, "SLURMD_NODENAME");
            if (node.empty())
                node = options.node_name.empty() ? short_hostname() : options.node_name;
            if (auto conf = read_file(options.host_root + path)) {
                gres_files = gres_gpu_files(*conf, node);
            }
        }
        // Each GRES's device numbers; every one of them is a GPU the node gives out.
        std::vector<std::vector<std::string>> gres;
        for (const auto& files : gres_files) {
            std::vector<std::string>& numbers = gres.emplace_back();
            for (const auto& file : files) {
                std::string number = device_number_of(options.host_root + file);
                if (number.empty()) continue;
                numbers.push_back(number);
                add_once(workload.node_gpus, number);
            }
        }
        if (workload.scheduler == "kubernetes" &&
            std::string_view(source) == "NVIDIA_VISIBLE_DEVICES" && volume_mounts_dir(*value)) {
            resolve_volume_mounts(workload, *value, dir, options);
            break;
        }
        const bool gres_index = std::string_view(source).starts_with("SLURM_");
        // Without gres.conf's files (AutoDetect) Slurm's indices count MIG
        // devices on a partitioned GPU, not /dev/nvidiaN: not judged there.
        if (gres_index && gres.empty() && options.kubelet.inventory_has_mig &&
            options.kubelet.inventory_has_mig()) {
            workload.allocation = *value;
            workload.unresolved =
                "GRES indices on a node with MIG enabled whose gres.conf names no device files";
            break;
        }
        resolve(workload, *value, gres_index ? gres : std::vector<std::vector<std::string>>{},
                options);
        if (!env_is_the_jobs) {
            workload.unresolved =
                "its environment names job " + env_job + ", its cgroup job " + from_cgroup.job_id;
            workload.allocated.clear();
        }
        break;
    }
    return workload;
}

}  // namespace gpuguard::agent
