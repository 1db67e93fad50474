#include "gpuguard/state/process_table.h"

#include <fstream>
#include <random>
#include <set>

#include <gtest/gtest.h>
#include <unistd.h>

#include "gpuguard/state/process_handle.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using gpuguard::testing::TempDir;

TEST(ContainerFromCgroup, recognises_each_runtime_and_driver) {
    const std::string id(64, 'a');
    const std::string other = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    struct Case {
        std::string path;
        std::optional<ContainerInfo> expected;
    } cases[] = {
        {"/system.slice/docker-" + id + ".scope", ContainerInfo{"docker", id}},
        {"/docker/" + other, ContainerInfo{"docker", other}},
        {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice/"
         "cri-containerd-" +
             id + ".scope",
         ContainerInfo{"containerd", id}},
        {"/kubepods/burstable/pod0c7c-11e9/" + other, ContainerInfo{"containerd", other}},
        {"/kubepods.slice/kubepods-pod9.slice/crio-" + other + ".scope",
         ContainerInfo{"cri-o", other}},
        {"/machine.slice/libpod-" + id + ".scope/container", ContainerInfo{"podman", id}},
        {"/libpod_parent/libpod-x/" + other, ContainerInfo{"podman", other}},
        {"/libpod_parent/libpod-" + id, ContainerInfo{"podman", id}},
        {"/libpod_parent/libpod-conmon-" + id, std::nullopt},
        {"/kubepods/besteffort/pod0c7c-11e9/crio-" + other, ContainerInfo{"cri-o", other}},
        {"/user.slice/user-1000.slice/session-2.scope", std::nullopt},
        {"/system.slice/docker-short.scope", std::nullopt},
        {"/", std::nullopt},
        {"", std::nullopt},
    };
    for (const auto& c : cases) {
        EXPECT_EQ(container_from_cgroup(c.path), c.expected) << c.path;
    }
}

TEST(ContainerFromCgroup, cgroup_file_prefers_the_v2_line) {
    EXPECT_EQ(cgroup_path_from_proc("12:cpu:/a\n1:name=systemd:/sys/b\n0::/v2/path\n"), "/v2/path");
    EXPECT_EQ(cgroup_path_from_proc("12:cpu:/a\n1:name=systemd:/sys/b\n"), "/sys/b");
    EXPECT_EQ(cgroup_path_from_proc(""), "");
}

// A /proc tree with three processes: 100 holds 1:3 (as /dev/null) on fd 5,
// 200 holds only 1:5, 300 is a kernel-thread-like entry with nothing readable.
class ProcessTableTest : public ::testing::Test {
  protected:
    void SetUp() override {
        const std::string container(64, 'c');
        make_process(100, "miner", 1, 1000, {"./xmrig", "-o", "pool:3333"},
                     "0::/system.slice/docker-" + container + ".scope\n", "/opt/x/xmrig",
                     {{5, "/dev/null"}, {6, "/dev/zero"}});
        make_process(200, "bash", 1, 0, {"bash"}, "0::/user.slice\n", "/usr/bin/bash",
                     {{0, "/dev/zero"}});
        std::filesystem::create_directories(proc_ / "300");
        std::filesystem::create_directories(proc_ / "self");
    }

    void make_process(uint32_t pid, const std::string& name, uint32_t ppid, uint32_t uid,
                      const std::vector<std::string>& argv, const std::string& cgroup,
                      const std::string& exe, const std::vector<std::pair<int, std::string>>& fds) {
        const auto dir = proc_ / std::to_string(pid);
        std::filesystem::create_directories(dir / "fd");
        std::ofstream(dir / "status")
            << "Name:\t" << name << "\nUmask:\t0022\nState:\tS (sleeping)\n"
            << "Tgid:\t" << pid << "\nPid:\t" << pid << "\nPPid:\t" << ppid << "\nUid:\t" << uid
            << "\t" << uid << "\t" << uid << "\t" << uid << "\nGid:\t" << uid << "\t" << uid << "\t"
            << uid << "\t" << uid << "\n";
        std::string cmdline;
        for (const auto& arg : argv) cmdline += arg + '\0';
        std::ofstream(dir / "cmdline", std::ios::binary) << cmdline;
        std::ofstream(dir / "cgroup") << cgroup;
        std::filesystem::create_symlink(exe, dir / "exe");
        for (const auto& [fd, target] : fds) {
            std::filesystem::create_symlink(target, dir / "fd" / std::to_string(fd));
        }
    }

