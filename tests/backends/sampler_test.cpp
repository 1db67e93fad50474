#include <thread>

#include <gtest/gtest.h>

#include "gpuguard/backends/backends.h"
#include "gpuguard/backends/scripted_backend.h"
#include "tests/backends/sysfs_fixture.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::backends {
namespace {

using namespace std::chrono_literals;

GpuDevice device(const std::string& model, Vendor vendor, DeviceNumber node) {
    GpuDevice d;
    d.model = model;
    d.vendor = vendor;
    d.backend = "scripted";
    d.device_numbers = {node};
    return d;
}

GpuSamples gpu_samples(double utilization) {
    GpuSamples samples;
    GpuSample s;
    s.gpu = 0;
    s.gpu_utilization_percent = utilization;
    samples.gpus.push_back(s);
    return samples;
}

ProcessSamples one_process(pid_t pid) {
    ProcessSamples samples;
    ProcessSample p;
    p.pid = pid;
    p.gpu = 0;
    p.memory_bytes = 4096;
    samples.processes.push_back(p);
    return samples;
}

TEST(TelemetrySampler, numbers_devices_across_backends) {
    std::vector<std::unique_ptr<GpuBackend>> backends;
    backends.push_back(std::make_unique<ScriptedBackend>(
        "a", std::vector<GpuDevice>{device("A0", Vendor::kNvidia, {195, 0})},
        std::vector<ScriptedBackend::Step>{{gpu_samples(10), one_process(11)}}));
    backends.push_back(std::make_unique<ScriptedBackend>(
        "b",
        std::vector<GpuDevice>{device("B0", Vendor::kAmd, {226, 0}),
                               device("B1", Vendor::kAmd, {226, 1})},
        std::vector<ScriptedBackend::Step>{{gpu_samples(20), one_process(22)}}));
    ASSERT_TRUE(backends[1]->devices().ok());  // devices() may be called again
    TelemetrySampler sampler(std::move(backends), {});
    EXPECT_EQ(sampler.latest().sequence, 0u);
    const Snapshot& snapshot = sampler.sample_once();
    EXPECT_EQ(snapshot.sequence, 1u);
    ASSERT_EQ(snapshot.devices.size(), 3u);
    EXPECT_EQ(snapshot.devices[2].model, "B1");
    EXPECT_EQ(snapshot.devices[2].index, 2u);
    ASSERT_EQ(snapshot.gpus.size(), 2u);
    EXPECT_EQ(snapshot.gpus[1].gpu, 1u);  // b's GPU 0 is global GPU 1
    EXPECT_EQ(snapshot.gpus[1].gpu_utilization_percent, 20.0);
    ASSERT_EQ(snapshot.processes.size(), 2u);
    EXPECT_EQ(snapshot.processes[1].pid, 22);
    EXPECT_EQ(snapshot.processes[1].gpu, 1u);
    const std::vector<DeviceNumber> numbers = {{195, 0}, {226, 0}, {226, 1}};
    EXPECT_EQ(sampler.gpu_device_numbers(), numbers);
}

TEST(TelemetrySampler, failing_backend_is_retried_and_does_not_stop_others) {
    auto flaky = std::make_unique<ScriptedBackend>(
        "flaky", std::vector<GpuDevice>{device("F", Vendor::kIntel, {226, 2})},
        std::vector<ScriptedBackend::Step>{
            {fail(ErrorCode::kIo, "sysfs went away"), ProcessSamples{}},
            {gpu_samples(55), ProcessSamples{}}},
        /*failing_device_calls=*/2);
    auto flaky_calls = flaky->calls();
    auto steady = std::make_unique<ScriptedBackend>(
        "steady", std::vector<GpuDevice>{device("S", Vendor::kAmd, {226, 0})},
        std::vector<ScriptedBackend::Step>{{gpu_samples(1), ProcessSamples{}}});
    std::vector<std::unique_ptr<GpuBackend>> backends;
    backends.push_back(std::move(flaky));
    backends.push_back(std::move(steady));
    TelemetrySampler sampler(std::move(backends), {});

    Snapshot s1 = sampler.sample_once();
    ASSERT_EQ(s1.backends.size(), 2u);
    EXPECT_FALSE(s1.backends[0].ok);
    EXPECT_EQ(s1.backends[0].last_error, "flaky: scripted device failure 1");
    EXPECT_TRUE(s1.backends[1].ok);
    ASSERT_EQ(s1.devices.size(), 1u);  // only the steady one
    EXPECT_EQ(s1.gpus[0].gpu_utilization_percent, 1.0);

    Snapshot s2 = sampler.sample_once();  // devices fail once more
    EXPECT_FALSE(s2.backends[0].ok);
    Snapshot s3 = sampler.sample_once();  // devices now succeed, first gpu step fails
    EXPECT_EQ(flaky_calls->devices, 3);
    EXPECT_FALSE(s3.backends[0].ok);
    EXPECT_EQ(s3.backends[0].last_error, "sysfs went away");
    ASSERT_EQ(s3.devices.size(), 2u);
    Snapshot s4 = sampler.sample_once();
    EXPECT_TRUE(s4.backends[0].ok);
    EXPECT_EQ(s4.gpus[0].gpu_utilization_percent, 55.0);
    EXPECT_EQ(flaky_calls->devices, 3);  // not asked again once known
}

TEST(TelemetrySampler, thread_samples_at_interval_with_the_callers_fds) {
    auto backend = std::make_unique<ScriptedBackend>(
        "s", std::vector<GpuDevice>{device("S", Vendor::kAmd, {226, 0})},
        std::vector<ScriptedBackend::Step>{{gpu_samples(3), ProcessSamples{}}});
    auto calls = backend->calls();
    std::vector<std::unique_ptr<GpuBackend>> backends;
    backends.push_back(std::move(backend));
    SamplerOptions options;
    options.interval = 20ms;
    options.process_fds = [] { return std::vector<ProcessFd>{{7, 3, {226, 128}}}; };
    TelemetrySampler sampler(std::move(backends), options);
    sampler.start();
    sampler.start();  // idempotent
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (sampler.latest().sequence < 3 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(5ms);
    }
    sampler.stop();
    const uint64_t sequence = sampler.latest().sequence;
    EXPECT_GE(sequence, 3u);
    std::this_thread::sleep_for(60ms);
    EXPECT_EQ(sampler.latest().sequence, sequence);  // really stopped
    std::lock_guard lock(calls->mutex);
    ASSERT_FALSE(calls->fds.empty());
    EXPECT_EQ(calls->fds[0], (std::vector<ProcessFd>{{7, 3, {226, 128}}}));
}

TEST(TelemetrySampler, set_process_fds_feeds_the_next_sample) {
    auto backend = std::make_unique<ScriptedBackend>("s", std::vector<GpuDevice>{},
                                                     std::vector<ScriptedBackend::Step>{});
    auto calls = backend->calls();
    std::vector<std::unique_ptr<GpuBackend>> backends;
    backends.push_back(std::move(backend));
    TelemetrySampler sampler(std::move(backends), {});
    sampler.set_process_fds({{9, 4, {}}});
    sampler.sample_once();
    std::lock_guard lock(calls->mutex);
    ASSERT_EQ(calls->fds.size(), 1u);
    EXPECT_EQ(calls->fds[0][0].pid, 9);
}

TEST(TelemetrySampler, snapshot_json_leaves_absent_metrics_out) {
    std::vector<std::unique_ptr<GpuBackend>> backends;
    backends.push_back(std::make_unique<ScriptedBackend>(
        "s", std::vector<GpuDevice>{device("S", Vendor::kApple, {226, 0})},
        std::vector<ScriptedBackend::Step>{{gpu_samples(0), one_process(5)}}));
    TelemetrySampler sampler(std::move(backends), {});
    const auto json = to_json(sampler.sample_once());
    EXPECT_NE(json.find("\"gpu_utilization_percent\": 0.0"), std::string::npos) << json;
    EXPECT_EQ(json.find("temperature_gpu_celsius"), std::string::npos);
    EXPECT_NE(json.find("\"vendor\": \"apple\""), std::string::npos);
    EXPECT_NE(json.find("\"memory_bytes\": 4096"), std::string::npos);
    EXPECT_EQ(json.find("compute_percent"), std::string::npos);
}

TEST(SweepGpuFds, finds_fds_by_device_number_only) {
    gpuguard::testing::TempDir dir("gg-sweep");
    namespace fs = std::filesystem;
    // Fixture /proc: fd links to real character devices (1:3 /dev/null, 1:5
    // /dev/zero) and a regular file; 1:3 is registered as the "GPU".
    fs::create_directories(dir / "proc/10/fd");
    fs::create_directories(dir / "proc/11/fd");
    fs::create_directories(dir / "proc/self-not-a-pid/fd");
    fs::create_symlink("/dev/null", dir / "proc/10/fd/3");
    fs::create_symlink("/dev/zero", dir / "proc/10/fd/4");
    fs::create_symlink("/etc/hostname", dir / "proc/10/fd/5");
    fs::create_symlink("/dev/null", dir / "proc/11/fd/7");
    fs::create_symlink("/nonexistent", dir / "proc/11/fd/8");  // closed while we look
    fs::create_symlink("/dev/null", dir / "proc/self-not-a-pid/fd/1");
    const std::vector<DeviceNumber> gpus = {{1, 3}};
    const auto found = sweep_gpu_fds(dir / "proc", gpus);
    const std::vector<ProcessFd> expected = {{10, 3, {1, 3}}, {11, 7, {1, 3}}};
    EXPECT_EQ(found, expected);
    EXPECT_TRUE(sweep_gpu_fds(dir / "proc", {}).empty());
    EXPECT_TRUE(sweep_gpu_fds(dir / "missing", gpus).empty());
}

}  // namespace
}  // namespace gpuguard::backends
