// The DRM backend against fixture sysfs/procfs trees (amdgpu + KFD, i915, xe,
// asahi, msm), with an injected clock so utilisation is exact.
#include <chrono>
#include <csignal>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuguard/backends/backends.h"
#include "tests/backends/sysfs_fixture.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::backends {
namespace {

using namespace std::chrono_literals;
using testing::FixtureTree;

class DrmBackendTest : public ::testing::Test {
  protected:
    DrmBackendTest() : tree_(dir_.path()) {}

    std::unique_ptr<GpuBackend> backend(DrmOptions options = {}) {
        options.sysfs_root = tree_.sys();
        options.proc_root = tree_.proc();
        options.clock = [this] { return now_; };
        return make_drm_backend(options);
    }

    static const GpuSample& only(const Result<GpuSamples>& samples) {
        EXPECT_TRUE(samples.ok());
        EXPECT_EQ(samples->gpus.size(), 1u);
        return samples->gpus.at(0);
    }

    gpuguard::testing::TempDir dir_{"gg-drm"};
    FixtureTree tree_;
    std::chrono::nanoseconds now_{100s};
};

TEST_F(DrmBackendTest, amdgpu_device_identity_and_nodes) {
    tree_.add_amdgpu(0, "0000:03:00.0");
    tree_.add_kfd(45678, 128);
    auto drm = backend();
    auto devices = drm->devices();
    ASSERT_TRUE(devices.ok()) << devices.error().message;
    ASSERT_EQ(devices->size(), 1u);
    const GpuDevice& d = devices->at(0);
    EXPECT_EQ(d.vendor, Vendor::kAmd);
    EXPECT_EQ(d.driver, "amdgpu");
    EXPECT_EQ(d.model, "AMD Radeon RX 6900 XT");
    EXPECT_EQ(d.uuid, "29b7a1f0c56e4e2a");
    EXPECT_EQ(d.serial, "PB11A2407001");
    EXPECT_EQ(d.bus_id, "0000:03:00.0");
    EXPECT_EQ(d.driver_version, "6.12.12-amd64");
    const std::vector<DeviceNumber> nodes = {{226, 0}, {226, 128}, {511, 0}};
    EXPECT_EQ(d.device_numbers, nodes);
}

TEST_F(DrmBackendTest, amdgpu_every_sysfs_metric) {
    tree_.add_amdgpu(0, "0000:03:00.0");
    auto drm = backend();
    const auto samples = drm->sample_gpus();
    const GpuSample& s = only(samples);
    EXPECT_TRUE(s.problems.empty()) << s.problems.front();
    EXPECT_EQ(s.gpu_utilization_percent, 87.0);
    EXPECT_EQ(s.memory_utilization_percent, 41.0);
    EXPECT_EQ(s.memory_total_bytes, 17163091968u);
    EXPECT_EQ(s.memory_used_bytes, 4294967296u);
    EXPECT_EQ(s.memory_free_bytes, 17163091968u - 4294967296u);
    EXPECT_EQ(s.temperature_gpu_celsius, 61.0);
    EXPECT_EQ(s.temperature_memory_celsius, 68.0);
    EXPECT_EQ(s.power_draw_watts, 231.0);
    EXPECT_EQ(s.power_limit_watts, 255.0);
    EXPECT_EQ(s.fan_speed_percent, 40.0);  // pwm1 102/255
    EXPECT_EQ(s.sm_clock_mhz, 2105u);      // hwmon freq1 beats pp_dpm_sclk
    EXPECT_EQ(s.memory_clock_mhz, 1000u);
    EXPECT_EQ(s.ecc_errors_uncorrected, 1u);
    EXPECT_EQ(s.ecc_errors_corrected, 12u);
    // What amdgpu's plain sysfs does not report stays absent, never 0.
    EXPECT_FALSE(s.energy_joules);
    EXPECT_FALSE(s.performance_state);
    EXPECT_FALSE(s.pcie_tx_bytes_per_second);
    EXPECT_FALSE(s.encoder_utilization_percent);
    EXPECT_FALSE(s.throttle_reasons);
    EXPECT_FALSE(s.last_xid);
}

TEST_F(DrmBackendTest, amdgpu_falls_back_to_dpm_levels_and_junction) {
    const std::string dev = tree_.add_amdgpu(0, "0000:03:00.0");
    tree_.remove(dev + "/hwmon/hwmon4/freq1_label");
    tree_.remove(dev + "/hwmon/hwmon4/freq2_label");
    tree_.remove(dev + "/hwmon/hwmon4/temp1_label");
    tree_.write(dev + "/hwmon/hwmon4/power1_input", "199000000\n");
    tree_.remove(dev + "/hwmon/hwmon4/power1_average");
    auto drm = backend();
    const auto samples = drm->sample_gpus();
    const GpuSample& s = only(samples);
    EXPECT_EQ(s.sm_clock_mhz, 1825u);
    EXPECT_EQ(s.memory_clock_mhz, 1000u);
    EXPECT_EQ(s.temperature_gpu_celsius, 74.0);
    EXPECT_EQ(s.power_draw_watts, 199.0);
}

TEST_F(DrmBackendTest, missing_files_are_absent_without_problems) {
    const std::string dev = tree_.add_pci_card(0, "amdgpu", "0000:03:00.0", "1002:15BF");  // APU
    auto drm = backend();
    auto devices = drm->devices();
    ASSERT_TRUE(devices.ok());
    EXPECT_EQ(devices->at(0).model, "amd GPU [1002:15BF]");
    const auto samples = drm->sample_gpus();
    const GpuSample& s = only(samples);
    EXPECT_TRUE(s.problems.empty());
    EXPECT_FALSE(s.gpu_utilization_percent);
    EXPECT_FALSE(s.memory_total_bytes);
    EXPECT_FALSE(s.temperature_gpu_celsius);
    EXPECT_FALSE(s.sm_clock_mhz);
}

TEST_F(DrmBackendTest, garbage_contents_are_named_problems_not_crashes) {
    const std::string dev = tree_.add_amdgpu(0, "0000:03:00.0");
    tree_.write(dev + "/gpu_busy_percent", "busy\n");
    tree_.write(dev + "/mem_info_vram_used", "-5\n");
    tree_.write(dev + "/hwmon/hwmon4/pwm1", "300\n");
    tree_.write(dev + "/ras/umc_err_count", "ue 1\n");
    tree_.write(dev + "/hwmon/hwmon4/temp1_input", std::string("\x01\x02", 2));
    auto drm = backend();
    const auto samples = drm->sample_gpus();
    const GpuSample& s = only(samples);
    EXPECT_FALSE(s.gpu_utilization_percent);
    EXPECT_FALSE(s.memory_used_bytes);
    EXPECT_FALSE(s.memory_free_bytes);
    EXPECT_FALSE(s.fan_speed_percent);
    EXPECT_FALSE(s.ecc_errors_corrected);
    EXPECT_EQ(s.temperature_gpu_celsius, 74.0);     // unusable edge: junction instead
    EXPECT_EQ(s.memory_utilization_percent, 41.0);  // the rest still reads
    const std::string root = tree_.sys().string();
    auto has = [&](const std::string& text) {
        for (const auto& p : s.problems) {
            if (p.find(text) != std::string::npos) return true;
        }
        return false;
    };
    EXPECT_TRUE(
        has(root + "/class/drm/card0/device/gpu_busy_percent: not an unsigned integer: 'busy\\n'"));
    EXPECT_TRUE(has("mem_info_vram_used: not an unsigned integer: '-5\\n'"));
    EXPECT_TRUE(has("pwm1: 300 is above 255"));
    EXPECT_TRUE(has("umc_err_count: expected 'ue: <n>' and 'ce: <n>'"));
    EXPECT_TRUE(has("temp1_input: not an integer: '\\x01\\x02'"));
    EXPECT_EQ(s.problems.size(), 5u);
}

TEST_F(DrmBackendTest, unreadable_file_is_a_problem_naming_it) {
    // Root reads mode-000 files, so a directory in the file's place makes read() fail.
    const std::string dev = tree_.add_amdgpu(0, "0000:03:00.0");
    tree_.remove(dev + "/mem_busy_percent");
    tree_.write(dev + "/mem_busy_percent/x", "");  // read() of a directory: EISDIR
    auto drm = backend();
    const auto samples = drm->sample_gpus();
    const GpuSample& s = only(samples);
    ASSERT_EQ(s.problems.size(), 1u);
    EXPECT_NE(s.problems[0].find("mem_busy_percent: read: Is a directory"), std::string::npos)
        << s.problems[0];
}

TEST_F(DrmBackendTest, i915_frequency_throttle_and_power_from_energy) {
    const std::string dev = tree_.add_i915(0, "0000:03:00.0");
    auto drm = backend();
    auto devices = drm->devices();
    ASSERT_TRUE(devices.ok());
    EXPECT_EQ(devices->at(0).vendor, Vendor::kIntel);
    EXPECT_EQ(devices->at(0).model, "intel GPU [8086:56A0]");
    auto first = drm->sample_gpus();
    const GpuSample& s = only(first);
    EXPECT_EQ(s.sm_clock_mhz, 2050u);
    EXPECT_EQ(s.power_limit_watts, 190.0);
    EXPECT_EQ(s.energy_joules, 1000.0);
    EXPECT_FALSE(s.power_draw_watts);  // needs two energy readings
    ASSERT_TRUE(s.throttle_reasons);
    EXPECT_EQ(*s.throttle_reasons, std::vector<std::string>{"pl1"});
    EXPECT_FALSE(s.memory_total_bytes);
    EXPECT_FALSE(s.gpu_utilization_percent);

    tree_.write(dev + "/hwmon/hwmon5/energy1_input", "1150000000\n");  // +150 J
    now_ += 2s;
    auto second = drm->sample_gpus();
    EXPECT_DOUBLE_EQ(*only(second).power_draw_watts, 75.0);

    // Counter wrap / reset: no power this time, then a fresh baseline.
    tree_.write(dev + "/hwmon/hwmon5/energy1_input", "1000\n");
    now_ += 1s;
    auto wrapped = drm->sample_gpus();
    EXPECT_FALSE(only(wrapped).power_draw_watts);
    tree_.write(dev + "/hwmon/hwmon5/energy1_input", "50001000\n");
    now_ += 1s;
    auto after = drm->sample_gpus();
    EXPECT_DOUBLE_EQ(*only(after).power_draw_watts, 50.0);
}

TEST_F(DrmBackendTest, xe_tile_frequency_vram_temperatures_and_no_limit_when_pl1_off) {
    tree_.add_xe(1, "0000:04:00.0");
    auto drm = backend();
    auto samples = drm->sample_gpus();
    const GpuSample& s = only(samples);
    EXPECT_TRUE(s.problems.empty()) << s.problems.front();
    EXPECT_EQ(s.sm_clock_mhz, 2850u);
    EXPECT_EQ(s.memory_total_bytes, 12884901888u);
    EXPECT_EQ(s.temperature_gpu_celsius, 55.0);
    EXPECT_EQ(s.temperature_memory_celsius, 62.0);
    EXPECT_FALSE(s.power_limit_watts);  // power1_max 0 = PL1 disabled
    ASSERT_TRUE(s.throttle_reasons);
    EXPECT_TRUE(s.throttle_reasons->empty());
}

TEST_F(DrmBackendTest, vendor_switches_leave_cards_out) {
    tree_.add_amdgpu(0, "0000:03:00.0");
    tree_.add_i915(1, "0000:00:02.0");
    tree_.add_platform_card(2, "asahi", "206400000.gpu", "apple,agx-g13g");
    tree_.add_pci_card(3, "nvidia", "0000:3b:00.0", "10DE:2330");  // NVML's, never DRM's
    DrmOptions only_intel;
    only_intel.amd = false;
    only_intel.generic = false;
    auto devices = backend(only_intel)->devices();
    ASSERT_TRUE(devices.ok());
    ASSERT_EQ(devices->size(), 1u);
    EXPECT_EQ(devices->at(0).driver, "i915");
    auto all = backend()->devices();
    ASSERT_TRUE(all.ok());
    ASSERT_EQ(all->size(), 3u);
    EXPECT_EQ(all->at(2).vendor, Vendor::kApple);
    EXPECT_EQ(all->at(2).bus_id, "206400000.gpu");
    EXPECT_EQ(all->at(2).model, "apple,agx-g13g");
    EXPECT_EQ(all->at(2).index, 2u);
}

TEST_F(DrmBackendTest, no_drm_class_means_no_devices_not_an_error) {
    auto devices = backend()->devices();
    ASSERT_TRUE(devices.ok());
    EXPECT_TRUE(devices->empty());
}

TEST_F(DrmBackendTest, amdgpu_processes_from_targeted_fdinfo_and_kfd) {
    tree_.add_amdgpu(0, "0000:03:00.0");
    tree_.add_kfd(45678, 128);
    // pid 100: a renderer; pid 200: ROCm compute through KFD and the render node.
    tree_.add_fdinfo(100, 5, testing::amdgpu_fdinfo(42, "0000:03:00.0", 1048576, 0, 0));
    tree_.add_fdinfo(200, 7, testing::amdgpu_fdinfo(43, "0000:03:00.0", 2048, 0, 0));
    tree_.write("sys/class/kfd/kfd/proc/200/vram_45678", "8589934592\n");
    tree_.write("sys/class/kfd/kfd/proc/200/pasid", "32775\n");
    // An fd the sensor never reported: must not be read.
    tree_.add_fdinfo(300, 9, testing::amdgpu_fdinfo(44, "0000:03:00.0", 4096, 0, 0));
    auto drm = backend();
    const std::vector<ProcessFd> fds = {{100, 5, {226, 128}}, {200, 7, {226, 128}}};
    auto first = drm->sample_processes(fds);
    ASSERT_TRUE(first.ok()) << first.error().message;
    ASSERT_EQ(first->processes.size(), 2u);
    EXPECT_EQ(first->processes[0].pid, 100);
    EXPECT_EQ(first->processes[0].memory_bytes, 1ull << 30);
    EXPECT_EQ(first->processes[0].engine_busy_ns, 0u);
    EXPECT_FALSE(first->processes[0].compute_percent);  // first sample: no rate yet
    EXPECT_EQ(first->processes[0].source, "fdinfo");
    EXPECT_EQ(first->processes[1].pid, 200);
    EXPECT_TRUE(first->processes[1].kfd_compute);
    EXPECT_EQ(first->processes[1].source, "fdinfo+kfd");
    EXPECT_EQ(first->processes[1].memory_bytes, 8ull << 30);  // KFD's VRAM, larger

    tree_.add_fdinfo(100, 5, testing::amdgpu_fdinfo(42, "0000:03:00.0", 1048576, 800000000, 0));
    now_ += 1s;
    auto second = drm->sample_processes(fds);
    ASSERT_TRUE(second.ok());
    EXPECT_DOUBLE_EQ(*second->processes[0].compute_percent, 80.0);
    EXPECT_EQ(second->processes[0].engine_busy_ns, 800000000u);
    EXPECT_DOUBLE_EQ(*second->processes[1].compute_percent, 0.0);
}

TEST_F(DrmBackendTest, kfd_only_process_without_render_fd) {
    tree_.add_amdgpu(0, "0000:03:00.0");
    tree_.add_kfd(45678, 128);
    tree_.write("sys/class/kfd/kfd/proc/777/vram_45678", "1073741824\n");
    auto result = backend()->sample_processes({});
    ASSERT_TRUE(result.ok());
    ASSERT_EQ(result->processes.size(), 1u);
    EXPECT_EQ(result->processes[0].pid, 777);
    EXPECT_EQ(result->processes[0].source, "kfd");
    EXPECT_TRUE(result->processes[0].kfd_compute);
    EXPECT_EQ(result->processes[0].memory_bytes, 1ull << 30);
    EXPECT_FALSE(result->processes[0].compute_percent);
}

TEST_F(DrmBackendTest, shared_client_counts_once_for_the_lowest_pid) {
    tree_.add_amdgpu(0, "0000:03:00.0");
    const auto text = testing::amdgpu_fdinfo(42, "0000:03:00.0", 1024, 0, 0);
    tree_.add_fdinfo(500, 3, text);  // forked child holding the same drm_file
    tree_.add_fdinfo(400, 4, text);
    tree_.add_fdinfo(400, 9, text);  // dup()
    auto result = backend()->sample_processes(
        std::vector<ProcessFd>{{500, 3, {226, 128}}, {400, 4, {226, 128}}, {400, 9, {226, 128}}});
    ASSERT_TRUE(result.ok());
    ASSERT_EQ(result->processes.size(), 1u);
    EXPECT_EQ(result->processes[0].pid, 400);
    EXPECT_EQ(result->processes[0].memory_bytes, 1024u * 1024);
}

TEST_F(DrmBackendTest, vanished_and_broken_fdinfo_are_skipped_the_rest_reported) {
    tree_.add_amdgpu(0, "0000:03:00.0");
    tree_.add_fdinfo(100, 5, testing::amdgpu_fdinfo(42, "0000:03:00.0", 1024, 0, 0));
    tree_.write("proc/101/fdinfo/6/x", "");  // read() fails after open(): EISDIR
    tree_.add_fdinfo(102, 7, "pos:\t0\ndrm-driver:\tamdgpu\ndrm-client-id:\tseven\n");
    tree_.add_fdinfo(103, 8, "pos:\t0\nflags:\t0100000\n");  // fd reused for a regular file
    auto result =
        backend()->sample_processes(std::vector<ProcessFd>{{99, 4, {226, 128}},  // process gone
                                                           {100, 5, {226, 128}},
                                                           {101, 6, {226, 128}},
                                                           {102, 7, {226, 128}},
                                                           {103, 8, {226, 128}}});
    ASSERT_TRUE(result.ok());
    ASSERT_EQ(result->processes.size(), 1u);
    EXPECT_EQ(result->processes[0].pid, 100);
    ASSERT_EQ(result->problems.size(), 2u);
    EXPECT_NE(result->problems[0].find("101/fdinfo/6: read: Is a directory"), std::string::npos);
    EXPECT_NE(result->problems[1].find("102/fdinfo/7:3: drm-client-id: not an unsigned integer"),
              std::string::npos);
}

TEST_F(DrmBackendTest, process_exiting_between_report_and_read_is_not_an_error) {
    // A real process under the real /proc: it holds an fd, then exits.
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        char byte;
        (void)!read(pipe_fds[0], &byte, 1);
        _exit(0);
    }
    tree_.add_amdgpu(0, "0000:03:00.0");
    DrmOptions options;
    options.sysfs_root = tree_.sys();
    options.proc_root = "/proc";
    auto drm = make_drm_backend(options);
    const std::vector<ProcessFd> fds = {{child, pipe_fds[0], {226, 128}}};
    auto alive = drm->sample_processes(fds);  // a pipe: not a DRM client
    ASSERT_TRUE(alive.ok());
    EXPECT_TRUE(alive->processes.empty());
    EXPECT_TRUE(alive->problems.empty());
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    auto gone = drm->sample_processes(fds);
    ASSERT_TRUE(gone.ok());
    EXPECT_TRUE(gone->processes.empty());
    EXPECT_TRUE(gone->problems.empty());
    close(pipe_fds[0]);
    close(pipe_fds[1]);
}

