// Guard policies' scopes in the running agent (AgentDetectTest,
// agent_detect_fixture.h), one agent for all of them: time windows, a
// user's process cap, GPU index and vendor allocation, group and container
// scope, each with a process inside the scope that breaks the policy and
// one beside it that must not be reported. The processes are children of
// the test under test uids and gids (61001..), opening their GPU node while
// the agent runs (live gpu_open events); the container-like one sits in a
// cgroup the test creates (docker-ID.scope). The GPUs: two NVIDIA ones from
// the fake NVML, whose sysfs drm nodes are the test's 1:7 and 1:5, and an
// amdgpu card 1:8 in a sysfs fixture tree (backends.sysfs_root).
#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/netns.h"
#include "tests/support/run_command.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::Clock;
using gpuguard::testing::OwnChild;
using gpuguard::testing::Subprocess;
namespace fs = std::filesystem;

// A child of the test running as `uid`:`gid` (no supplementary groups),
// moved into `cgroup_dir` when one is given, that opens `node` only when
// told to (go()), so the agent sees the open live, and then stays.
class PolicyChild {
  public:
    PolicyChild(const std::string& comm, uid_t uid, gid_t gid, const std::string& node,
                const std::string& cgroup_dir = "") {
        int go[2], ready[2];
        if (pipe2(go, O_CLOEXEC) != 0 || pipe2(ready, O_CLOEXEC) != 0) return;
        const pid_t pid = fork();
        if (pid == 0) {
            close(go[1]);
            close(ready[0]);
            if (!cgroup_dir.empty()) {
                std::ofstream procs(cgroup_dir + "/cgroup.procs");
                procs << 0;  // "0": the writer itself
                procs.flush();
                if (!procs.good()) _exit(2);
            }
            if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 ||
                setresuid(uid, uid, uid) != 0) {
                _exit(3);
            }
            prctl(PR_SET_NAME, comm.c_str());
            char byte = 0;
            if (write(ready[1], "s", 1) != 1 || read(go[0], &byte, 1) != 1) _exit(4);
            if (open(node.c_str(), O_RDWR) < 0) _exit(5);
            if (write(ready[1], "o", 1) != 1) _exit(6);
            pause();
            _exit(0);
        }
        close(go[0]);
        close(ready[1]);
        go_ = go[1];
        ready_ = ready[0];
        child_ = std::make_unique<OwnChild>(pid);
        char byte = 0;
        set_up_ = pid > 0 && read(ready_, &byte, 1) == 1 && byte == 's';
    }
    ~PolicyChild() {
        if (go_ >= 0) close(go_);
        if (ready_ >= 0) close(ready_);
    }
    PolicyChild(const PolicyChild&) = delete;
    PolicyChild& operator=(const PolicyChild&) = delete;

    bool set_up() const { return set_up_; }
    pid_t pid() const { return child_ ? child_->pid : -1; }
    // Lets it open its node; true once it holds it.
    bool go() {
        char byte = 0;
        return write(go_, "g", 1) == 1 && read(ready_, &byte, 1) == 1 && byte == 'o';
    }

  private:
    int go_ = -1, ready_ = -1;
    bool set_up_ = false;
    std::unique_ptr<OwnChild> child_;
};

// A cgroup named like a docker container's scope unit inside the test's own
// cgroup; its processes are SIGKILLed and it is removed at scope end.
struct ContainerCgroup {
    std::string dir;
    ContainerCgroup(const std::string& parent, const std::string& id)
        : dir(parent + "/docker-" + id + ".scope") {
        fs::create_directory(dir);
    }
    ~ContainerCgroup() {
        for (int attempt = 0; attempt < 100 && rmdir(dir.c_str()) != 0; ++attempt) {
            std::ifstream procs(dir + "/cgroup.procs");
            for (pid_t pid = 0; procs >> pid;) kill(pid, SIGKILL);
            std::this_thread::sleep_for(10ms);
        }
    }
};