    ProcessTable make_table(size_t max_entries = 1000) {
        ProcessTableOptions options;
        options.proc_root = proc_.path();
        options.max_entries = max_entries;
        options.exit_grace = std::chrono::seconds(30);
        options.max_connects = 2;
        return ProcessTable(
            options, [](uint32_t major, uint32_t minor) { return major == 1 && minor == 3; });
    }

    static Event event_of(uint32_t pid, uint64_t ts, EventData data) {
        Event event;
        event.ts_ns = ts;
        event.task.pid = event.task.tid = pid;
        event.task.ppid = 1;
        event.task.comm = "proc" + std::to_string(pid);
        event.data = std::move(data);
        return event;
    }

    TempDir proc_{"gg-proc"};
};

TEST_F(ProcessTableTest, bootstrap_finds_processes_already_holding_a_gpu) {
    auto table = make_table();
    auto report = table.bootstrap();
    ASSERT_TRUE(report.ok()) << report.error().message;
    EXPECT_EQ(report->processes, 2u);
    EXPECT_EQ(report->gpu_processes, 1u);
    EXPECT_EQ(report->unreadable, 1u);  // 300 has nothing; "self" is not a pid

    const auto gpu = table.gpu_processes();
    ASSERT_EQ(gpu.size(), 1u);
    const ProcessInfo& miner = gpu[0];
    EXPECT_EQ(miner.pid, 100u);
    EXPECT_EQ(miner.comm, "miner");
    EXPECT_EQ(miner.uid, 1000u);
    EXPECT_EQ(miner.exe, "/opt/x/xmrig");
    EXPECT_EQ(miner.cmdline, (std::vector<std::string>{"./xmrig", "-o", "pool:3333"}));
    ASSERT_EQ(miner.gpus.size(), 1u);
    EXPECT_EQ(miner.gpus[0], (GpuHandle{1, 3, 5, 0, false}));
    ASSERT_TRUE(miner.container.has_value());
    EXPECT_EQ(miner.container->runtime, "docker");
    EXPECT_EQ(miner.cgroup_path.rfind("/system.slice/docker-", 0), 0u);

    const auto bash = table.get(200);
    ASSERT_TRUE(bash.has_value());
    EXPECT_FALSE(bash->holds_gpu());
    EXPECT_TRUE(bash->exe.empty()) << "non-GPU processes are not enriched";
}

// The agent's own fds (NVML's on /dev/nvidia*) do not make it a GPU user.
TEST_F(ProcessTableTest, bootstrap_leaves_the_ignored_pid_without_gpus) {
    ProcessTableOptions options;
    options.proc_root = proc_.path();
    options.ignore_pid = 100;
    ProcessTable table(options,
                       [](uint32_t major, uint32_t minor) { return major == 1 && minor == 3; });
    auto report = table.bootstrap();
    ASSERT_TRUE(report.ok()) << report.error().message;
    EXPECT_EQ(report->processes, 2u);
    EXPECT_EQ(report->gpu_processes, 0u);
    EXPECT_TRUE(table.gpu_processes().empty());
    const auto agent = table.get(100);
    ASSERT_TRUE(agent.has_value());
    EXPECT_FALSE(agent->holds_gpu());
}

TEST_F(ProcessTableTest, bootstrap_of_missing_proc_root_fails_with_path) {
    ProcessTableOptions options;
    options.proc_root = proc_ / "nope";
    ProcessTable table(options, [](uint32_t, uint32_t) { return true; });
    auto report = table.bootstrap();
    ASSERT_FALSE(report.ok());
    EXPECT_NE(report.error().message.find("nope"), std::string::npos);
}