TEST_F(DrmBackendTest, i915_and_xe_processes) {
    tree_.add_i915(0, "0000:00:02.0");
    tree_.add_xe(1, "0000:03:00.0");
    tree_.add_fdinfo(10, 3, testing::i915_fdinfo(7, "0000:00:02.0", 0, 0));
    tree_.add_fdinfo(11, 4, testing::xe_fdinfo(3, "0000:03:00.0", 0, 1000000, 0));
    auto drm = backend();
    const std::vector<ProcessFd> fds = {{10, 3, {226, 128}}, {11, 4, {226, 129}}};
    ASSERT_TRUE(drm->sample_processes(fds).ok());
    tree_.add_fdinfo(10, 3, testing::i915_fdinfo(7, "0000:00:02.0", 300000000, 1000000000));
    tree_.add_fdinfo(11, 4, testing::xe_fdinfo(3, "0000:03:00.0", 600000, 2000000, 0));
    now_ += 1s;
    auto result = drm->sample_processes(fds);
    ASSERT_TRUE(result.ok());
    ASSERT_EQ(result->processes.size(), 2u);
    EXPECT_EQ(result->processes[0].gpu, 0u);
    EXPECT_DOUBLE_EQ(*result->processes[0].compute_percent, 50.0);  // video 1 s / 2 engines
    EXPECT_EQ(result->processes[0].memory_bytes, 12ull << 20);
    EXPECT_EQ(result->processes[1].gpu, 1u);
    EXPECT_DOUBLE_EQ(*result->processes[1].compute_percent, 60.0);  // rcs cycles
    EXPECT_EQ(result->processes[1].memory_bytes, 256ull << 20);
    EXPECT_FALSE(result->processes[1].engine_busy_ns);  // xe reports cycles, not ns
}