// "HH:MM" of the UTC time `minutes` from now (wrapping past midnight).
std::string utc_clock(int minutes) {
    const int now = static_cast<int>((std::time(nullptr) / 60) % 1440);
    const int at = ((now + minutes) % 1440 + 1440) % 1440;
    char text[8];
    snprintf(text, sizeof(text), "%02d:%02d", at / 60, at % 60);
    return text;
}

// A rule for uid 61001's GPU use in the UTC window from `from` to `to`
// minutes from now.
std::string window_rule(const std::string& id, const std::string& name, int from, int to) {
    return "  - id: " + id + "\n    name: uid 61001 " + name +
           "\n    severity: warning\n    window: 1h\n    when:\n      gpu_held: true\n" +
           "      scope: {users: [\"61001\"]}\n      time_window: {from: \"" + utc_clock(from) +
           "\", to: \"" + utc_clock(to) + "\", time_zone: UTC}\n";
}

std::string hex_id(const std::string& prefix) {
    return prefix + std::string(64 - prefix.size(), 'a');
}

// The fake NVML's two GPUs with `on0` and `on1` listed on them (1 GiB each;
// 6 GiB for the pids in `large`).
std::string two_nvidia_gpus(const std::vector<pid_t>& on0, const std::vector<pid_t>& on1,
                            const std::set<pid_t>& large) {
    const auto gpu = [&](int minor, const std::string& bus, const std::vector<pid_t>& pids) {
        nlohmann::json processes = nlohmann::json::array();
        for (pid_t pid : pids) {
            processes.push_back(
                {{"pid", pid}, {"used_memory", (large.contains(pid) ? 6ull : 1ull) << 30}});
        }
        return nlohmann::json{
            {"name", "NVIDIA H100 80GB HBM3"},
            {"uuid", "GPU-00000000-1111-2222-3333-44444444444" + std::to_string(minor)},
            {"bus_id", "00000000:" + bus + ":00.0"},
            {"minor", minor},
            {"steps",
             {{{"utilization", {30, 10}},
               {"memory", {80ull << 30, 20ull << 30, 60ull << 30}},
               {"compute_processes", processes}}}}};
    };
    return nlohmann::json{{"driver_version", "550.54.15"},
                          {"devices", {gpu(0, "3B", on0), gpu(1, "5E", on1)}}}
        .dump();
}

void write_file(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
}

