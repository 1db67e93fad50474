// A miner in a real podman container, seen by the real agent: the test
// builds a busybox root filesystem holding the fake GPU node, imports it as
// a local image (no pull), and runs it with Kubernetes labels; the detection
// (ECS JSON: the GPU holder's and the one its command line raised at exec),
// `gpuguard ps` and a replay of the journal name the container, its image,
// runtime, pod and namespace. Podman's options are the ones this
// host needs: runc (crun refuses the hybrid cgroup layout), the cgroupfs
// manager, limits under the host's hard limits, and no network.
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/run_command.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::file_bytes;
using nlohmann::literals::operator""_json_pointer;
using gpuguard::testing::run_command;
using gpuguard::testing::Subprocess;
namespace fs = std::filesystem;

constexpr const char* kPodman = "/usr/bin/podman";  // run_command does not search PATH

// Removes the container and the image the test made, whatever happened.
struct PodmanCleanup {
    std::string container, image;
    ~PodmanCleanup() {
        run_command({kPodman, "rm", "--force", "--time", "0", container}, 30s);
        run_command({kPodman, "rmi", "--force", image}, 30s);
    }
};

class AgentContainerTest : public AgentDetectTest {
  protected:
    // A root filesystem with a static busybox and the registered fake GPU
    // node (1:7, which runc's default device list lets a container open),
    // imported as `image`.
    void import_image(const std::string& image) {
        const fs::path rootfs = dir_ / "rootfs";
        fs::create_directories(rootfs / "bin");
        for (const char* dir : {"dev", "proc", "sys", "tmp", "etc"}) {
            fs::create_directories(rootfs / dir);
        }
        fs::copy_file("/bin/busybox", rootfs / "bin/busybox");
        for (const char* applet : {"sh", "sleep"})
            fs::create_symlink("busybox", rootfs / "bin" / applet);
        ASSERT_EQ(mknod((rootfs / "gpu0").c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
        const auto tar = run_command(
            {"/usr/bin/tar", "-C", rootfs.string(), "-cf", (dir_ / "rootfs.tar").string(), "."},
            30s);
        ASSERT_EQ(tar.exit_code, 0) << tar.stderr_text;
        const auto imported =
            run_command({kPodman, "import", (dir_ / "rootfs.tar").string(), image}, 60s);
        ASSERT_EQ(imported.exit_code, 0) << imported.stderr_text;
    }
};

TEST_F(AgentContainerTest, miner_in_a_podman_container_is_named_with_its_container_and_pod) {
    GG_REQUIRE_PRIVILEGED();
    const std::string tag = std::to_string(getpid());
    const std::string name = "gg-miner-" + tag;
    const std::string image = "localhost/gg-test-miner:" + tag;
    PodmanCleanup cleanup{name, image};
    ASSERT_NO_FATAL_FAILURE(import_image(image));
    const fs::path alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    use_control_socket();
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    // The "miner": a shell holding the GPU node with xmrig's command line.
    const auto started = run_command({kPodman,     "run",
                                      "--detach",  "--runtime",
                                      "runc",      "--cgroup-manager=cgroupfs",
                                      "--ulimit",  "nofile=10000:10000",
                                      "--ulimit",  "nproc=10000:10000",
                                      "--network", "none",
                                      "--name",    name,
                                      "--label",   "io.kubernetes.pod.name=miner-pod-" + tag,
                                      "--label",   "io.kubernetes.pod.namespace=gg-ns",
                                      "--label",   "io.kubernetes.container.name=miner",
                                      image,       "/bin/sh",
                                      "-c",        "exec 5<>/gpu0; sleep 30",
                                      "xmrig",     "--cuda",
                                      "-o",        "stratum+tcp://pool.example:3333",
                                      "-u",        "wallet"},
                                     60s);
    ASSERT_EQ(started.exit_code, 0) << started.stderr_text;
    const std::string id = started.stdout_text.substr(0, started.stdout_text.find('\n'));
    ASSERT_EQ(id.size(), 64u) << started.stdout_text;

    const auto detection = wait_for_output(
        alerts,
        [&](const nlohmann::json& record) {
            return record.value("/gpuguard/record"_json_pointer, "") == "detection" &&
                   record.value("/rule/id"_json_pointer, "") == "GG-CORR-0001" &&
                   record.value("/container/id"_json_pointer, "") == id;
        },
        10s);
    ASSERT_TRUE(detection) << file_bytes(alerts) << agent.stderr_text();
    const nlohmann::json& container = (*detection)["container"];
    EXPECT_EQ(container["name"], name) << detection->dump();
    EXPECT_EQ(container["runtime"], "podman");
    EXPECT_EQ(container["image"]["name"], image);
    const auto image_id = run_command({kPodman, "image", "inspect", "--format", "{{.Id}}", image});
    EXPECT_EQ(container["image"]["hash"]["all"][0],
              "sha256:" + image_id.stdout_text.substr(0, image_id.stdout_text.find('\n')));
    EXPECT_EQ((*detection)["orchestrator"]["type"], "kubernetes");
    EXPECT_EQ((*detection)["orchestrator"]["namespace"], "gg-ns");
    EXPECT_EQ((*detection)["orchestrator"]["resource"]["type"], "pod");
    EXPECT_EQ((*detection)["orchestrator"]["resource"]["name"], "miner-pod-" + tag);
    const pid_t miner = (*detection)["process"]["pid"].get<pid_t>();

    // Its command line was judged at its exec, before it held the GPU
    // (GG-CORR-0012): that detection names the container and pod too, from
    // the container event the agent puts before the cgroup's first exec.
    const auto at_exec = wait_for_output(
        alerts,
        [&](const nlohmann::json& record) {
            return record.value("/gpuguard/record"_json_pointer, "") == "detection" &&
                   record.value("/rule/id"_json_pointer, "") == "GG-CORR-0012" &&
                   record.value("/process/pid"_json_pointer, 0) == miner;
        },
        5s);
    ASSERT_TRUE(at_exec) << file_bytes(alerts);
    EXPECT_EQ(at_exec->value("/container/id"_json_pointer, ""), id) << at_exec->dump();
    EXPECT_EQ(at_exec->value("/container/name"_json_pointer, ""), name);
    EXPECT_EQ(at_exec->value("/orchestrator/resource/name"_json_pointer, ""), "miner-pod-" + tag);

    // `gpuguard ps`: the JSON fields and the table's column.
    const auto socket = (dir_ / "control.sock").string();
    const auto listed = run_command({GPUGUARD_BINARY, "ps", "--json", "--socket", socket});
    ASSERT_EQ(listed.exit_code, 0) << listed.stderr_text;
    bool found = false;
    for (const auto& process : nlohmann::json::parse(listed.stdout_text)) {
        if (process["pid"] != miner) continue;
        found = true;
        EXPECT_EQ(process["container"]["id"], id);
        EXPECT_EQ(process["container"]["name"], name);
        EXPECT_EQ(process["container"]["image"], image);
        EXPECT_EQ(process["container"]["pod_name"], "miner-pod-" + tag);
        EXPECT_EQ(process["container"]["pod_namespace"], "gg-ns");
        EXPECT_EQ(process["container"]["kube_container"], "miner");
    }
    EXPECT_TRUE(found) << listed.stdout_text;
    const auto table = run_command({GPUGUARD_BINARY, "ps", "--socket", socket});
    EXPECT_NE(table.stdout_text.find("gg-ns/miner-pod-" + tag + "/podman:" + name),
              std::string::npos)
        << table.stdout_text;
    expect_whole_output(
        agent, {{"GG-CORR-0012", miner, "error"}, {"GG-CORR-0001", miner, "critical"}}, {miner});
    if (HasFailure()) return;

    // The journal carries the identity: replay (which reads no runtime
    // state) names the same container and pod.
    const auto replayed = replay_journal();
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    bool replay_named = false;
    bool replay_named_at_exec = false;
    std::istringstream lines(replayed.stdout_text);
    for (std::string line; std::getline(lines, line);) {
        const auto record = nlohmann::json::parse(line, nullptr, false);
        if (!record.is_object() || record.value("/process/pid"_json_pointer, 0) != miner) continue;
        const bool named = record.value("/container/name"_json_pointer, "") == name &&
                           record.value("/orchestrator/namespace"_json_pointer, "") == "gg-ns";
        replay_named = replay_named || named;
        if (record.value("/rule/id"_json_pointer, "") == "GG-CORR-0012") {
            replay_named_at_exec = named;
        }
    }
    EXPECT_TRUE(replay_named) << replayed.stdout_text;
    EXPECT_TRUE(replay_named_at_exec) << replayed.stdout_text;
}

}  // namespace
