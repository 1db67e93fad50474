#include "gpuguard/events/gpu_devices.h"

#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

// /proc/devices of a host with the NVIDIA driver, amdgpu (kfd, drm) and an accel device.
constexpr const char* kProcDevicesGpuHost = R"(Character devices:
  1 mem
  4 /dev/vc/0
  4 tty
  5 /dev/tty
 10 misc
116 alsa
195 nvidia-frontend
226 drm
234 nvidia-nvswitch
235 nvidia-caps-imex-channels
236 nvidia-caps
237 nvidia-uvm
238 kfd
261 accel
509 nvidia-nvlink
511 hidraw

Block devices:
  7 loop
226 drm-not-a-char-device
259 blkext
)";

TEST(GpuDevices, finds_every_gpu_driver_in_the_char_section_only) {
    const auto found = gpu_devices_from_proc_devices(kProcDevicesGpuHost);
    std::vector<std::string> got;
    for (const auto& device : found) got.push_back(device.to_string() + " " + device.driver);
    const std::vector<std::string> expected = {"195:* nvidia-frontend",
                                               "226:* drm",
                                               "234:* nvidia-nvswitch",
                                               "235:* nvidia-caps-imex-channels",
                                               "236:* nvidia-caps",
                                               "237:* nvidia-uvm",
                                               "238:* kfd",
                                               "261:* accel",
                                               "509:* nvidia-nvlink"};
    EXPECT_EQ(got, expected);
}

TEST(GpuDevices, host_without_gpu_yields_nothing) {
    EXPECT_TRUE(gpu_devices_from_proc_devices(
                    "Character devices:\n  1 mem\n 10 misc\n\nBlock devices:\n  7 loop\n")
                    .empty());
    EXPECT_TRUE(gpu_devices_from_proc_devices("").empty());
    EXPECT_TRUE(gpu_devices_from_proc_devices("garbage\n\n195\nnvidia 195\n").empty());
}

TEST(GpuDevices, reads_proc_root) {
    gpuguard::testing::TempDir proc("gg-proc");
    std::ofstream(proc / "devices") << kProcDevicesGpuHost;
    auto found = read_gpu_devices(proc.path());
    ASSERT_TRUE(found.ok()) << found.error().message;
    EXPECT_EQ(found->size(), 9u);

    auto missing = read_gpu_devices(proc / "nope");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code, ErrorCode::kIo);
    EXPECT_NE(missing.error().message.find("nope/devices"), std::string::npos);
}

TEST(GpuDevices, parses_device_numbers) {
    auto exact = parse_gpu_device_number("1:3");
    ASSERT_TRUE(exact.ok());
    EXPECT_EQ(exact->major, 1u);
    EXPECT_EQ(exact->minor, 3u);
    auto whole = parse_gpu_device_number("226:*");
    ASSERT_TRUE(whole.ok());
    EXPECT_FALSE(whole->minor.has_value());
    EXPECT_EQ(whole->to_string(), "226:*");
    auto limits = parse_gpu_device_number("4095:1048575");
    ASSERT_TRUE(limits.ok());

    for (const char* bad :
         {"", "1", ":3", "1:", "a:b", "1:3x", "-1:3", "4096:0", "1:1048576", "1:3:4", " 1:3"}) {
        auto parsed = parse_gpu_device_number(bad);
        EXPECT_FALSE(parsed.ok()) << "'" << bad << "'";
        if (!parsed.ok()) {
            EXPECT_NE(parsed.error().message.find(std::string("'") + bad + "'"), std::string::npos);
        }
    }
}

// A telemetry record's device, "MAJOR:MINOR" exactly: no whole major, no
// trailing text (what sscanf's "%u:%u" let through before).
TEST(GpuDevices, parses_one_devices_number) {
    EXPECT_EQ(parse_device_number("195:0"), (std::pair<uint32_t, uint32_t>{195, 0}));
    EXPECT_EQ(parse_device_number("226:128"), (std::pair<uint32_t, uint32_t>{226, 128}));
    for (const char* bad : {"", "195", "195:", ":0", "195:*", "195:0x", "a:0", "-1:0", "nvml#0"}) {
        EXPECT_FALSE(parse_device_number(bad).has_value()) << "'" << bad << "'";
    }
}

}  // namespace
}  // namespace gpuguard::agent