TEST_F(AgentDetectTest,
       guard_policies_report_the_process_inside_each_scope_and_not_the_one_beside) {
    // Non-root children open the nodes in the test's directory.
    fs::permissions(dir_.path(),
                    fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    const fs::path gpu1 = dir_ / "gpu1", amd = dir_ / "amd0";
    ASSERT_EQ(mknod(gpu1.c_str(), S_IFCHR | 0666, makedev(1, 5)), 0);
    ASSERT_EQ(mknod(amd.c_str(), S_IFCHR | 0666, makedev(1, 8)), 0);
    for (const fs::path& node : {node_, gpu1, amd}) {  // mknod's mode went through the umask
        fs::permissions(node, fs::perms::owner_read | fs::perms::owner_write |
                                  fs::perms::group_read | fs::perms::group_write |
                                  fs::perms::others_read | fs::perms::others_write);
    }
    // sysfs: NVML's GPU 0 and 1 (bus 3b, 5e) own the drm nodes 1:7 and 1:5;
    // an amdgpu card owns 1:8.
    const fs::path sys = dir_ / "sys";
    write_file(sys / "bus/pci/devices/0000:3b:00.0/drm/card0/dev", "1:7\n");
    write_file(sys / "bus/pci/devices/0000:5e:00.0/drm/card1/dev", "1:5\n");
    write_file(sys / "class/drm/card2/dev", "1:8\n");
    write_file(sys / "class/drm/card2/device/uevent",
               "DRIVER=amdgpu\nPCI_ID=1002:744C\nPCI_SLOT_NAME=0000:c1:00.0\n");

    gpuguard::testing::TestCgroup cgroup("gg-policy");
    ASSERT_EQ(cgroup.error(), "");
    const std::string batch_id = hex_id("c0ffee"), other_id = hex_id("beef");
    ContainerCgroup batch(cgroup.dir(), batch_id), other(cgroup.dir(), other_id);

    const std::string gpu0 = node_.string();
    // Time windows: uid 61001 inside the window that holds now (and outside
    // the later one); uid 61002 outside the rule's users.
    PolicyChild tw_in("gg-tw-in", 61001, 61001, gpu0), tw_out("gg-tw-out", 61002, 61002, gpu0);
    // Process cap 2 for uid 61003: its third is over; uid 61004 runs three
    // too but is outside the cap's scope.
    PolicyChild cap1("gg-cap1", 61003, 61003, gpu0), cap2("gg-cap2", 61003, 61003, gpu0),
        cap3("gg-cap3", 61003, 61003, gpu0);
    PolicyChild free1("gg-free1", 61004, 61004, gpu0), free2("gg-free2", 61004, 61004, gpu0),
        free3("gg-free3", 61004, 61004, gpu0);
    // Allocation: uid 61005 may use GPU 1 only; the AMD card is not for uid 61006.
    PolicyChild alloc_out("gg-alloc-out", 61005, 61005, gpu0),
        alloc_in("gg-alloc-in", 61005, 61005, gpu1.string());
    PolicyChild amd_user("gg-amd", 61006, 61006, amd.string()),
        nv_user("gg-nv", 61006, 61006, gpu1.string());
    // Group 61007's memory limit: the same user, once in the group, once not.
    PolicyChild grouped("gg-grouped", 61008, 61007, gpu0),
        ungrouped("gg-ungrouped", 61008, 61009, gpu0);
    // Containers c0ffee* are allocated GPU 1; container beef* is not bound.
    PolicyChild in_batch("gg-batch", 61010, 61010, gpu0, batch.dir),
        in_other("gg-other", 61010, 61010, gpu0, other.dir);
    std::vector<PolicyChild*> all = {
        &tw_in,     &tw_out,   &cap1,     &cap2,    &cap3,    &free1,     &free2,    &free3,
        &alloc_out, &alloc_in, &amd_user, &nv_user, &grouped, &ungrouped, &in_batch, &in_other};
    for (auto* child : all) ASSERT_TRUE(child->set_up()) << child->pid();

    std::vector<pid_t> on0, on1;
    for (auto* child : all) {
        if (child == &alloc_in || child == &nv_user) {
            on1.push_back(child->pid());
        } else if (child != &amd_user) {
            on0.push_back(child->pid());
        }
    }
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << two_nvidia_gpus(on0, on1, {grouped.pid(), ungrouped.pid()});
    const auto policy = dir_ / "guard.yaml";
    std::ofstream(policy) << "rules:\n"
                          << window_rule("SITE-TW-NOW", "in the window that holds now", -120, 120)
                          << window_rule("SITE-TW-LATER", "in a window hours away", 180, 300)
                          << R"(  - id: SITE-CAP
    name: More than two GPU processes for uid 61003
    severity: warning
    window: 1h
    when:
      gpu_held: true
      scope: {users: ["61003"]}
      max_gpu_processes: 2
  - id: SITE-ALLOC
    name: uid 61005 outside GPU 1
    severity: warning
    window: 1h
    when:
      gpu_held: true
      scope: {users: ["61005"]}
      gpu_index_not_in: [1]
  - id: SITE-VENDOR
    name: uid 61006 on a GPU that is not NVIDIA's
    severity: warning
    window: 1h
    when:
      gpu_held: true
      scope: {users: ["61006"]}
      gpu_vendor_not_in: [nvidia]
  - id: SITE-GROUP
    name: GPU memory over group 61007's limit
    severity: warning
    window: 1h
    when:
      gpu_held: true
      scope: {groups: ["61007"]}
      gpu_memory_above: 4GiB
  - id: SITE-CONTAINER
    name: Batch containers outside GPU 1
    severity: warning
    window: 1h
    when:
      gpu_held: true
      scope: {containers: container, container_ids: ["c0ffee*"]}
      gpu_index_not_in: [1]
)";
    replace_in_config("extra_gpu_devices: [\"1:7\"]",
                      "extra_gpu_devices: [\"1:7\", \"1:5\", \"1:8\"]");
    use_control_socket();
    use_fake_gpu(policy, "  sysfs_root: " + sys.string() + "\n");
    auto started = start_agent_playing(script);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    // The agent knows the three GPUs (so which GPU each node is) before the
    // children open them: the AMD card's readings name no process, so its
    // holder is judged at its open only.
    ASSERT_TRUE(wait_for_gpus(3, 10s)) << agent.stderr_text();
    for (auto* child : all) ASSERT_TRUE(child->go()) << child->pid();

    const std::set<std::pair<std::string, pid_t>> expected = {
        {"SITE-TW-NOW", tw_in.pid()},    {"SITE-CAP", cap3.pid()},
        {"SITE-ALLOC", alloc_out.pid()}, {"SITE-VENDOR", amd_user.pid()},
        {"SITE-GROUP", grouped.pid()},   {"SITE-CONTAINER", in_batch.pid()}};
    std::set<std::pair<std::string, pid_t>> seen;
    std::map<std::string, std::string> evidence;
    const auto read_for = [&](std::chrono::milliseconds timeout) {
        for (const auto deadline = Clock::now() + timeout; Clock::now() < deadline;) {
            auto line = agent.read_stdout_line(20ms);
            if (!line) {
                if (timeout > 2s &&
                    std::includes(seen.begin(), seen.end(), expected.begin(), expected.end())) {
                    return;
                }
                continue;
            }
            seen_.push_back(*line);  // for the whole-output check
            const auto record = nlohmann::json::parse(*line);
            const std::string rule = record["rule"]["id"].get<std::string>();
            if (!rule.starts_with("SITE-")) continue;
            seen.emplace(rule, record["process"]["pid"].get<pid_t>());
            evidence[rule] += record.dump();
        }
    };
    read_for(10s);
    // Then two seconds more (ten readings) in which nothing else may come.
    read_for(2s);
    EXPECT_EQ(seen, expected) << agent.stderr_text();
    EXPECT_NE(evidence["SITE-CAP"].find("user 61003 runs 3 GPU processes, limit 2"),
              std::string::npos)
        << evidence["SITE-CAP"];
    EXPECT_NE(evidence["SITE-ALLOC"].find("GPU 0 is not an allowed GPU"), std::string::npos)
        << evidence["SITE-ALLOC"];
    EXPECT_NE(evidence["SITE-VENDOR"].find("GPU 2 is amd, not an allowed vendor"),
              std::string::npos)
        << evidence["SITE-VENDOR"];
    EXPECT_NE(evidence["SITE-GROUP"].find("GPU memory 6.0 GiB over the limit 4.0 GiB"),
              std::string::npos)
        << evidence["SITE-GROUP"];
    EXPECT_NE(evidence["SITE-CONTAINER"].find(batch_id), std::string::npos)
        << evidence["SITE-CONTAINER"];
    // The site rules' detections at their warning, and nothing at warning
    // or above from the built-in rules for any of the sixteen.
    std::vector<gpuguard::testing::ExpectedDetection> wanted;
    for (const auto& [rule, pid] : expected) wanted.push_back({rule, pid, "warning"});
    std::vector<pid_t> pids;
    for (auto* child : all) pids.push_back(child->pid());
    // (The children are forks of this test binary: their YARA verdict allowed.)
    expect_whole_output(agent, with_test_binary_scans(wanted, pids), pids);
}

}  // namespace