TEST_F(DrmBackendTest, asahi_through_the_generic_fdinfo_path) {
    tree_.add_platform_card(0, "asahi", "206400000.gpu", "apple,agx-g13g");
    // No drm-pdev on a platform device: the node number maps the client.
    tree_.add_fdinfo(42, 11, testing::asahi_fdinfo(12, 301, 0));
    tree_.add_fdinfo(43, 12, testing::asahi_fdinfo(13, 64, -1));
    auto drm = backend();
    const std::vector<ProcessFd> fds = {{42, 11, {226, 128}}, {43, 12, {226, 0}}};
    ASSERT_TRUE(drm->sample_processes(fds).ok());
    tree_.add_fdinfo(42, 11, testing::asahi_fdinfo(12, 301, 250000000));
    now_ += 500ms;
    auto result = drm->sample_processes(fds);
    ASSERT_TRUE(result.ok());
    ASSERT_EQ(result->processes.size(), 2u);
    EXPECT_EQ(result->processes[0].memory_bytes, 301ull << 20);
    EXPECT_DOUBLE_EQ(*result->processes[0].compute_percent, 50.0);
    // Core stats only (no engine keys): memory yes, utilisation absent, not 0.
    EXPECT_EQ(result->processes[1].memory_bytes, 64ull << 20);
    EXPECT_FALSE(result->processes[1].compute_percent);
    EXPECT_FALSE(result->processes[1].engine_busy_ns);
    // Device-level: nothing asahi does not report.
    auto gpus = drm->sample_gpus();
    ASSERT_TRUE(gpus.ok());
    EXPECT_FALSE(gpus->gpus[0].gpu_utilization_percent);
    EXPECT_FALSE(gpus->gpus[0].sm_clock_mhz);
    EXPECT_TRUE(gpus->gpus[0].problems.empty());
}

TEST_F(DrmBackendTest, msm_without_node_number_maps_to_the_only_card_and_devfreq_clock) {
    const std::string dev = tree_.add_platform_card(0, "msm", "3d00000.gpu", "qcom,adreno-635.0");
    // drivers/devfreq/devfreq.c cur_freq_show: "%lu\n" Hz.
    tree_.write(dev + "/devfreq/3d00000.gpu/cur_freq", "608000000\n");
    tree_.add_fdinfo(50, 3, testing::msm_fdinfo(3, 0, 32));
    auto drm = backend();
    auto result = drm->sample_processes(std::vector<ProcessFd>{{50, 3, {}}});
    ASSERT_TRUE(result.ok());
    ASSERT_EQ(result->processes.size(), 1u);
    EXPECT_EQ(result->processes[0].memory_bytes, 32ull << 20);
    auto gpus = drm->sample_gpus();
    ASSERT_TRUE(gpus.ok());
    EXPECT_EQ(gpus->gpus[0].sm_clock_mhz, 608u);
    auto devices = drm->devices();
    EXPECT_EQ(devices->at(0).vendor, Vendor::kQualcomm);
}

}  // namespace
}  // namespace gpuguard::backends
