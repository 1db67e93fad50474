// Builds sysfs and procfs fixture trees in a TempDir with the layout and the
// file contents the kernel drivers produce (each writer names its source).
#pragma once

#include <filesystem>
#include <string>

namespace gpuguard::backends::testing {

class FixtureTree {
  public:
    explicit FixtureTree(std::filesystem::path root) : root_(std::move(root)) {}

    std::filesystem::path sys() const { return root_ / "sys"; }
    std::filesystem::path proc() const { return root_ / "proc"; }

    // Writes (creating parents) a file under the root; `relative` starts with "sys/" or "proc/".
    void write(const std::string& relative, const std::string& content) const;
    void remove(const std::string& relative) const;

    // A PCI GPU bound to `driver`: devices/pci0000:00/<slot>, drm/cardN and
    // renderD(128+N) with their dev files, uevent, and class/drm/cardN link.
    // Returns the device directory relative to the root ("sys/devices/...").
    std::string add_pci_card(int card, const std::string& driver, const std::string& slot,
                             const std::string& pci_id) const;
    // A platform GPU (asahi, msm, panfrost): devices/platform/soc/<name>.
    std::string add_platform_card(int card, const std::string& driver, const std::string& name,
                                  const std::string& compatible) const;

    // amdgpu with every sysfs metric gpuguard reads (amdgpu_pm.c, amdgpu_vram_mgr.c, amdgpu_ras.c).
    std::string add_amdgpu(int card, const std::string& slot) const;
    // KFD: class/kfd/kfd/{dev,topology/nodes/N} mapping gpu_id -> render minor (kfd_topology.c).
    void add_kfd(uint64_t gpu_id, int render_minor) const;
    // i915 discrete (DG2) with gt frequency, throttle reasons and hwmon energy (i915_hwmon.c).
    std::string add_i915(int card, const std::string& slot) const;
    // xe (Battlemage) with tile0/gt0/freq0, throttle and hwmon (xe_gt_freq.c, xe_hwmon.c).
    std::string add_xe(int card, const std::string& slot) const;

    // /proc/<pid>/fdinfo/<fd> with `text`, plus /proc/sys/kernel/osrelease.
    void add_fdinfo(int pid, int fd, const std::string& text) const;

  private:
    std::filesystem::path root_;
};

// fdinfo text in each driver's exact format (tabs and units as printed).
// amdgpu_fdinfo.c (6.12: drm_print_memory_stats + legacy drm-memory-* keys).
std::string amdgpu_fdinfo(uint64_t client_id, const std::string& pdev, uint64_t vram_kib,
                          uint64_t gfx_ns, uint64_t compute_ns);
// i915_drm_client.c (integrated: system0/stolen-system0 regions).
std::string i915_fdinfo(uint64_t client_id, const std::string& pdev, uint64_t render_ns,
                        uint64_t video_ns);
// xe_drm_client.c show_meminfo + show_run_ticks.
std::string xe_fdinfo(uint64_t client_id, const std::string& pdev, uint64_t rcs_cycles,
                      uint64_t total_cycles, uint64_t ccs_cycles);
// drm_file.c drm_show_fdinfo + drm_show_memory_stats, as printed for the
// asahi platform device (no drm-pdev). `engine_ns` < 0: no engine keys.
std::string asahi_fdinfo(uint64_t client_id, uint64_t resident_mib, int64_t engine_ns);
// msm_gpu.c msm_gpu_show_fdinfo.
std::string msm_fdinfo(uint64_t client_id, uint64_t gpu_ns, uint64_t resident_mib);

}  // namespace gpuguard::backends::testing
