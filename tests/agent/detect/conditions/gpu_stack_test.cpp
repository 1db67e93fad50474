// gpu_stack (agent/detect/conditions/gpu_stack.cpp): the stack the
// gpu_libraries event at the process's first GPU use gave is one of those
// listed; nothing before that event, nor when its maps could not be read.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class GpuStackTest : public ConditionTest {
  protected:
    const rules::CorrelationRule rule_ = rule_when("{gpu_stack: [runtime_only, driver_only]}");
    static constexpr uint32_t kPid = 700;
};

TEST_F(GpuStackTest, the_driver_and_a_runtime_compiler_only_holds) {
    exec(kPid, "/tmp/.x/kswapd");
    EXPECT_FALSE(holds(rule_, "gpu_stack", kPid, 5 * kSecond)) << "no gpu_libraries event yet";
    evidence(kPid).gpu_stack =
        GpuLibraries{{"/usr/lib/libcuda.so.1", "/tmp/.x/libnvrtc.so.12"}, "runtime_only", {}, ""};
    ASSERT_TRUE(holds(rule_, "gpu_stack", kPid, 5 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].event_type, "gpu_libraries");
    EXPECT_EQ(in_.extra[0].field, "gpu_stack");
    EXPECT_EQ(in_.extra[0].detail,
              "GPU stack runtime_only: libcuda.so.1, libnvrtc.so.12; no ML framework mapped");
}

TEST_F(GpuStackTest, an_ml_stack_or_an_unread_map_does_not) {
    exec(kPid, "/usr/bin/python3");
    evidence(kPid).gpu_stack =
        GpuLibraries{{"/opt/torch/lib/libtorch_cuda.so"}, "ml_framework", {"PyTorch"}, ""};
    EXPECT_FALSE(holds(rule_, "gpu_stack", kPid, 5 * kSecond));
    EXPECT_TRUE(holds(rule_when("{gpu_stack: [ml_framework]}"), "gpu_stack", kPid, 5 * kSecond));
    EXPECT_EQ(details(),
              std::vector<std::string>{"GPU stack ml_framework (PyTorch): libtorch_cuda.so"});
    evidence(kPid).gpu_stack = GpuLibraries{{}, "none", {}, "cannot read /proc/700/maps"};
    EXPECT_FALSE(holds(rule_when("{gpu_stack: [none]}"), "gpu_stack", kPid, 5 * kSecond));
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
