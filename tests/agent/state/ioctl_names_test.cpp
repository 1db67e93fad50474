#include "gpuguard/state/ioctl_names.h"

#include <gtest/gtest.h>
#include <linux/ioctl.h>

namespace gpuguard::agent {
namespace {

TEST(IoctlNames, nvidia_escapes_by_type_F) {
    const auto control =
        classify_ioctl("nvidia-frontend", _IOC(_IOC_READ | _IOC_WRITE, 'F', 0x2A, 32));
    EXPECT_EQ(control.family, "nvidia");
    EXPECT_EQ(control.name, "NV_ESC_RM_CONTROL");
    EXPECT_EQ(control.ioctl_class, IoctlClass::kControl);
    EXPECT_EQ(classify_ioctl("nvidia-frontend", _IOWR('F', 0x2B, 48)).name, "NV_ESC_RM_ALLOC");
    EXPECT_EQ(classify_ioctl("nvidia-frontend", _IOWR('F', 0x4E, 56)).name, "NV_ESC_RM_MAP_MEMORY");
    EXPECT_EQ(classify_ioctl("", _IOWR('F', 0x4A, 56)).name, "NV_ESC_RM_VID_HEAP_CONTROL");
    const auto unknown_escape = classify_ioctl("nvidia-frontend", _IOWR('F', 0x7F, 8));
    EXPECT_EQ(unknown_escape.family, "nvidia");
    EXPECT_EQ(unknown_escape.ioctl_class, IoctlClass::kOther);
}

TEST(IoctlNames, uvm_numbers_are_plain) {
    EXPECT_EQ(classify_ioctl("nvidia-uvm", 0x30000001).name, "UVM_INITIALIZE");
    EXPECT_EQ(classify_ioctl("nvidia-uvm", 37).name, "UVM_REGISTER_GPU");
    EXPECT_EQ(classify_ioctl("nvidia-uvm", 51).ioctl_class, IoctlClass::kMemory);
    EXPECT_EQ(classify_ioctl("config", 0x30000001).name, "UVM_INITIALIZE");
}

TEST(IoctlNames, drm_core_and_driver_ranges) {
    EXPECT_EQ(classify_ioctl("amdgpu", _IOWR('d', 0x00, 40)).name, "DRM_IOCTL_VERSION");
    const auto cs = classify_ioctl("amdgpu", _IOWR('d', 0x44, 24));
    EXPECT_EQ(cs.family, "amdgpu");
    EXPECT_EQ(cs.name, "DRM_IOCTL_AMDGPU_CS");
    EXPECT_EQ(cs.ioctl_class, IoctlClass::kSubmit);
    EXPECT_EQ(classify_ioctl("i915", _IOW('d', 0x69, 64)).name, "DRM_IOCTL_I915_GEM_EXECBUFFER2");
    EXPECT_EQ(classify_ioctl("xe", _IOW('d', 0x49, 56)).name, "DRM_IOCTL_XE_EXEC");
    EXPECT_EQ(classify_ioctl("nouveau", _IOW('d', 0x49, 56)).ioctl_class, IoctlClass::kOther);
}

TEST(IoctlNames, kfd_by_type_K) {
    EXPECT_EQ(classify_ioctl("kfd", _IOWR('K', 0x02, 88)).name, "AMDKFD_IOC_CREATE_QUEUE");
    EXPECT_EQ(classify_ioctl("", _IOWR('K', 0x16, 40)).name, "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU");
}

TEST(IoctlNames, anything_else_is_unknown) {
    const auto tty = classify_ioctl("", 0x5401);  // TCGETS
    EXPECT_EQ(tty.ioctl_class, IoctlClass::kUnknown);
    EXPECT_TRUE(tty.name.empty());
    EXPECT_STREQ(to_string(IoctlClass::kSubmit), "submit");
}

}  // namespace
}  // namespace gpuguard::agent
