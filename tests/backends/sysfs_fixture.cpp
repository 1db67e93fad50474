#include "tests/backends/sysfs_fixture.h"

#include <fstream>
#include <stdexcept>

namespace gpuguard::backends::testing {

namespace fs = std::filesystem;

void FixtureTree::write(const std::string& relative, const std::string& content) const {
    const fs::path path = root_ / relative;
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::trunc);
    out << content;
    if (!out) throw std::runtime_error("cannot write fixture " + path.string());
}

void FixtureTree::remove(const std::string& relative) const { fs::remove_all(root_ / relative); }

namespace {

void relative_symlink(const fs::path& target, const fs::path& link) {
    fs::create_directories(link.parent_path());
    fs::create_directory_symlink(fs::relative(target, link.parent_path()), link);
}

}  // namespace

std::string FixtureTree::add_pci_card(int card, const std::string& driver, const std::string& slot,
                                      const std::string& pci_id) const {
    const std::string device = "sys/devices/pci0000:00/0000:00:01.0/" + slot;
    // drivers/base/core.c dev_uevent (DRIVER=) + drivers/pci/pci-driver.c pci_uevent.
    write(device + "/uevent", "DRIVER=" + driver + "\nPCI_CLASS=30000\nPCI_ID=" + pci_id +
                                  "\nPCI_SUBSYS_ID=1DA2:E445\nPCI_SLOT_NAME=" + slot +
                                  "\nMODALIAS=pci:v0000" + pci_id.substr(0, 4) + "\n");
    const std::string card_name = "card" + std::to_string(card);
    const std::string render_name = "renderD" + std::to_string(128 + card);
    // drivers/base/core.c dev_show: "%u:%u\n" (MAJOR:MINOR).
    write(device + "/drm/" + card_name + "/dev", "226:" + std::to_string(card) + "\n");
    write(device + "/drm/" + render_name + "/dev", "226:" + std::to_string(128 + card) + "\n");
    relative_symlink(root_ / device, root_ / device / "drm" / card_name / "device");
    relative_symlink(root_ / device / "drm" / card_name, root_ / "sys/class/drm" / card_name);
    write("proc/sys/kernel/osrelease", "6.12.12-amd64\n");
    return device;
}

std::string FixtureTree::add_platform_card(int card, const std::string& driver,
                                           const std::string& name,
                                           const std::string& compatible) const {
    const std::string device = "sys/devices/platform/soc/" + name;
    // drivers/of/device.c of_device_uevent: OF_NAME, OF_FULLNAME, OF_COMPATIBLE_N.
    write(device + "/uevent",
          "DRIVER=" + driver + "\nOF_NAME=gpu\nOF_FULLNAME=/soc/gpu@" +
              name.substr(0, name.find('.')) + "\nOF_COMPATIBLE_0=" + compatible +
              "\nOF_COMPATIBLE_N=1\nMODALIAS=of:NgpuT(null)C" + compatible + "\n");
    const std::string card_name = "card" + std::to_string(card);
    const std::string render_name = "renderD" + std::to_string(128 + card);
    write(device + "/drm/" + card_name + "/dev", "226:" + std::to_string(card) + "\n");
    write(device + "/drm/" + render_name + "/dev", "226:" + std::to_string(128 + card) + "\n");
    relative_symlink(root_ / device, root_ / device / "drm" / card_name / "device");
    relative_symlink(root_ / device / "drm" / card_name, root_ / "sys/class/drm" / card_name);
    write("proc/sys/kernel/osrelease", "6.14.2-400.asahi.fc42.aarch64+16k\n");
    return device;
}

