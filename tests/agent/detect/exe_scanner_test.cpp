// The YARA scan worker's verdicts on real processes: a scan that could not
// be made says what kind of failure it was (ExeScan::error_kind), which the
// `unreadable` condition counts: an executable over the size limit, one
// root may not read (a FUSE mount without allow_other: here a thread
// without the DAC capabilities and an execute-only file). A request for a
// process by its start time is never answered about another process.
#include "gpuguard/detect/exe_scanner.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "gpuguard/state/process_handle.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

namespace fs = std::filesystem;

TEST(ExeScanWorker, AScanThatCouldNotBeMadeSaysWhy) {
    auto pack = signatures::load_builtin_pack();
    ASSERT_TRUE(pack) << pack.error().message;
    testing::TempDir dir("gg-exe-scan");
    const fs::path small = dir / "small";
    fs::copy_file(GPUGUARD_IDLE_PROCESS, small);
    const auto size = fs::file_size(small);
    const fs::path locked = dir / "locked";
    fs::copy_file(GPUGUARD_IDLE_PROCESS, locked);
    fs::permissions(locked, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec);
    const auto start = [&](const fs::path& exe) {
        const pid_t pid = testing::spawn_process(exe, {exe.filename().string()}, dir.path());
        EXPECT_GT(pid, 0) << std::strerror(errno);
        return TaskInfo{static_cast<uint32_t>(pid), static_cast<uint32_t>(pid), 1, 0, 0, 0, "x"};
    };
    const TaskInfo fits = start(small), refused = start(locked);
    testing::ChildReaper reap_fits(static_cast<pid_t>(fits.pid));
    testing::ChildReaper reap_refused(static_cast<pid_t>(refused.pid));

    std::mutex mutex;
    std::condition_variable arrived;
    std::vector<ExeScan> verdicts;
    const auto scan = [&](uint64_t max_file_size, const TaskInfo& task) {
        auto yara = signatures::YaraScanner::compile(*pack, {.max_file_size = max_file_size});
        ASSERT_TRUE(yara) << yara.error().message;
        ExeScanWorker worker(std::move(*yara), [&](Event event) {
            std::lock_guard lock(mutex);
            verdicts.push_back(std::get<ExeScan>(event.data));
            arrived.notify_all();
        });
        const size_t before = verdicts.size();
        ASSERT_TRUE(worker.submit(task));
        std::unique_lock lock(mutex);
        ASSERT_TRUE(arrived.wait_for(lock, std::chrono::seconds(10),
                                     [&] { return verdicts.size() > before; }));
    };
    // One byte over the limit, then within it.
    scan(size - 1, fits);
    scan(size, fits);
    // Root without the DAC capabilities, on an execute-only file.
    std::thread without_dac([&] {
        ASSERT_TRUE(testing::drop_dac_capabilities_in_this_thread()) << std::strerror(errno);
        scan(size, refused);
    });
    without_dac.join();

    std::lock_guard lock(mutex);
    ASSERT_EQ(verdicts.size(), 3u);
    EXPECT_EQ(verdicts[0].error_kind, "size_limit");
    EXPECT_NE(verdicts[0].error.find("scan limit"), std::string::npos) << verdicts[0].error;
    EXPECT_TRUE(verdicts[0].sha256.empty());
    EXPECT_EQ(verdicts[1].error, "");
    EXPECT_EQ(verdicts[1].error_kind, "");
    EXPECT_EQ(verdicts[1].sha256.size(), 64u);
    EXPECT_EQ(verdicts[2].error_kind, "permission") << verdicts[2].error;
    EXPECT_EQ(verdicts[2].path, locked.string());
}

// A request names the process the agent knows by its start time: a pid now
// held by a process that started at another time (the one asked about
// exited, and a newcomer took its pid before the agent read the exit) is
// not scanned as that process's, and counts as dropped.
TEST(ExeScanWorker, APidNowHeldByAnotherProcessIsNotScanned) {
    auto pack = signatures::load_builtin_pack();
    ASSERT_TRUE(pack) << pack.error().message;
    auto yara = signatures::YaraScanner::compile(*pack, {});
    ASSERT_TRUE(yara) << yara.error().message;
    testing::TempDir dir("gg-exe-scan-reused");
    const pid_t pid =
        testing::spawn_process(GPUGUARD_IDLE_PROCESS, {"gg-idle"}, dir.path().string());
    ASSERT_GT(pid, 0) << std::strerror(errno);
    testing::ChildReaper reap(pid);
    const auto handle = ProcessHandle::open(static_cast<uint32_t>(pid), 0);
    ASSERT_TRUE(handle) << handle.error().message;
    const uint64_t started = handle->stat().start_time_ns;
    ASSERT_GT(started, 0u);
    std::mutex mutex;
    std::condition_variable arrived;
    size_t verdicts = 0;
    ExeScanWorker worker(std::move(*yara), [&](Event) {
        std::lock_guard lock(mutex);
        ++verdicts;
        arrived.notify_all();
    });
    const TaskInfo task{static_cast<uint32_t>(pid), static_cast<uint32_t>(pid), 1, 0, 0, 0, "x"};
    EXPECT_FALSE(worker.submit(task, true, started - 1'000'000'000)) << "another start time";
    EXPECT_EQ(worker.stats().dropped, 1u);
    EXPECT_TRUE(worker.submit(task, true, started)) << "its own start time";
    std::unique_lock lock(mutex);
    ASSERT_TRUE(arrived.wait_for(lock, std::chrono::seconds(10), [&] { return verdicts > 0; }));
    EXPECT_EQ(verdicts, 1u);
}

}  // namespace
}  // namespace gpuguard::agent
