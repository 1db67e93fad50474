// The daemon's glue between the GPU backends and the events
// (agent/daemon/telemetry.cpp): a MIG GPU's access nodes in its telemetry
// events, and the nodes a GPU or MIG UUID names for a pod's allocation.
#include "gpuguard/daemon/telemetry.h"

#include <gtest/gtest.h>

namespace gpuguard::agent {
namespace {

using backends::DeviceNumber;
using backends::GpuDevice;
using backends::MigInstance;
using Nodes = std::vector<std::string>;

// An H100 in MIG mode (/dev/nvidia0, its render node) with two GPU
// instances, the first holding two compute instances; and a second GPU
// without MIG. The nvidia-caps major is 236.
std::vector<GpuDevice> inventory() {
    GpuDevice h100;
    h100.index = 0;
    h100.vendor = backends::Vendor::kNvidia;
    h100.uuid = "GPU-aaaa";
    h100.device_numbers = {{195, 0}, {226, 128}};
    h100.mig_enabled = true;
    const auto mig = [](uint32_t gi, uint32_t ci, std::string uuid, uint32_t gi_minor,
                        uint32_t ci_minor) {
        MigInstance instance;
        instance.gpu_instance = gi;
        instance.compute_instance = ci;
        instance.uuid = std::move(uuid);
        instance.access_minor = ci_minor;
        instance.gpu_instance_access_minor = gi_minor;
        instance.access_node = DeviceNumber{236, ci_minor};
        instance.gpu_instance_access_node = DeviceNumber{236, gi_minor};
        return instance;
    };
    h100.mig_instances = {mig(1, 0, "MIG-1111", 66, 67), mig(1, 1, "MIG-1112", 66, 68),
                          mig(2, 0, "MIG-2222", 75, 76)};
    GpuDevice l4;
    l4.index = 1;
    l4.vendor = backends::Vendor::kNvidia;
    l4.uuid = "GPU-bbbb";
    l4.device_numbers = {{195, 1}, {226, 129}, {0, 0}};
    return {h100, l4};
}

TEST(GpuNodesByUuid, a_gpu_is_all_its_nodes_and_a_mig_instance_its_gpu_and_access_nodes) {
    const auto devices = inventory();
    EXPECT_EQ(gpu_nodes_by_uuid(devices, "GPU-bbbb"), (Nodes{"195:1", "226:129"}))
        << "an unknown number is left out";
    // The whole partitioned GPU: every instance's nodes with its own.
    EXPECT_EQ(gpu_nodes_by_uuid(devices, "GPU-aaaa"),
              (Nodes{"195:0", "226:128", "236:66", "236:67", "236:68", "236:75", "236:76"}));
    // One MIG device: /dev/nvidia0 and its GPU and compute instances' nodes.
    EXPECT_EQ(gpu_nodes_by_uuid(devices, "MIG-1112"), (Nodes{"195:0", "236:66", "236:68"}));
    EXPECT_EQ(gpu_nodes_by_uuid(devices, "MIG-2222"), (Nodes{"195:0", "236:75", "236:76"}));
    // NVIDIA's older names of the same: MIG-GPU-<uuid>/<GI>/<CI>.
    EXPECT_EQ(gpu_nodes_by_uuid(devices, "MIG-GPU-aaaa/2/0"), (Nodes{"195:0", "236:75", "236:76"}));
    for (const char* unknown :
         {"GPU-dead", "MIG-dead", "MIG-GPU-aaaa/3/0", "MIG-GPU-aaaa/2", "MIG-GPU-aaaa/x/0", ""}) {
        EXPECT_TRUE(gpu_nodes_by_uuid(devices, unknown).empty()) << unknown;
    }
}

TEST(GpuNodesByUuid, the_inventory_counts_every_nvidia_node_and_access_node) {
    auto devices = inventory();
    GpuDevice amd;
    amd.vendor = backends::Vendor::kAmd;
    amd.uuid = "0x1234";
    amd.device_numbers = {{226, 130}};
    devices.push_back(amd);
    EXPECT_EQ(nvidia_gpu_nodes(devices), (Nodes{"195:0", "226:128", "236:66", "236:67", "236:68",
                                                "236:75", "236:76", "195:1", "226:129"}));
}

// Each telemetry event of a MIG GPU carries its instances' access nodes,
// a GPU instance's once however many compute instances it holds.
TEST(TelemetryEvents, a_mig_gpu_carries_each_access_node_once) {
    backends::Snapshot snapshot;
    snapshot.devices = inventory();
    snapshot.devices[1].mig_instances = {MigInstance{}};  // no node known: none written
    const auto events = telemetry_events(snapshot, 5);
    ASSERT_EQ(events.size(), 2u);
    const auto& mig = std::get<Telemetry>(events[0].data);
    EXPECT_EQ(mig.mig_nodes,
              (std::vector<MigNode>{
                  {1, "236:66"}, {1, "236:67"}, {1, "236:68"}, {2, "236:75"}, {2, "236:76"}}));
    EXPECT_EQ(mig.devices, (Nodes{"195:0", "226:128"}));
    EXPECT_TRUE(std::get<Telemetry>(events[1].data).mig_nodes.empty());
}

}  // namespace
}  // namespace gpuguard::agent