TEST_F(ProcessTableTest, events_build_the_lifecycle) {
    auto table = make_table();
    // 200 (bash) forks 201, which execs a miner, opens a GPU, connects, exits.
    Exec exec;
    exec.filename = "/tmp/xmrig";
    exec.argv = {"xmrig", "--cuda"};
    Event fork_event = event_of(200, 10, Fork{201, false});
    table.apply(fork_event);
    ASSERT_TRUE(table.get(201).has_value());
    EXPECT_EQ(table.get(201)->ppid, 200u);

    table.apply(event_of(201, 20, exec));
    auto info = table.get(201);
    EXPECT_EQ(info->exe, "/tmp/xmrig");
    EXPECT_EQ(info->cmdline, exec.argv);

    GpuOpen open;
    open.major = 1;
    open.minor = 3;
    open.result = 4;
    table.apply(event_of(201, 30, open));
    info = table.get(201);
    ASSERT_EQ(info->gpus.size(), 1u);
    EXPECT_EQ(info->gpus[0].fd, 4);
    EXPECT_EQ(info->gpus[0].since_ns, 30u);

    for (uint16_t port : {3333, 3334, 3335}) {
        Connect connect;
        connect.address = "10.0.0.1";
        connect.port = port;
        table.apply(event_of(201, 40 + port, connect));
    }
    info = table.get(201);
    ASSERT_EQ(info->connects.size(), 2u) << "bounded by max_connects";
    EXPECT_EQ(info->connects.back().port, 3335);

    Exit exit;
    exit.status = 9;  // SIGKILL
    table.apply(event_of(201, 100, exit));
    info = table.get(201);
    EXPECT_TRUE(info->exited);
    EXPECT_EQ(info->exit_signal, 9);
    EXPECT_FALSE(info->exit_code.has_value());

    // Still there within the grace period, gone after it, reported as a GPU pid.
    EXPECT_TRUE(table.evict(100 + 29'000'000'000ull).empty());
    EXPECT_TRUE(table.get(201).has_value());
    EXPECT_EQ(table.evict(100 + 30'000'000'000ull), std::vector<uint32_t>{201});
    EXPECT_FALSE(table.get(201).has_value());
}

// A pid reused after an exit: the new exec's entry carries nothing of the
// old process (its executable, arguments, truncation and GPUs).
TEST_F(ProcessTableTest, a_pid_reused_after_an_exit_starts_afresh) {
    auto table = make_table();
    Exec exec;
    exec.filename = "/opt/a-long-install-directory/bin/trainer";
    exec.argv = {"trainer", "--config", "/etc/trainer/a-long-configuration-name.yaml"};
    exec.argv_truncated = true;
    GpuOpen open;
    open.major = 1;
    open.minor = 3;
    open.result = 4;
    Exec reused = exec;
    reused.filename = "/usr/bin/another-program-entirely";
    reused.argv = {"another-program-entirely"};
    reused.argv_truncated = false;
    table.apply(event_of(300, 10, exec));
    table.apply(event_of(300, 20, open));
    ASSERT_TRUE(table.get(300));
    EXPECT_EQ(table.get(300)->exe, exec.filename);
    EXPECT_TRUE(table.get(300)->cmdline_truncated);
    EXPECT_FALSE(table.get(300)->gpus.empty());
    table.apply(event_of(300, 30, Exit{0, true}));
    table.apply(event_of(300, 40, reused));
    EXPECT_EQ(table.get(300)->exe, "/usr/bin/another-program-entirely");
    EXPECT_EQ(table.get(300)->cmdline, std::vector<std::string>{"another-program-entirely"});
    EXPECT_FALSE(table.get(300)->cmdline_truncated);
    EXPECT_TRUE(table.get(300)->gpus.empty()) << "a reused pid starts afresh";
}

// Who a pid names: the start time its fork carried, for the kill's check
// (process_handle.h), and the exe an exec resolved from an fd path. A
// newcomer's fork on the same pid gives the entry its own start time.
TEST_F(ProcessTableTest, a_fork_gives_the_start_time_and_an_exec_its_resolved_exe) {
    auto table = make_table();
    const uint64_t boot_ns = 5'735'514'198'765ull;  // 5735.51 s after boot
    table.apply(event_of(400, 10, Fork{401, false, boot_ns}));
    Exec exec;
    exec.filename = "/proc/self/fd/3";
    exec.argv = {"x"};
    exec.exe = "/memfd:x (deleted)";
    table.apply(event_of(401, 20, exec));
    auto info = table.get(401);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->exe, "/memfd:x (deleted)");
    EXPECT_EQ(info->start_time_ns, proc_start_time_ns(boot_ns));
    const auto hz = static_cast<uint64_t>(sysconf(_SC_CLK_TCK));
    EXPECT_EQ(proc_start_time_ns(boot_ns),
              boot_ns / (1'000'000'000ull / hz) * (1'000'000'000ull / hz))
        << "whole clock ticks, as /proc/PID/stat counts";
    EXPECT_EQ(describe_process(*info).start_time_ns, info->start_time_ns);
    EXPECT_EQ(describe_process(*info).executable, "/memfd:x (deleted)");

    table.apply(event_of(401, 30, Exit{0, false}));
    table.apply(event_of(400, 40, Fork{401, false, boot_ns + 2'000'000'000ull}));
    EXPECT_EQ(table.get(401)->start_time_ns, proc_start_time_ns(boot_ns + 2'000'000'000ull));
    EXPECT_NE(table.get(401)->start_time_ns, info->start_time_ns);
}

// The exit queue against a sorted reference: exits mostly in time order,
// some late by up to a few seconds, pushes and pops interleaved.
TEST(ExitQueue, PopsOldestFirstWhateverOrderExitsCameIn) {
    ExitQueue queue;
    std::multiset<std::pair<uint64_t, uint32_t>> reference;
    std::mt19937 rng(11);
    uint64_t clock = 1'000'000;
    for (uint32_t pid = 1; pid <= 20000; ++pid) {
        clock += rng() % 1000;
        const uint64_t exit_ns = rng() % 10 == 0 ? clock - rng() % 500'000 : clock;
        queue.push(exit_ns, pid);
        reference.emplace(exit_ns, pid);
        if (rng() % 3 == 0) {
            ASSERT_FALSE(queue.empty());
            ASSERT_EQ(queue.front().first, reference.begin()->first);
            reference.erase(reference.find(queue.front()));
            queue.pop();
        }
        ASSERT_EQ(queue.size(), reference.size());
    }
    while (!queue.empty()) {
        ASSERT_EQ(queue.front().first, reference.begin()->first);
        reference.erase(reference.find(queue.front()));
        queue.pop();
    }
    EXPECT_TRUE(reference.empty());
}

// Exits reach the table almost in time order; one that comes late (another
// CPU's ring buffer) must still leave at the end of its own grace period,
// and the bound must still take the oldest exit first.
TEST_F(ProcessTableTest, exits_out_of_time_order_leave_oldest_first) {
    auto table = make_table(1000);
    constexpr uint64_t kSecond = 1'000'000'000ull;
    const std::vector<std::pair<uint32_t, uint64_t>> exits = {
        {1001, 10 * kSecond}, {1002, 40 * kSecond}, {1003, 20 * kSecond}, {1004, 50 * kSecond}};
    for (const auto& [pid, exit_ns] : exits) {
        Exec exec;
        exec.filename = "/bin/true";
        table.apply(event_of(pid, 1, exec));
        table.apply(event_of(pid, exit_ns, Exit{}));
    }
    table.evict(51 * kSecond);  // grace 30 s: 1001 (10 s) and 1003 (20 s) are due
    EXPECT_FALSE(table.get(1001).has_value());
    EXPECT_FALSE(table.get(1003).has_value()) << "the late exit waited behind a newer one";
    EXPECT_TRUE(table.get(1002).has_value());
    EXPECT_TRUE(table.get(1004).has_value());
    table.evict(75 * kSecond);
    EXPECT_FALSE(table.get(1002).has_value());
    EXPECT_TRUE(table.get(1004).has_value());
}

TEST_F(ProcessTableTest, fork_of_a_gpu_holder_inherits_its_handles) {
    auto table = make_table();
    ASSERT_TRUE(table.bootstrap().ok());
    table.apply(event_of(100, 10, Fork{101, true}));
    const auto child = table.get(101);
    ASSERT_TRUE(child.has_value());
    ASSERT_EQ(child->gpus.size(), 1u);
    EXPECT_TRUE(child->gpus[0].inherited);
    EXPECT_EQ(child->exe, "/opt/x/xmrig");
    EXPECT_EQ(child->ppid, 100u);
}

TEST_F(ProcessTableTest, ioctl_rates_come_from_successive_reads) {
    auto table = make_table();
    ASSERT_TRUE(table.bootstrap().ok());
    table.apply_ioctl_stats({IoctlAggregate{100, 1, 3, 0xc020462a, 100, 5, 50}}, 1'000'000'000);
    table.apply_ioctl_stats({IoctlAggregate{100, 1, 3, 0xc020462a, 600, 5, 90}}, 3'000'000'000);
    const auto info = table.get(100);
    ASSERT_EQ(info->ioctls.size(), 1u);
    EXPECT_EQ(info->ioctls[0].count, 600u);
    EXPECT_DOUBLE_EQ(info->ioctls[0].rate_per_s, 250.0);  // 500 calls over 2 s
    EXPECT_EQ(info->ioctl_total(), 600u);
    // Unknown pids are ignored rather than created.
    table.apply_ioctl_stats({IoctlAggregate{999, 1, 3, 1, 1, 1, 1}}, 4'000'000'000);
    EXPECT_FALSE(table.get(999).has_value());
}

TEST_F(ProcessTableTest, memory_is_bounded_and_gpu_holders_are_kept) {
    auto table = make_table(50);
    ASSERT_TRUE(table.bootstrap().ok());
    for (uint32_t pid = 1000; pid < 1200; ++pid) {
        Exec exec;
        exec.filename = "/bin/true";
        table.apply(event_of(pid, pid, exec));
    }
    EXPECT_LE(table.size(), 50u);
    EXPECT_GT(table.evicted_live(), 0u);
    EXPECT_TRUE(table.get(100).has_value()) << "the GPU holder survives";
    EXPECT_TRUE(table.get(1199).has_value()) << "the newest survives";
}

// Guard policies scope by container name: the name comes from the runtime's
// own state (docker's config.v2.json, podman's containers.json), "" where
// the runtime keeps none or it cannot be read.
TEST_F(ProcessTableTest, container_names_come_from_the_runtimes_state) {
    TempDir runtime{"gg-runtime"};
    const std::string docker(64, 'c');
    const std::string podman(64, 'd');
    const std::string unnamed(64, 'e');
    std::filesystem::create_directories(runtime.path() / "var/lib/docker/containers" / docker);
    std::ofstream(runtime.path() / "var/lib/docker/containers" / docker / "config.v2.json")
        << R"({"ID":")" << docker << R"(","Name":"/trainer-1","State":{"Running":true}})";
    std::filesystem::create_directories(runtime.path() /
                                        "var/lib/containers/storage/overlay-containers");
    std::ofstream(runtime.path() / "var/lib/containers/storage/overlay-containers/containers.json")
        << R"([{"id":"aaaa","names":["other"]},{"id":")" << podman
        << R"(","names":["render-job","alias"]}])";
    make_process(400, "render", 1, 1000, {"render"},
                 "0::/machine.slice/libpod-" + podman + ".scope\n", "/usr/bin/render",
                 {{5, "/dev/null"}});
    make_process(500, "job", 1, 1000, {"job"}, "0::/system.slice/docker-" + unnamed + ".scope\n",
                 "/usr/bin/job", {{5, "/dev/null"}});
    ProcessTableOptions options;
    options.proc_root = proc_.path();
    options.runtime_root = runtime.path();
    ProcessTable table(options,
                       [](uint32_t major, uint32_t minor) { return major == 1 && minor == 3; });
    ASSERT_TRUE(table.bootstrap().ok());
    EXPECT_EQ(table.get(100)->container_details.name, "trainer-1");
    EXPECT_EQ(table.get(400)->container_details.name, "render-job");
    EXPECT_EQ(table.get(500)->container_details.name, "") << "no state for that container";
    EXPECT_EQ(table.get(200)->container_details.name, "") << "a host process";
    // The default root is the host's: this fixture's containers are not there.
    auto host = make_table();
    ASSERT_TRUE(host.bootstrap().ok());
    EXPECT_EQ(host.get(100)->container_details.name, "");
}

}  // namespace
}  // namespace gpuguard::agent
