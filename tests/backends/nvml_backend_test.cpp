// The NVML backend through the real dlopen path, against the fake
// libnvidia-ml.so.1 the tests build (tests/backends/fake_nvml).
#include <chrono>
#include <fstream>
#include <thread>

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include "gpuguard/backends/backends.h"
#include "tests/backends/sysfs_fixture.h"
#include "tests/support/temp_dir.h"

#ifndef GPUGUARD_FAKE_NVML_PATH
#error "GPUGUARD_FAKE_NVML_PATH must name the fake libnvidia-ml.so.1"
#endif

namespace gpuguard::backends {
namespace {

using nlohmann::json;

json full_step() {
    return json{
        {"utilization", {87, 41}},
        {"memory", {85899345920ull, 21474836480ull, 64424509440ull}},
        {"temperature", 61},
        {"memory_temperature", 70},
        {"power_mw", 250500},
        {"power_limit_mw", 350000},
        {"energy_mj", 123456789},
        {"sm_clock", 1980},
        {"mem_clock", 2619},
        {"fan", 45},
        {"pstate", 2},
        {"pcie_tx_kbs", 1000},
        {"pcie_rx_kbs", 2000},
        {"encoder", 5},
        {"decoder", 6},
        {"ecc_corrected", 3},
        {"ecc_uncorrected", 1},
        {"clock_reasons", 0x44},
        {"compute_processes", json::array({{{"pid", 4242}, {"used_memory", 1073741824}},
                                           {{"pid", 4343}}})},  // memory not available
        {"graphics_processes", json::array({{{"pid", 4242}, {"used_memory", 1073741824}},
                                            {{"pid", 5151}, {"used_memory", 65536}}})},
        {"process_utilization", json::array({{{"pid", 4242}, {"sm", 10}, {"timestamp", 100}},
                                             {{"pid", 4242}, {"sm", 93}, {"timestamp", 200}},
                                             {{"pid", 5151}, {"sm", 7}, {"timestamp", 150}}})}};
}

class NvmlBackendTest : public ::testing::Test {
  protected:
    void SetUp() override {
        library_ = dlopen(GPUGUARD_FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
        ASSERT_NE(library_, nullptr) << dlerror();
        set_step_ = reinterpret_cast<void (*)(unsigned)>(dlsym(library_, "fake_nvml_set_step"));
        call_count_ =
            reinterpret_cast<int (*)(const char*)>(dlsym(library_, "fake_nvml_call_count"));
        ASSERT_TRUE(set_step_ && call_count_);
        set_step_(0);
    }
    void TearDown() override {
        unsetenv("GPUGUARD_FAKE_NVML_SCRIPT");
        if (library_) dlclose(library_);
    }

    Result<std::unique_ptr<GpuBackend>> open(const json& script) {
        const auto path = dir_ / "nvml.json";
        std::ofstream(path) << script.dump();
        setenv("GPUGUARD_FAKE_NVML_SCRIPT", path.c_str(), 1);
        NvmlOptions options;
        options.library = GPUGUARD_FAKE_NVML_PATH;
        options.sysfs_root = dir_ / "sys";
        options.proc_root = dir_ / "proc";
        return open_nvml_backend(options);
    }

    static json one_device(json steps) {
        return json{{"driver_version", "550.54.15"},
                    {"devices", json::array({{{"name", "NVIDIA H100 80GB HBM3"},
                                              {"uuid", "GPU-2f6a5e4b-1c1d-4e58-9f0e-7a1d8f1b2c3d"},
                                              {"serial", "1650923012345"},
                                              {"bus_id", "00000000:3B:00.0"},
                                              {"minor", 3},
                                              {"steps", steps}}})}};
    }

    void tree_write(const std::string& relative, const std::string& text) {
        testing::FixtureTree(dir_.path()).write(relative, text);
    }

    gpuguard::testing::TempDir dir_{"gg-nvml"};
    void* library_ = nullptr;
    void (*set_step_)(unsigned) = nullptr;
    int (*call_count_)(const char*) = nullptr;
};

TEST_F(NvmlBackendTest, missing_library_is_not_found) {
    NvmlOptions options;
    options.library = (dir_ / "libnvidia-ml.so.1").string();
    auto backend = open_nvml_backend(options);
    ASSERT_FALSE(backend.ok());
    EXPECT_EQ(backend.error().code, ErrorCode::kNotFound);
    EXPECT_NE(backend.error().message.find("cannot load"), std::string::npos);
}

TEST_F(NvmlBackendTest, init_failure_carries_nvml_error_string) {
    auto backend = open(json{{"init_error", "DRIVER_NOT_LOADED"}});
    ASSERT_FALSE(backend.ok());
    EXPECT_EQ(backend.error().code, ErrorCode::kIo);
    EXPECT_EQ(backend.error().message, "nvmlInit_v2: Driver Not Loaded (9)");
}

TEST_F(NvmlBackendTest, devices_identity_and_device_numbers) {
    tree_write("sys/bus/pci/devices/0000:3b:00.0/drm/card1/dev", "226:1\n");
    tree_write("sys/bus/pci/devices/0000:3b:00.0/drm/renderD129/dev", "226:129\n");
    const int counts_before = call_count_("nvmlDeviceGetCount_v2");
    const int handles_before = call_count_("nvmlDeviceGetHandleByIndex_v2");
    auto backend = open(one_device(json::array({full_step()})));
    ASSERT_TRUE(backend.ok()) << backend.error().message;
    auto devices = (*backend)->devices();
    ASSERT_TRUE(devices.ok()) << devices.error().message;
    ASSERT_EQ(devices->size(), 1u);
    const auto& d = devices->at(0);
    EXPECT_EQ(d.vendor, Vendor::kNvidia);
    EXPECT_EQ(d.model, "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(d.uuid, "GPU-2f6a5e4b-1c1d-4e58-9f0e-7a1d8f1b2c3d");
    EXPECT_EQ(d.serial, "1650923012345");
    EXPECT_EQ(d.bus_id, "0000:3b:00.0");
    EXPECT_EQ(d.driver_version, "550.54.15");
    std::vector<DeviceNumber> expected = {{195, 3}, {226, 1}, {226, 129}};
    std::vector<DeviceNumber> got = d.device_numbers;
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected);
    // The fake stays loaded between tests (GNU unique symbols), so count deltas.
    EXPECT_EQ(call_count_("nvmlDeviceGetCount_v2") - counts_before, 1);
    EXPECT_EQ(call_count_("nvmlDeviceGetHandleByIndex_v2") - handles_before, 1);
}

TEST_F(NvmlBackendTest, every_metric) {
    auto backend = open(one_device(json::array({full_step()})));
    ASSERT_TRUE(backend.ok()) << backend.error().message;
    auto samples = (*backend)->sample_gpus();
    ASSERT_TRUE(samples.ok()) << samples.error().message;
    ASSERT_EQ(samples->gpus.size(), 1u);
    const GpuSample& s = samples->gpus[0];
    EXPECT_TRUE(s.problems.empty()) << s.problems.front();
    EXPECT_EQ(s.gpu_utilization_percent, 87.0);
    EXPECT_EQ(s.memory_utilization_percent, 41.0);
    EXPECT_EQ(s.memory_total_bytes, 85899345920u);
    EXPECT_EQ(s.memory_used_bytes, 21474836480u);
    EXPECT_EQ(s.memory_free_bytes, 64424509440u);
    EXPECT_EQ(s.temperature_gpu_celsius, 61.0);
    EXPECT_EQ(s.temperature_memory_celsius, 70.0);
    EXPECT_DOUBLE_EQ(*s.power_draw_watts, 250.5);
    EXPECT_EQ(s.power_limit_watts, 350.0);
    EXPECT_DOUBLE_EQ(*s.energy_joules, 123456.789);
    EXPECT_EQ(s.sm_clock_mhz, 1980u);
    EXPECT_EQ(s.memory_clock_mhz, 2619u);
    EXPECT_EQ(s.fan_speed_percent, 45.0);
    EXPECT_EQ(s.performance_state, 2u);
    EXPECT_EQ(s.pcie_tx_bytes_per_second, 1024000u);
    EXPECT_EQ(s.pcie_rx_bytes_per_second, 2048000u);
    EXPECT_EQ(s.encoder_utilization_percent, 5.0);
    EXPECT_EQ(s.decoder_utilization_percent, 6.0);
    EXPECT_EQ(s.ecc_errors_corrected, 3u);
    EXPECT_EQ(s.ecc_errors_uncorrected, 1u);
    ASSERT_TRUE(s.throttle_reasons);
    EXPECT_EQ(*s.throttle_reasons, (std::vector<std::string>{"sw_power_cap", "hw_thermal"}));
    EXPECT_FALSE(s.last_xid);
}

TEST_F(NvmlBackendTest, unsupported_is_absent_never_zero) {
    auto backend = open(one_device(json::array({json{{"utilization", {0, 0}}}})));
    ASSERT_TRUE(backend.ok());
    auto samples = (*backend)->sample_gpus();
    ASSERT_TRUE(samples.ok());
    const GpuSample& s = samples->gpus[0];
    EXPECT_TRUE(s.problems.empty());
    EXPECT_EQ(s.gpu_utilization_percent, 0.0);  // a real zero stays a zero
    EXPECT_FALSE(s.memory_total_bytes);
    EXPECT_FALSE(s.temperature_memory_celsius);
    EXPECT_FALSE(s.fan_speed_percent);  // passively cooled boards answer NOT_SUPPORTED
    EXPECT_FALSE(s.ecc_errors_corrected);
    EXPECT_FALSE(s.throttle_reasons);
}

TEST_F(NvmlBackendTest, no_permission_is_a_problem_line_and_the_rest_reads) {
    json step = full_step();
    step["errors"] = {{"nvmlDeviceGetTotalEnergyConsumption", "NO_PERMISSION"},
                      {"nvmlDeviceGetFanSpeed", "NOT_SUPPORTED"}};
    auto backend = open(one_device(json::array({step})));
    ASSERT_TRUE(backend.ok());
    auto samples = (*backend)->sample_gpus();
    ASSERT_TRUE(samples.ok());
    const GpuSample& s = samples->gpus[0];
    EXPECT_FALSE(s.energy_joules);
    EXPECT_FALSE(s.fan_speed_percent);
    EXPECT_EQ(s.gpu_utilization_percent, 87.0);
    ASSERT_EQ(s.problems.size(), 1u);
    EXPECT_EQ(s.problems[0],
              "GPU 0: nvmlDeviceGetTotalEnergyConsumption: Insufficient Permissions (4)");
}

TEST_F(NvmlBackendTest, gpu_lost_mid_run_leaves_metrics_absent_and_says_so_once) {
    json lost = full_step();
    lost["errors"] = {{"*", "GPU_IS_LOST"}};
    auto backend = open(one_device(json::array({full_step(), lost})));
    ASSERT_TRUE(backend.ok());
    ASSERT_TRUE((*backend)->sample_gpus().ok());
    const int calls_before = call_count_("nvmlDeviceGetMemoryInfo");
    set_step_(1);
    auto samples = (*backend)->sample_gpus();
    ASSERT_TRUE(samples.ok());
    const GpuSample& s = samples->gpus[0];
    EXPECT_FALSE(s.gpu_utilization_percent);
    EXPECT_FALSE(s.memory_used_bytes);
    ASSERT_EQ(s.problems.size(), 1u);
    EXPECT_EQ(s.problems[0], "GPU 0: nvmlDeviceGetUtilizationRates: GPU is lost (15)");
    // After GPU_IS_LOST the backend stops asking that GPU for this sample.
    EXPECT_EQ(call_count_("nvmlDeviceGetMemoryInfo"), calls_before);
}

// The fake's "step_file": another process (a test driving a live agent)
// moves the fake GPU through its steps by rewriting one number.
TEST_F(NvmlBackendTest, fake_steps_follow_the_scripts_step_file) {
    json idle = full_step();
    idle["utilization"] = {12, 3};
    json script = one_device(json::array({full_step(), idle}));
    const auto step_file = dir_ / "step";
    script["step_file"] = step_file.string();
    auto backend = open(script);
    ASSERT_TRUE(backend.ok()) << backend.error().message;
    auto first = (*backend)->sample_gpus();
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(first->gpus[0].gpu_utilization_percent, 87.0) << "no file yet: step 0";
    std::ofstream(step_file) << "1\n";
    auto second = (*backend)->sample_gpus();
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(second->gpus[0].gpu_utilization_percent, 12.0);
    std::ofstream(step_file) << "0\n";
    auto third = (*backend)->sample_gpus();
    ASSERT_TRUE(third.ok());
    EXPECT_EQ(third->gpus[0].gpu_utilization_percent, 87.0);
}

TEST_F(NvmlBackendTest, processes_use_v3_24_byte_records_and_merge_by_pid) {
    const int compute_before = call_count_("nvmlDeviceGetComputeRunningProcesses_v3");
    const int graphics_before = call_count_("nvmlDeviceGetGraphicsRunningProcesses_v3");
    auto backend = open(one_device(json::array({full_step()})));
    ASSERT_TRUE(backend.ok());
    auto result = (*backend)->sample_processes({});
    ASSERT_TRUE(result.ok()) << result.error().message;
    ASSERT_EQ(result->processes.size(), 3u);
    const auto& a = result->processes[0];
    EXPECT_EQ(a.pid, 4242);
    EXPECT_EQ(a.memory_bytes, 1073741824u);
    EXPECT_EQ(a.compute_percent, 93.0);  // the newest of its two samples
    EXPECT_EQ(a.source, "nvml");
    EXPECT_FALSE(a.engine_busy_ns);
    EXPECT_EQ(result->processes[1].pid, 4343);
    EXPECT_FALSE(result->processes[1].memory_bytes);  // NVML_VALUE_NOT_AVAILABLE
    EXPECT_FALSE(result->processes[1].compute_percent);
    EXPECT_EQ(result->processes[2].pid, 5151);
    EXPECT_EQ(result->processes[2].memory_bytes, 65536u);
    EXPECT_EQ(result->processes[2].compute_percent, 7.0);
    EXPECT_GE(call_count_("nvmlDeviceGetComputeRunningProcesses_v3") - compute_before, 1);
    EXPECT_GE(call_count_("nvmlDeviceGetGraphicsRunningProcesses_v3") - graphics_before, 1);
    // Utilisation is asked only for samples newer than the last one seen.
    auto again = (*backend)->sample_processes({});
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(again->processes[0].compute_percent);
}

TEST_F(NvmlBackendTest, many_processes_grow_the_buffer) {
    json step = full_step();
    json list = json::array();
    for (int pid = 1000; pid < 1100; ++pid) list.push_back({{"pid", pid}, {"used_memory", pid}});
    step["compute_processes"] = list;
    auto backend = open(one_device(json::array({step})));
    ASSERT_TRUE(backend.ok());
    auto result = (*backend)->sample_processes({});
    ASSERT_TRUE(result.ok());
    ASSERT_EQ(result->processes.size(), 102u);  // 100 compute + 4242, 5151 from graphics
    EXPECT_EQ(result->processes[99].pid, 1099);
    EXPECT_EQ(result->processes[99].memory_bytes, 1099u);
}

TEST_F(NvmlBackendTest, process_query_errors_are_problems) {
    json step = full_step();
    step["errors"] = {{"nvmlDeviceGetComputeRunningProcesses_v3", "NO_PERMISSION"}};
    auto backend = open(one_device(json::array({step})));
    ASSERT_TRUE(backend.ok());
    auto result = (*backend)->sample_processes({});
    ASSERT_TRUE(result.ok());
    ASSERT_FALSE(result->problems.empty());
    EXPECT_EQ(result->problems[0],
              "nvmlDeviceGetComputeRunningProcesses_v3: Insufficient Permissions (4)");
}

// Samples until `wanted` device events arrived on GPU 0 (the event thread
// hands them over asynchronously), at most 5 s; what arrived, in order,
// and the drops the samples counted.
struct Arrived {
    std::vector<GpuDeviceEvent> events;
    uint64_t dropped = 0;
    std::optional<uint64_t> last_xid;
};
Arrived sample_until(GpuBackend& backend, size_t wanted) {
    Arrived arrived;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (arrived.events.size() + arrived.dropped < wanted &&
           std::chrono::steady_clock::now() < deadline) {
        auto samples = backend.sample_gpus();
        if (!samples.ok()) break;
        arrived.dropped += samples->device_events_dropped;
        for (auto& event : samples->gpus[0].device_events) arrived.events.push_back(event);
        arrived.last_xid = samples->gpus[0].last_xid;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return arrived;
}

TEST_F(NvmlBackendTest, xid_ecc_and_clock_events_arrive_in_order_on_the_event_thread) {
    json later = full_step();
    later["xid"] = {48, 79};
    later["events"] = json::array({{{"type", "double_bit_ecc"}},
                                   {{"type", "single_bit_ecc"}},
                                   {{"type", "clock"}},
                                   {{"type", "xid"}, {"data", 31}}});
    auto backend = open(one_device(json::array({full_step(), later})));
    ASSERT_TRUE(backend.ok());
    const int asked = call_count_("nvmlDeviceGetSupportedEventTypes");  // counts outlive a test
    ASSERT_TRUE((*backend)->devices().ok());                            // starts the event thread
    auto before = (*backend)->sample_gpus();
    ASSERT_TRUE(before.ok());
    EXPECT_FALSE(before->gpus[0].last_xid);
    EXPECT_TRUE(before->gpus[0].device_events.empty());
    EXPECT_EQ(call_count_("nvmlDeviceGetSupportedEventTypes") - asked, 1);
    set_step_(1);
    const Arrived arrived = sample_until(**backend, 6);
    const std::vector<GpuDeviceEvent> expected = {
        {"xid", 48},      {"xid", 79}, {"ecc_double_bit", 0}, {"ecc_single_bit", 0},
        {"clocks", 0x44},  // the reasons then active, read at the event
        {"xid", 31}};
    EXPECT_EQ(arrived.events, expected);
    EXPECT_EQ(arrived.dropped, 0u);
    EXPECT_EQ(arrived.last_xid, 31u);
}

TEST_F(NvmlBackendTest, a_gpu_without_some_event_types_is_registered_for_those_it_has) {
    json later = full_step();
    later["events"] = json::array({{{"type", "double_bit_ecc"}}, {{"type", "xid"}, {"data", 13}}});
    json script = one_device(json::array({full_step(), later}));
    script["devices"][0]["supported_events"] = 0x8;  // Xid only (a GeForce without ECC)
    auto backend = open(script);
    ASSERT_TRUE(backend.ok());
    const int registrations = call_count_("nvmlDeviceRegisterEvents");
    ASSERT_TRUE((*backend)->devices().ok());
    set_step_(1);
    const Arrived arrived = sample_until(**backend, 1);
    EXPECT_EQ(arrived.events, (std::vector<GpuDeviceEvent>{{"xid", 13}}));
    // Nothing else comes: the ECC type was never registered (the fake queues
    // only registered types; NVML refuses a registration naming one the GPU
    // lacks, which the backend therefore never asks for).
    EXPECT_EQ(call_count_("nvmlDeviceRegisterEvents") - registrations, 1);
}

TEST_F(NvmlBackendTest, a_flood_of_xids_is_bounded_and_every_lost_one_counted) {
    json later = full_step();
    later["events"] = json::array({{{"type", "xid"}, {"data", 31}, {"count", 3000}}});
    auto backend = open(one_device(json::array({full_step(), later})));
    ASSERT_TRUE(backend.ok());
    ASSERT_TRUE((*backend)->devices().ok());
    const int waits = call_count_("nvmlEventSetWait_v2");
    set_step_(1);
    // No sample while the thread drains the flood: its queue fills.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (call_count_("nvmlEventSetWait_v2") - waits < 3001 &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const Arrived arrived = sample_until(**backend, 3000);
    EXPECT_EQ(arrived.events.size(), 1024u);  // the watcher's queue
    EXPECT_EQ(arrived.dropped, 3000u - 1024u);
}

TEST_F(NvmlBackendTest, the_event_thread_stops_within_its_wait_when_the_backend_closes) {
    auto backend = open(one_device(json::array({full_step()})));
    ASSERT_TRUE(backend.ok());
    ASSERT_TRUE((*backend)->devices().ok());
    const int waits = call_count_("nvmlEventSetWait_v2");
    const int frees = call_count_("nvmlEventSetFree");
    std::this_thread::sleep_for(std::chrono::milliseconds(450));
    // It waits in NVML with a timeout, not in a busy loop: about 2 waits here.
    EXPECT_LE(call_count_("nvmlEventSetWait_v2") - waits, 4);
    const auto started = std::chrono::steady_clock::now();
    backend->reset();
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(1000));
    EXPECT_EQ(call_count_("nvmlEventSetFree") - frees, 1);
}

// A partitioned H100 (minor 3): two MIG devices, the access nodes'
// minors from the driver's mig-minors file, each process's instance from
// NVML's process list, and no per-process utilisation (NVML has none under
// MIG; the script offers one, which must not be read as the truth).
TEST_F(NvmlBackendTest, a_mig_gpu_lists_its_instances_and_each_process_in_its_own) {
    tree_write("proc/driver/nvidia-caps/mig-minors",
               "config 1\nmonitor 2\ngpu3/gi1/access 66\ngpu3/gi1/ci0/access 67\n"
               "gpu3/gi2/access 75\ngpu3/gi2/ci0/access 76\n");
    // The nodes' major: nvidia-caps among the character devices, not the
    // block device of the same name after them.
    tree_write("proc/devices",
               "Character devices:\n  1 mem\n195 nvidia-frontend\n236 nvidia-caps\n"
               "237 nvidia-caps-imex-channels\n\nBlock devices:\n  7 loop\n240 nvidia-caps\n");
    json step = full_step();
    step.erase("utilization");  // NOT_SUPPORTED on a MIG GPU
    step["compute_processes"] = json::array(
        {{{"pid", 4242}, {"used_memory", 1024}, {"gpu_instance", 1}, {"compute_instance", 0}},
         {{"pid", 4343}, {"used_memory", 2048}, {"gpu_instance", 2}, {"compute_instance", 0}}});
    step["graphics_processes"] = json::array();
    step["gpm"] = {{"sm", 60}};
    step["gpm_mig"] = {{"1", {{"sm", 95}, {"integer", 70}}}, {"2", {{"sm", 92}, {"tensor", 40}}}};
    json script = one_device(json::array({step}));
    script["devices"][0]["mig_mode"] = {1, 1};
    script["devices"][0]["mig_instances"] = json::array(
        {{{"gpu_instance", 1},
          {"compute_instance", 0},
          {"uuid", "MIG-aaaa-1111"},
          {"steps", json::array({{{"memory", {42949672960ull, 0, 42949672960ull}}}})}},
         {{"gpu_instance", 2},
          {"compute_instance", 0},
          {"uuid", "MIG-bbbb-2222"},
          {"steps", json::array({{{"memory", {21474836480ull, 0, 21474836480ull}}}})}}});
    auto backend = open(script);
    ASSERT_TRUE(backend.ok());
    auto devices = (*backend)->devices();
    ASSERT_TRUE(devices.ok());
    ASSERT_EQ(devices->size(), 1u);
    const GpuDevice& gpu = (*devices)[0];
    EXPECT_TRUE(gpu.mig_enabled);
    const std::vector<MigInstance> expected = {
        {1, 0, "MIG-aaaa-1111", 42949672960ull, 67, 66, {236, 67}, {236, 66}},
        {2, 0, "MIG-bbbb-2222", 21474836480ull, 76, 75, {236, 76}, {236, 75}}};
    EXPECT_EQ(gpu.mig_instances, expected);
    auto processes = (*backend)->sample_processes({});
    ASSERT_TRUE(processes.ok());
    ASSERT_EQ(processes->processes.size(), 2u);
    for (const auto& process : processes->processes) {
        EXPECT_EQ(process.gpu_instance, process.pid == 4242 ? 1u : 2u) << process.pid;
        EXPECT_EQ(process.compute_instance, 0u) << process.pid;
        EXPECT_FALSE(process.compute_percent) << "no per-process utilisation under MIG";
    }
    // Each GPU instance's own pipes from the second tick (nvmlGpmMigSampleGet).
    auto tick1 = (*backend)->sample_gpus();
    auto tick2 = (*backend)->sample_gpus();
    ASSERT_TRUE(tick1.ok() && tick2.ok());
    EXPECT_TRUE(tick1->gpus.at(0).gpm_by_gpu_instance.empty()) << "one sample is no interval";
    const auto& slices = tick2->gpus.at(0).gpm_by_gpu_instance;
    ASSERT_EQ(slices.size(), 2u);
    EXPECT_DOUBLE_EQ(slices.at(1).integer_active.value(), 0.70);
    EXPECT_DOUBLE_EQ(slices.at(2).tensor_active.value(), 0.40);
    const std::string text =
        to_json(Snapshot{1, {}, *devices, tick2->gpus, processes->processes, {}});
    EXPECT_NE(text.find("\"uuid\": \"MIG-bbbb-2222\""), std::string::npos) << text;
    EXPECT_NE(text.find("\"access_minor\": 76"), std::string::npos) << text;
    EXPECT_NE(text.find("\"access_node\": \"236:76\""), std::string::npos) << text;
    EXPECT_NE(text.find("\"mig_metrics\""), std::string::npos) << text;
    EXPECT_NE(text.find("\"pipe_int_active\": 0.7"), std::string::npos) << text;
}

TEST_F(NvmlBackendTest, a_gpu_with_mig_off_or_without_it_has_no_instances) {
    json off = one_device(json::array({full_step()}));
    off["devices"][0]["mig_mode"] = {0, 1};  // enabled at the next reset: not now
    for (const json& script : {off, one_device(json::array({full_step()}))}) {
        auto backend = open(script);
        ASSERT_TRUE(backend.ok());
        auto devices = (*backend)->devices();
        ASSERT_TRUE(devices.ok());
        EXPECT_FALSE((*devices)[0].mig_enabled);
        EXPECT_TRUE((*devices)[0].mig_instances.empty());
        auto processes = (*backend)->sample_processes({});
        ASSERT_TRUE(processes.ok());
        for (const auto& process : processes->processes) {
            EXPECT_FALSE(process.gpu_instance) << process.pid;
        }
    }
}

}  // namespace
}  // namespace gpuguard::backends

namespace gpuguard::backends {
namespace {

TEST_F(NvmlBackendTest, gpm_pipe_activity_rides_in_the_gpu_sample_from_the_second_tick) {
    json first = full_step();
    first["gpm"] = json::object();
    json second = full_step();
    second["gpm"] = {{"sm", 96}, {"tensor", 0}, {"integer", 77}, {"dram", 61}, {"fp32", 3}};
    auto backend = open(one_device(json::array({first, second})));
    ASSERT_TRUE(backend.ok()) << backend.error().message;
    auto tick1 = (*backend)->sample_gpus();
    ASSERT_TRUE(tick1.ok());
    EXPECT_FALSE(tick1->gpus.at(0).gpm.has_value()) << "one GPM sample is no interval";
    set_step_(1);
    auto tick2 = (*backend)->sample_gpus();
    ASSERT_TRUE(tick2.ok());
    const auto& gpm = tick2->gpus.at(0).gpm;
    ASSERT_TRUE(gpm.has_value());
    EXPECT_DOUBLE_EQ(gpm->integer_active.value(), 0.77);
    EXPECT_DOUBLE_EQ(gpm->dram_active.value(), 0.61);
    EXPECT_DOUBLE_EQ(gpm->tensor_active.value(), 0.0);
    EXPECT_FALSE(gpm->fp64_active.has_value());

    Snapshot snapshot;
    auto devices = (*backend)->devices();
    ASSERT_TRUE(devices.ok());
    snapshot.devices = *devices;
    snapshot.gpus = tick2->gpus;
    const auto metrics = json::parse(to_json(snapshot))["devices"][0]["metrics"];
    EXPECT_DOUBLE_EQ(metrics["pipe_int_active"].get<double>(), 0.77);
    EXPECT_DOUBLE_EQ(metrics["sm_active"].get<double>(), 0.96);
    EXPECT_FALSE(metrics.contains("pipe_fp64_active"));
}

}  // namespace
}  // namespace gpuguard::backends
