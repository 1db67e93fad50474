// What a later journal segment opens with beyond its process snapshots:
// the containers and the workloads (Slurm job, allocation) of the live
// processes, so the segment alone names them (journal_writer_test.cpp has
// the process snapshots themselves).
#include <gtest/gtest.h>

#include "gpuguard/journal/journal.h"
#include "tests/agent/journal/journal_fixtures.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent::journal {
namespace {

using testing::open_writer;
using testing::segment_paths;

class SegmentSnapshotTest : public ::testing::Test {
  protected:
    gpuguard::testing::TempDir dir_{"gg-journal-snapshot"};
};

// A later segment alone still names each known container: its opening
// snapshot has the container events before the process snapshots.
TEST_F(SegmentSnapshotTest, each_segment_opens_with_the_known_containers) {
    auto options = testing::test_options(dir_.path());
    options.segment_max_bytes = 4096;
    auto writer = open_writer(options);
    ASSERT_TRUE(writer);
    ContainerDetails details;
    details.name = "gg-miner";
    details.pod_name = "miner-pod";
    details.pod_namespace = "gg-ns";
    const std::string id(64, 'a');
    Event container;
    container.ts_ns = 10;
    container.task = TaskInfo{500, 500, 1, 0, 0, 9, "xmrig"};
    container.data = Container{id, "podman", details};
    ASSERT_TRUE(writer->append(container, 0));
    Event snapshot = container;
    snapshot.data = ProcessSnapshot{"/bin/sh",
                                    {"sh"},
                                    "root",
                                    "/libpod_parent/libpod-" + id,
                                    id,
                                    "podman",
                                    {SnapshotGpu{195, 0, 5}}};
    ASSERT_TRUE(writer->append(snapshot, 0));
    for (uint64_t i = 0; i < 200; ++i) {
        ASSERT_TRUE(writer->append(testing::numbered_event(i, 100), 0));
    }
    writer->close();
    const auto paths = segment_paths(dir_.path());
    ASSERT_GE(paths.size(), 2u);
    ReaderOptions containers_only;
    containers_only.types = {"container", "process_snapshot"};
    const auto records = testing::read_all(paths.back(), containers_only);
    ASSERT_GE(records.size(), 2u);
    EXPECT_TRUE(records[0].in_snapshot);
    EXPECT_EQ(std::get<Container>(records[0].event.data), (Container{id, "podman", details}));
    EXPECT_TRUE(std::holds_alternative<ProcessSnapshot>(records[1].event.data));
}

// A later segment alone still names each live process's Slurm job and
// allocation: its opening snapshot has the workload event after the
// process's snapshot; an exited process's is gone with it.
TEST_F(SegmentSnapshotTest, each_segment_opens_with_the_live_processes_workloads) {
    auto options = testing::test_options(dir_.path());
    options.segment_max_bytes = 4096;
    auto writer = open_writer(options);
    ASSERT_TRUE(writer);
    Workload workload;
    workload.scheduler = "slurm";
    workload.slurm = SlurmJob{"4242", "batch", "alice", "physics", "gpu", "0"};
    workload.allocation_source = "SLURM_JOB_GPUS";
    workload.allocation = "0";
    workload.allocated = {"195:0"};
    for (uint32_t pid : {600u, 601u}) {
        Event snapshot;
        snapshot.ts_ns = 10;
        snapshot.task = TaskInfo{pid, pid, 1, 1000, 1000, 9, "python3"};
        snapshot.data = ProcessSnapshot{"/usr/bin/python3",      {"python3"}, "alice", "/", "", "",
                                        {SnapshotGpu{195, 0, 5}}};
        ASSERT_TRUE(writer->append(snapshot, 0));
        Event job = snapshot;
        job.data = workload;
        ASSERT_TRUE(writer->append(job, 0));
    }
    Event exit;
    exit.ts_ns = 20;
    exit.task = TaskInfo{601, 601, 1, 1000, 1000, 9, "python3"};
    exit.data = Exit{0, true};
    ASSERT_TRUE(writer->append(exit, 0));
    for (uint64_t i = 0; i < 200; ++i) {
        ASSERT_TRUE(writer->append(testing::numbered_event(i, 100), 0));
    }
    writer->close();
    const auto paths = segment_paths(dir_.path());
    ASSERT_GE(paths.size(), 2u);
    ReaderOptions wanted;
    wanted.types = {"process_snapshot", "workload"};
    const auto records = testing::read_all(paths.back(), wanted);
    std::vector<std::pair<uint32_t, std::string>> seen;
    for (const auto& record : records) {
        if (record.event.task.pid != 600 && record.event.task.pid != 601) continue;
        EXPECT_TRUE(record.in_snapshot);
        seen.emplace_back(record.event.task.pid, event_type_name(record.event));
        if (const auto* read = std::get_if<Workload>(&record.event.data)) {
            EXPECT_EQ(*read, workload);
        }
    }
    EXPECT_EQ(seen, (std::vector<std::pair<uint32_t, std::string>>{{600, "process_snapshot"},
                                                                   {600, "workload"}}));
}

}  // namespace
}  // namespace gpuguard::agent::journal