std::string FixtureTree::add_amdgpu(int card, const std::string& slot) const {
    const std::string dev = add_pci_card(card, "amdgpu", slot, "1002:73BF");
    // amdgpu_pm.c: "%d\n".
    write(dev + "/gpu_busy_percent", "87\n");
    write(dev + "/mem_busy_percent", "41\n");
    // amdgpu_vram_mgr.c / amdgpu_gtt_mgr.c: "%llu\n" bytes.
    write(dev + "/mem_info_vram_total", "17163091968\n");
    write(dev + "/mem_info_vram_used", "4294967296\n");
    write(dev + "/mem_info_gtt_total", "33554432000\n");
    write(dev + "/mem_info_gtt_used", "52625408\n");
    // amdgpu_pm.c: FRU product name and the 64-bit unique id "%016llx\n".
    write(dev + "/product_name", "AMD Radeon RX 6900 XT\n");
    write(dev + "/unique_id", "29b7a1f0c56e4e2a\n");
    write(dev + "/serial_number", "PB11A2407001\n");
    // smu_v11_0 print_clk_levels: "%d: %uMhz %s\n", '*' marks the current level.
    write(dev + "/pp_dpm_sclk", "0: 500Mhz \n1: 1825Mhz *\n2: 2425Mhz \n");
    write(dev + "/pp_dpm_mclk", "0: 96Mhz \n1: 456Mhz \n2: 673Mhz \n3: 1000Mhz *\n");
    // amdgpu_ras.c amdgpu_ras_sysfs_read: "%s: %lu\n%s: %lu\n" for ue, ce.
    write(dev + "/ras/umc_err_count", "ue: 1\nce: 12\n");
    // amdgpu_pm.c hwmon: temp1 edge, temp2 junction, temp3 mem (millidegrees, "%d\n").
    const std::string hwmon = dev + "/hwmon/hwmon4";
    write(hwmon + "/name", "amdgpu\n");
    write(hwmon + "/temp1_label", "edge\n");
    write(hwmon + "/temp1_input", "61000\n");
    write(hwmon + "/temp2_label", "junction\n");
    write(hwmon + "/temp2_input", "74000\n");
    write(hwmon + "/temp3_label", "mem\n");
    write(hwmon + "/temp3_input", "68000\n");
    // power1_average / power1_cap in microwatts ("%u\n" / "%llu\n").
    write(hwmon + "/power1_average", "231000000\n");
    write(hwmon + "/power1_cap", "255000000\n");
    write(hwmon + "/pwm1", "102\n");  // 0..255
    // freq1 sclk / freq2 mclk in Hz.
    write(hwmon + "/freq1_label", "sclk\n");
    write(hwmon + "/freq1_input", "2105000000\n");
    write(hwmon + "/freq2_label", "mclk\n");
    write(hwmon + "/freq2_input", "1000000000\n");
    return dev;
}

void FixtureTree::add_kfd(uint64_t gpu_id, int render_minor) const {
    const std::string kfd = "sys/class/kfd/kfd";
    write(kfd + "/dev", "511:0\n");
    // kfd_topology.c: node 0 is the CPU (gpu_id 0), GPUs follow.
    write(kfd + "/topology/nodes/0/gpu_id", "0\n");
    write(kfd + "/topology/nodes/0/properties", "cpu_cores_count 16\nsimd_count 0\n");
    write(kfd + "/topology/nodes/1/gpu_id", std::to_string(gpu_id) + "\n");
    // sysfs_show_32bit_prop: "%s %u\n".
    write(kfd + "/topology/nodes/1/properties",
          "cpu_cores_count 0\nsimd_count 320\nlocation_id 768\ndomain 0\ndrm_render_minor " +
              std::to_string(render_minor) + "\nhive_id 0\nnum_sdma_engines 2\n");
}

std::string FixtureTree::add_i915(int card, const std::string& slot) const {
    const std::string dev = add_pci_card(card, "i915", slot, "8086:56A0");
    const std::string card_dir = dev + "/drm/card" + std::to_string(card);
    // intel_gt_sysfs_pm.c: legacy card-level files and gt/gt0 throttle reasons ("%u\n").
    write(card_dir + "/gt_act_freq_mhz", "2050\n");
    write(card_dir + "/gt_cur_freq_mhz", "2100\n");
    write(card_dir + "/gt_max_freq_mhz", "2400\n");
    for (const char* reason :
         {"status", "pl1", "pl2", "pl4", "thermal", "prochot", "ratl", "vr_thermalert", "vr_tdc"}) {
        write(card_dir + "/gt/gt0/throttle_reason_" + reason, "0\n");
    }
    write(card_dir + "/gt/gt0/throttle_reason_status", "1\n");
    write(card_dir + "/gt/gt0/throttle_reason_pl1", "1\n");
    // i915_hwmon.c: energy1_input (µJ), power1_max (µW), power1_rated_max.
    const std::string hwmon = dev + "/hwmon/hwmon5";
    write(hwmon + "/name", "i915\n");
    write(hwmon + "/energy1_input", "1000000000\n");
    write(hwmon + "/power1_max", "190000000\n");
    write(hwmon + "/power1_rated_max", "225000000\n");
    return dev;
}

