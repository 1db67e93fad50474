// GPM through the fake libnvidia-ml.so.1, opened with dlopen as the backend
// opens the real one: the previous sample kept per GPU, values over the last
// interval as fractions, and the unsupported and symbol-less cases.
#include "backends/nvml_gpm.h"

#include <fstream>
#include <map>
#include <string>

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include "tests/support/temp_dir.h"

namespace gpuguard::backends {
namespace {

using nlohmann::json;

class NvmlGpmTest : public ::testing::Test {
  protected:
    void SetUp() override {
        library_ = dlopen(GPUGUARD_FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
        ASSERT_NE(library_, nullptr) << dlerror();
        set_step_ = reinterpret_cast<void (*)(unsigned)>(dlsym(library_, "fake_nvml_set_step"));
        call_count_ =
            reinterpret_cast<int (*)(const char*)>(dlsym(library_, "fake_nvml_call_count"));
        init_ = reinterpret_cast<nvmlReturn_t (*)()>(dlsym(library_, "nvmlInit_v2"));
        handle_ = reinterpret_cast<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(
            dlsym(library_, "nvmlDeviceGetHandleByIndex_v2"));
        ASSERT_TRUE(set_step_ && call_count_ && init_ && handle_);
        set_step_(0);
    }
    void TearDown() override {
        unsetenv("GPUGUARD_FAKE_NVML_SCRIPT");
        if (library_) dlclose(library_);
    }

    nvmlDevice_t start(const json& steps) {
        const auto path = dir_.path() / "nvml.json";
        std::ofstream(path) << json{{"devices", json::array({{{"steps", steps}}})}}.dump();
        setenv("GPUGUARD_FAKE_NVML_SCRIPT", path.c_str(), 1);
        EXPECT_EQ(init_(), NVML_SUCCESS);
        for (const char* f : {"nvmlGpmQueryDeviceSupport", "nvmlGpmSampleGet"}) {
            baseline_[f] = call_count_(f);
        }
        nvmlDevice_t device = nullptr;
        EXPECT_EQ(handle_(0, &device), NVML_SUCCESS);
        return device;
    }

    gpuguard::testing::TempDir dir_{"gpuguard-gpm"};
    void* library_ = nullptr;
    void (*set_step_)(unsigned) = nullptr;
    int (*call_count_)(const char*) = nullptr;
    // Calls since start(): the fake's counts outlive one test while it stays loaded.
    int calls(const char* function) { return call_count_(function) - baseline_[function]; }
    std::map<std::string, int> baseline_;
    nvmlReturn_t (*init_)() = nullptr;
    nvmlReturn_t (*handle_)(unsigned, nvmlDevice_t*) = nullptr;
};

TEST_F(NvmlGpmTest, each_tick_reports_the_pipes_over_the_interval_since_the_previous_sample) {
    const json hash_loop = {{"sm", 97},  {"sm_occupancy", 62}, {"tensor", 0},   {"fp16", 0},
                            {"fp32", 2}, {"fp64", 0},          {"integer", 81}, {"dram", 58.5}};
    const json matmul = {{"sm", 99}, {"tensor", 74}, {"fp16", 12}, {"integer", 3}};
    nvmlDevice_t device =
        start(json::array({{{"gpm", json::object()}}, {{"gpm", hash_loop}}, {{"gpm", matmul}}}));
    GpmReader reader(library_);
    ASSERT_TRUE(reader.resolved());
    EXPECT_FALSE(reader.sample(0, device).has_value()) << "one sample is no interval yet";

    set_step_(1);
    const auto first = reader.sample(0, device);
    ASSERT_TRUE(first.has_value());
    EXPECT_DOUBLE_EQ(first->sm_active.value(), 0.97);
    EXPECT_DOUBLE_EQ(first->sm_occupancy.value(), 0.62);
    EXPECT_DOUBLE_EQ(first->tensor_active.value(), 0.0);
    EXPECT_DOUBLE_EQ(first->fp16_active.value(), 0.0);
    EXPECT_DOUBLE_EQ(first->fp32_active.value(), 0.02);
    EXPECT_DOUBLE_EQ(first->fp64_active.value(), 0.0);
    EXPECT_DOUBLE_EQ(first->integer_active.value(), 0.81);
    EXPECT_DOUBLE_EQ(first->dram_active.value(), 0.585);

    set_step_(2);  // the next interval starts at the last sample (the fake refuses otherwise)
    const auto second = reader.sample(0, device);
    ASSERT_TRUE(second.has_value());
    EXPECT_DOUBLE_EQ(second->tensor_active.value(), 0.74);
    EXPECT_DOUBLE_EQ(second->fp16_active.value(), 0.12);
    EXPECT_DOUBLE_EQ(second->integer_active.value(), 0.03);
    EXPECT_FALSE(second->dram_active.has_value()) << "a metric NVML does not report is absent";
    EXPECT_FALSE(second->fp64_active.has_value());
    EXPECT_EQ(calls("nvmlGpmQueryDeviceSupport"), 1);
    EXPECT_EQ(calls("nvmlGpmSampleGet"), 3);
}

TEST_F(NvmlGpmTest, an_unsupported_gpu_is_asked_once_and_never_sampled) {
    nvmlDevice_t device = start(json::array({{{"utilization", {50, 10}}}}));
    GpmReader reader(library_);
    ASSERT_TRUE(reader.resolved());
    for (int tick = 0; tick < 3; ++tick) EXPECT_FALSE(reader.sample(0, device).has_value());
    EXPECT_EQ(calls("nvmlGpmQueryDeviceSupport"), 1);
    EXPECT_EQ(calls("nvmlGpmSampleGet"), 0);
}

TEST_F(NvmlGpmTest, a_library_without_gpm_symbols_gives_no_activity) {
    // The test program itself exports no nvmlGpm* (the fake is RTLD_LOCAL):
    // a driver older than GPM, as dlsym sees it.
    void* self = dlopen(nullptr, RTLD_NOW);
    ASSERT_NE(self, nullptr);
    nvmlDevice_t device = start(json::array({{{"gpm", {{"sm", 50}}}}}));
    GpmReader reader(self);
    EXPECT_FALSE(reader.resolved());
    for (int tick = 0; tick < 3; ++tick) EXPECT_FALSE(reader.sample(0, device).has_value());
    EXPECT_EQ(calls("nvmlGpmSampleGet"), 0);
    dlclose(self);
}

TEST_F(NvmlGpmTest, a_failed_sample_restarts_the_interval_instead_of_spanning_the_gap) {
    nvmlDevice_t device = start(
        json::array({{{"gpm", {{"sm", 10}}}},
                     {{"gpm", {{"sm", 20}}}, {"errors", {{"nvmlGpmSampleGet", "GPU_IS_LOST"}}}},
                     {{"gpm", {{"sm", 30}}}},
                     {{"gpm", {{"sm", 40}}}}}));
    GpmReader reader(library_);
    EXPECT_FALSE(reader.sample(0, device).has_value());
    set_step_(1);
    EXPECT_FALSE(reader.sample(0, device).has_value());
    set_step_(2);
    EXPECT_FALSE(reader.sample(0, device).has_value()) << "no interval across the failed sample";
    set_step_(3);
    const auto activity = reader.sample(0, device);
    ASSERT_TRUE(activity.has_value());
    EXPECT_DOUBLE_EQ(activity->sm_active.value(), 0.40);
}

// A GPU in MIG mode: each GPU instance sampled on its own
// (nvmlGpmMigSampleGet), its two samples kept apart from the whole GPU's
// and the other slice's; a GI the GPU lacks gives nothing.
TEST_F(NvmlGpmTest, each_mig_gpu_instance_reports_its_own_pipes) {
    const json slices = {{"1", {{"sm", 95}, {"tensor", 0}, {"integer", 70}, {"dram", 4}}},
                         {"2", {{"sm", 92}, {"tensor", 40}, {"fp16", 22}, {"integer", 8}}}};
    nvmlDevice_t device = start(json::array({{{"gpm", {{"sm", 60}}}, {"gpm_mig", slices}},
                                             {{"gpm", {{"sm", 61}}}, {"gpm_mig", slices}}}));
    GpmReader reader(library_);
    EXPECT_FALSE(reader.sample(0, device).has_value());
    for (const unsigned gi : {1u, 2u, 7u}) EXPECT_FALSE(reader.sample_mig(0, device, gi));
    set_step_(1);
    const auto whole = reader.sample(0, device);
    const auto first = reader.sample_mig(0, device, 1);
    const auto second = reader.sample_mig(0, device, 2);
    ASSERT_TRUE(whole && first && second);
    EXPECT_DOUBLE_EQ(whole->sm_active.value(), 0.61);
    EXPECT_DOUBLE_EQ(first->integer_active.value(), 0.70);
    EXPECT_DOUBLE_EQ(first->tensor_active.value(), 0.0);
    EXPECT_DOUBLE_EQ(second->tensor_active.value(), 0.40);
    EXPECT_DOUBLE_EQ(second->fp16_active.value(), 0.22);
    EXPECT_FALSE(reader.sample_mig(0, device, 7)) << "no such GPU instance";
    EXPECT_EQ(calls("nvmlGpmQueryDeviceSupport"), 1) << "the GPU's support decides for its slices";
}

}  // namespace
}  // namespace gpuguard::backends
