// Kernel-side enforcement: the cgroup/dev, cgroup/connect4/6 and lsm/file_open
// programs of bpf/cgroup.bpf.c and bpf/lsm.bpf.c (skeleton
// gpuguard_enforce_bpf). The adapters that let the Enforcer use them and the
// sensor's kill_now maps are the daemon's (gpuguard/daemon/kernel_enforcement.h).
//
// Programs attach to cgroups through bpf_link: a denial lasts while this
// object lives (the agent runs) and is lifted when it is destroyed, unless
// pinned (KernelEnforcerOptions::pins): then it lasts until the pins are
// removed, and the next KernelEnforcer takes the links over.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpuguard/common/result.h"
#include "gpuguard/events/gpu_devices.h"

namespace gpuguard::agent {

class PinDirectory;

struct KernelEnforcerOptions {
    std::string btf_path;      // "" = the running kernel's
    std::string cgroup2_root;  // "" = found in /proc/mounts
    // Load lsm/file_open too. Only where `gpuguard probe` reports bpf_lsm:
    // elsewhere the load fails and open() fails with it.
    bool load_lsm = false;
    // Where links and maps are pinned to outlive the agent; null = not pinned.
    std::shared_ptr<PinDirectory> pins;
};

// Counters of refused operations, summed over CPUs.
struct KernelEnforcerStats {
    uint64_t denied_device = 0;
    uint64_t denied_connect4 = 0;
    uint64_t denied_connect6 = 0;
    uint64_t denied_lsm_open = 0;
};

class KernelEnforcer {
  public:
    // Loads the programs (nothing is attached yet). kPermission without
    // root, kUnsupported when the kernel refuses a program type, kNotFound
    // without a cgroup v2 mount.
    static Result<std::unique_ptr<KernelEnforcer>> open(const KernelEnforcerOptions& options);
    ~KernelEnforcer();
    KernelEnforcer(const KernelEnforcer&) = delete;
    KernelEnforcer& operator=(const KernelEnforcer&) = delete;

    // The device numbers deny_gpu refuses (the GPU set: /proc/devices, backends, config).
    Status set_denied_devices(const std::vector<GpuDeviceNumber>& devices);

    // Attaches cgroup/dev to `cgroup_path` (relative to the v2 mount, "/a/b")
    // and, with LSM loaded, flags the cgroup for lsm/file_open too.
    // Idempotent. kNotFound when the cgroup does not exist.
    Status deny_cgroup(const std::string& cgroup_path);
    // Detaches it again (and unflags it). Not an error when not denied.
    Status allow_cgroup(const std::string& cgroup_path);
    std::string name() const;  // "cgroup_device" or "cgroup_device+bpf_lsm"

    // lsm/file_open only: refuses GPU opens to one process. kUnsupported without LSM.
    Status deny_process(uint32_t pid);

    // block_ip fallback: attaches cgroup/connect4 and connect6 to
    // `cgroup_path` (every process below it). Idempotent.
    Status attach_connect_filter(const std::string& cgroup_path);
    // Adds an address (IPv4 or IPv6) refused by the connect filter, for `ttl` (0 = forever).
    Status block_address(const std::string& ip, std::chrono::seconds ttl);
    Status unblock_address(const std::string& ip);

    bool lsm_loaded() const;
    KernelEnforcerStats stats() const;
    // cgroups denied the GPUs now (taken over from an earlier agent included).
    std::vector<std::string> denied_cgroups() const;

  private:
    struct Impl;
    explicit KernelEnforcer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace gpuguard::agent