std::string FixtureTree::add_xe(int card, const std::string& slot) const {
    const std::string dev = add_pci_card(card, "xe", slot, "8086:E20B");
    // xe_gt_freq.c: tile0/gt0/freq0/{act,cur,min,max,rp0,rpn}_freq ("%d\n" MHz).
    const std::string freq = dev + "/tile0/gt0/freq0";
    write(freq + "/act_freq", "2850\n");
    write(freq + "/cur_freq", "2850\n");
    write(freq + "/max_freq", "2850\n");
    // xe_gt_throttle.c: freq0/throttle/{status,reason_*} ("%u\n").
    for (const char* reason :
         {"status", "reason_pl1", "reason_pl2", "reason_pl4", "reason_thermal", "reason_prochot",
          "reason_ratl", "reason_vr_thermalert", "reason_vr_tdc"}) {
        write(freq + "/throttle/" + reason, "0\n");
    }
    // xe_tile_sysfs.c: physical_vram_size_bytes ("%llu\n").
    write(dev + "/tile0/physical_vram_size_bytes", "12884901888\n");
    // xe_hwmon.c: energy1_input (card, µJ), power1_max (µW), temp2 pkg / temp3 vram.
    const std::string hwmon = dev + "/hwmon/hwmon6";
    write(hwmon + "/name", "xe\n");
    write(hwmon + "/energy1_input", "500000000\n");
    write(hwmon + "/power1_max", "0\n");  // PL1 disabled reads 0
    write(hwmon + "/temp2_label", "pkg\n");
    write(hwmon + "/temp2_input", "55000\n");
    write(hwmon + "/temp3_label", "vram\n");
    write(hwmon + "/temp3_input", "62000\n");
    return dev;
}

void FixtureTree::add_fdinfo(int pid, int fd, const std::string& text) const {
    write("proc/" + std::to_string(pid) + "/fdinfo/" + std::to_string(fd), text);
}

std::string amdgpu_fdinfo(uint64_t client_id, const std::string& pdev, uint64_t vram_kib,
                          uint64_t gfx_ns, uint64_t compute_ns) {
    const std::string vram = std::to_string(vram_kib) + " KiB";
    return "pos:\t0\nflags:\t02100002\nmnt_id:\t25\nino:\t1187\n"
           "drm-driver:\tamdgpu\ndrm-client-id:\t" +
           std::to_string(client_id) + "\ndrm-pdev:\t" + pdev +
           "\npasid:\t32774\n"
           "drm-total-cpu:\t0\ndrm-shared-cpu:\t0\ndrm-active-cpu:\t0\ndrm-resident-cpu:\t0\n"
           "drm-purgeable-cpu:\t0\n"
           "drm-total-gtt:\t8192 KiB\ndrm-shared-gtt:\t0\ndrm-active-gtt:\t0\n"
           "drm-resident-gtt:\t8192 KiB\ndrm-purgeable-gtt:\t0\n"
           "drm-total-vram:\t" +
           vram +
           "\ndrm-shared-vram:\t0\ndrm-active-vram:\t0\n"
           "drm-resident-vram:\t" +
           vram +
           "\ndrm-purgeable-vram:\t0\n"
           "drm-memory-vram:\t" +
           vram +
           "\ndrm-memory-gtt: \t8192 KiB\ndrm-memory-cpu: \t0 KiB\n"
           "amd-evicted-vram:\t0 KiB\namd-requested-vram:\t" +
           vram +
           "\namd-requested-gtt:\t8192 KiB\n"
           "drm-engine-gfx:\t" +
           std::to_string(gfx_ns) +
           " ns\n"
           "drm-engine-compute:\t" +
           std::to_string(compute_ns) + " ns\n";
}

std::string i915_fdinfo(uint64_t client_id, const std::string& pdev, uint64_t render_ns,
                        uint64_t video_ns) {
    return "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1062\n"
           "drm-driver:\ti915\ndrm-client-id:\t" +
           std::to_string(client_id) + "\ndrm-pdev:\t" + pdev +
           "\ndrm-total-system0:\t12 MiB\ndrm-shared-system0:\t0\ndrm-active-system0:\t0\n"
           "drm-resident-system0:\t12 MiB\ndrm-purgeable-system0:\t0\n"
           "drm-total-stolen-system0:\t0\ndrm-shared-stolen-system0:\t0\n"
           "drm-active-stolen-system0:\t0\ndrm-resident-stolen-system0:\t0\n"
           "drm-purgeable-stolen-system0:\t0\n"
           "drm-engine-render:\t" +
           std::to_string(render_ns) +
           " ns\n"
           "drm-engine-copy:\t0 ns\n"
           "drm-engine-video:\t" +
           std::to_string(video_ns) +
           " ns\n"
           "drm-engine-capacity-video:\t2\n"
           "drm-engine-video-enhance:\t0 ns\n";
}

std::string xe_fdinfo(uint64_t client_id, const std::string& pdev, uint64_t rcs_cycles,
                      uint64_t total_cycles, uint64_t ccs_cycles) {
    const std::string total = std::to_string(total_cycles);
    return "pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t1302\n"
           "drm-driver:\txe\ndrm-client-id:\t" +
           std::to_string(client_id) + "\ndrm-pdev:\t" + pdev +
           "\ndrm-total-system:\t4 MiB\ndrm-shared-system:\t0\ndrm-active-system:\t0\n"
           "drm-resident-system:\t4 MiB\ndrm-purgeable-system:\t0\n"
           "drm-total-gtt:\t0\ndrm-shared-gtt:\t0\ndrm-active-gtt:\t0\ndrm-resident-gtt:\t0\n"
           "drm-total-vram0:\t256 MiB\ndrm-shared-vram0:\t0\ndrm-active-vram0:\t0\n"
           "drm-resident-vram0:\t256 MiB\ndrm-purgeable-vram0:\t0\n"
           "drm-cycles-rcs:\t" +
           std::to_string(rcs_cycles) + "\ndrm-total-cycles-rcs:\t" + total +
           "\ndrm-cycles-bcs:\t0\ndrm-total-cycles-bcs:\t" + total +
           "\ndrm-cycles-vcs:\t0\ndrm-total-cycles-vcs:\t" + total +
           "\ndrm-engine-capacity-vcs:\t2\n"
           "drm-cycles-ccs:\t" +
           std::to_string(ccs_cycles) + "\ndrm-total-cycles-ccs:\t" + total +
           "\ndrm-engine-capacity-ccs:\t4\n";
}

std::string asahi_fdinfo(uint64_t client_id, uint64_t resident_mib, int64_t engine_ns) {
    std::string text =
        "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1033\n"
        "drm-driver:\tasahi\ndrm-client-id:\t" +
        std::to_string(client_id) + "\ndrm-total-memory:\t" + std::to_string(resident_mib + 16) +
        " MiB\ndrm-shared-memory:\t16 MiB\ndrm-active-memory:\t0\n"
        "drm-resident-memory:\t" +
        std::to_string(resident_mib) + " MiB\ndrm-purgeable-memory:\t0\n";
    if (engine_ns >= 0) {
        text += "drm-engine-render:\t" + std::to_string(engine_ns) + " ns\n";
        text += "drm-engine-compute:\t0 ns\n";
    }
    return text;
}

std::string msm_fdinfo(uint64_t client_id, uint64_t gpu_ns, uint64_t resident_mib) {
    return "pos:\t0\nflags:\t02100002\nmnt_id:\t23\nino:\t518\n"
           "drm-driver:\tmsm\ndrm-client-id:\t" +
           std::to_string(client_id) + "\ndrm-engine-gpu:\t" + std::to_string(gpu_ns) +
           " ns\ndrm-cycles-gpu:\t2421009173\n"
           "drm-maxfreq-gpu:\t710000000 Hz\ndrm-resident-memory:\t" +
           std::to_string(resident_mib) + " MiB\n";
}

}  // namespace gpuguard::backends::testing
