// Pods named by the kubelet, seen by the real agent: a fake kubelet
// (tests/kubelet/fake_kubelet.h, the PodResources v1 gRPC service on a unix
// socket in the test's directory) lists three pods, and the test lays out
// their directories under a kubelet root of its own (kubelet.root) and
// their containers' cgroups under a cgroup it creates, in both drivers'
// shapes (cgroupfs ".../kubepods/besteffort/pod<uid>/<id>", systemd's
// ".../kubepods-burstable-pod<uid with _>.slice/cri-containerd-<id>.scope").
// No runtime has labels for them: the pods are named by their directories.
// The GPUs: two NVIDIA ones from the fake NVML, given by UUID as NVIDIA's
// device plugin names them, whose nvidia-drm nodes (sysfs) are the test's
// 1:7 and 1:5: the agent's inventory makes each GPU all its nodes. A
// process of the pod given GPU 0 that opens GPU 1 is GG-CORR-0033 naming
// the pod and both GPUs; one of a pod given GPU 1 that opens it is silent;
// one of a pod given no GPU that opens one is GG-CORR-0034 at error; a pod
// the kubelet lists only after the agent's last List is asked for at its
// process's first GPU use and judged by the answer (not "given none" by its
// environment before it); one of a pod given its GPU by a DRA claim is not
// judged (no device node the agent can name); nor is the GPU Operator's
// DCGM exporter, given none and opening both GPUs, in its gpu-operator
// namespace. Nothing else is reported for them, and replay of the journal
// names the pod the same.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/kubelet/fake_kubelet.h"
#include "tests/support/netns.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::kubelet::ContainerResources;
using gpuguard::kubelet::PodResources;
using gpuguard::kubelet::ResourceDevices;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::Clock;
using gpuguard::testing::OwnChild;
using gpuguard::testing::Subprocess;
namespace fs = std::filesystem;

// A pod's container cgroup: `path` (relative) created under `parent`, each
// level; its processes SIGKILLed and the levels removed, deepest first.
class PodContainerCgroup {
  public:
    PodContainerCgroup(const std::string& parent, const std::string& path) {
        fs::path at = parent;
        for (const auto& level : fs::path(path)) {
            at /= level;
            std::error_code ec;
            fs::create_directory(at, ec);
            levels_.push_back(at.string());
        }
    }
    ~PodContainerCgroup() {
        for (auto level = levels_.rbegin(); level != levels_.rend(); ++level) {
            for (int attempt = 0; attempt < 100 && rmdir(level->c_str()) != 0; ++attempt) {
                std::ifstream procs(*level + "/cgroup.procs");
                for (pid_t pid = 0; procs >> pid;) kill(pid, SIGKILL);
                std::this_thread::sleep_for(10ms);
            }
        }
    }
    PodContainerCgroup(const PodContainerCgroup&) = delete;
    PodContainerCgroup& operator=(const PodContainerCgroup&) = delete;
    const std::string& dir() const { return levels_.back(); }

  private:
    std::vector<std::string> levels_;
};

// A process moved into `cgroup_dir` before it runs a shell that opens
// `nodes` (read-only, held open) and then sleeps holding them.
std::unique_ptr<OwnChild> start_in_cgroup(const std::string& cgroup_dir,
                                          const std::vector<std::string>& nodes) {
    std::string script;
    for (size_t i = 0; i < nodes.size(); ++i) {
        script += "exec " + std::to_string(5 + i) + "<" + nodes[i] + "; ";
    }
    script += "exec sleep 60";
    const pid_t pid = fork();
    if (pid == 0) {
        std::ofstream procs(cgroup_dir + "/cgroup.procs");
        procs << 0;  // "0": the writer itself
        procs.flush();
        if (!procs.good()) _exit(2);
        execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
        _exit(3);
    }
    return std::make_unique<OwnChild>(pid);
}

// As start_in_cgroup, for a container of NVIDIA's device plugin under its
// volume-mounts strategy: NVIDIA_VISIBLE_DEVICES names the directory, and
// in a mount namespace of its own (a tmpfs over /run) /dev/null is bound
// at /run/nvidia-container-devices/<id> for each of `device_ids`.
std::unique_ptr<OwnChild> start_with_volume_mounts(const std::string& cgroup_dir,
                                                   const std::vector<std::string>& device_ids,
                                                   const std::string& node) {
    const pid_t pid = fork();
    if (pid == 0) {
        std::ofstream procs(cgroup_dir + "/cgroup.procs");
        procs << 0;
        procs.flush();
        if (!procs.good()) _exit(2);
        if (unshare(CLONE_NEWNS) != 0 ||
            mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
            mount("gg-run", "/run", "tmpfs", 0, "size=64k") != 0 ||
            mkdir("/run/nvidia-container-devices", 0755) != 0) {
            _exit(4);
        }
        for (const auto& id : device_ids) {
            const std::string path = "/run/nvidia-container-devices/" + id;
            std::ofstream(path).flush();
            if (mount("/dev/null", path.c_str(), nullptr, MS_BIND, nullptr) != 0) _exit(5);
        }
        setenv("NVIDIA_VISIBLE_DEVICES", "/var/run/nvidia-container-devices", 1);
        const std::string script = "exec 5<" + node + "; exec sleep 60";
        execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
        _exit(3);
    }
    return std::make_unique<OwnChild>(pid);
}

// The fake NVML's two GPUs: UUIDs ...440 and ...441, on PCI buses 3b and 5e.
std::string gpu_uuid(int minor) {
    return "GPU-00000000-1111-2222-3333-44444444444" + std::to_string(minor);
}
std::string two_idle_gpus() {
    const auto gpu = [](int minor, const std::string& bus) {
        return nlohmann::json{{"name", "NVIDIA H100 80GB HBM3"},
                              {"uuid", gpu_uuid(minor)},
                              {"bus_id", "00000000:" + bus + ":00.0"},
                              {"minor", minor},
                              {"steps",
                               {{{"utilization", {0, 0}},
                                 {"memory", {80ull << 30, 1ull << 30, 79ull << 30}},
                                 {"compute_processes", nlohmann::json::array()}}}}};
    };
    return nlohmann::json{{"driver_version", "550.54.15"},
                          {"devices", {gpu(0, "3B"), gpu(1, "5E")}}}
        .dump();
}

class AgentPodTest : public AgentDetectTest {
  protected:
    // The kubelet (FakeKubelet's socket and the test's kubelet root, its
    // own poll a minute apart) and the fake NVML (`backends_tree`: where
    // its sysfs and procfs are) in the configuration.
    void use_kubelet_and_fake_gpu(const std::string& backends_tree) {
        std::ofstream(config_, std::ios::app)
            << "kubelet:\n  pod_resources_socket: " << socket_.string()
            << "\n  root: " << (dir_ / "kubelet").string() << "\n  refresh_interval_s: 60\n"
            << "backends:\n  interval_ms: 200\n  nvml_library: \"" << GPUGUARD_FAKE_NVML_PATH
            << "\"\n"
            << backends_tree;
    }
    // The agent started on the fake NVML playing `script` and ready, with
    // its inventory of the GPUs' UUIDs and the kubelet's first answer.
    std::unique_ptr<Subprocess> start_with_gpus(const fs::path& script, size_t gpus,
                                                const gpuguard::testing::FakeKubelet& kubelet) {
        auto agent = start_agent_playing(script);
        EXPECT_TRUE(agent->wait_for_agent_ready(30s)) << agent->stderr_text();
        EXPECT_TRUE(wait_for_gpus(gpus, 10s)) << agent->stderr_text();
        std::this_thread::sleep_for(500ms);  // the sample reaches the event loop's inventory
        EXPECT_GT(kubelet.list_calls(), 0) << agent->stderr_text();
        return agent;
    }
    const fs::path socket_ = dir_ / "pod-resources/kubelet.sock";

    // The pod's directory as the kubelet leaves it: its host name, the
    // service account volume's namespace, its containers' directories.
    void pod_directory(const std::string& uid, const PodResources& pod) {
        const fs::path dir = dir_ / "kubelet/pods" / uid;
        fs::create_directories(dir / "volumes/kubernetes.io~projected/kube-api-access-7xk2p");
        std::ofstream(dir / "etc-hosts")
            << "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"
            << "10.244.0.9\t" << pod.name << "\n";
        std::ofstream(dir / "volumes/kubernetes.io~projected/kube-api-access-7xk2p/namespace")
            << pod.pod_namespace;
        for (const auto& container : pod.containers) {
            fs::create_directories(dir / "containers" / container.name);
            std::ofstream(dir / "containers" / container.name / "5d41402a");
        }
    }
};

TEST_F(AgentPodTest, a_pod_on_a_gpu_the_kubelet_gave_another_is_named_and_one_given_none_is_error) {
    GG_REQUIRE_PRIVILEGED();
    // GPU 0's drm node is the fixture's 1:7, GPU 1's the test's 1:5.
    const std::string gpu_a = node_.string(), gpu_b = (dir_ / "gpu1").string();
    ASSERT_EQ(mknod(gpu_b.c_str(), S_IFCHR | 0666, makedev(1, 5)), 0);
    replace_in_config("extra_gpu_devices: [\"1:7\"]", "extra_gpu_devices: [\"1:7\", \"1:5\"]");
    for (const auto& [bus, node] :
         {std::pair{"0000:3b:00.0/drm/card0", "1:7"}, std::pair{"0000:5e:00.0/drm/card1", "1:5"}}) {
        fs::create_directories(dir_ / "sys/bus/pci/devices" / bus);
        std::ofstream(dir_ / "sys/bus/pci/devices" / bus / "dev") << node << "\n";
    }
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << two_idle_gpus();
    use_control_socket();

    const PodResources trainer{
        "trainer",
        "ml",
        {ContainerResources{"main", {ResourceDevices{"nvidia.com/gpu", {gpu_uuid(0)}}}}}};
    const PodResources keeper{
        "keeper",
        "ml",
        {ContainerResources{"main", {ResourceDevices{"nvidia.com/gpu", {gpu_uuid(1)}}}}}};
    const PodResources web{"web", "default", {ContainerResources{"nginx", {}}}};
    // Given its GPU by a DRA claim (NVIDIA's DRA driver), not the device
    // plugin: not judged, and not "given none".
    const PodResources server{"llm-0",
                              "serving",
                              {ContainerResources{"vllm",
                                                  {},
                                                  {gpuguard::kubelet::ClaimDevice{
                                                      "serving", "llm-0-gpu", "", "gpu.nvidia.com",
                                                      "node-1", "gpu-1"}}}}};
    // The GPU Operator's DCGM exporter: asks the device plugin for nothing
    // and opens every GPU; in gpu-operator, one of the default
    // kubelet.gpu_infrastructure_namespaces: not judged.
    const PodResources exporter{
        "nvidia-dcgm-exporter-7xk2p", "gpu-operator", {ContainerResources{"exporter", {}}}};
    fs::create_directories(dir_ / "pod-resources");
    gpuguard::testing::FakeKubelet kubelet(socket_.string());
    kubelet.set_pods({trainer, keeper, web, server, exporter});
    const std::string trainer_uid = "0e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b";
    const std::string keeper_uid = "1f2a3b4c-5d6e-4f70-9b0c-1d2e3f4a5b6c";
    const std::string web_uid = "2a3b4c5d-6e7f-4081-8c1d-2e3f4a5b6c7d";
    pod_directory(trainer_uid, trainer);
    pod_directory(keeper_uid, keeper);
    pod_directory(web_uid, web);
    const std::string server_uid = "4d5e6f70-8192-43a4-8b5c-6d7e8f9a0b1c";
    pod_directory(server_uid, server);
    const std::string exporter_uid = "5e6f7081-92a3-44b5-9c6d-7e8f9a0b1c2d";
    pod_directory(exporter_uid, exporter);
    use_kubelet_and_fake_gpu("  sysfs_root: " + (dir_ / "sys").string() + "\n");

    gpuguard::testing::TestCgroup cgroup("gg-pod");
    ASSERT_EQ(cgroup.error(), "");
    std::string keeper_systemd = keeper_uid;
    std::replace(keeper_systemd.begin(), keeper_systemd.end(), '-', '_');
    const PodContainerCgroup trainer_cgroup(
        cgroup.dir(), "kubepods/besteffort/pod" + trainer_uid + "/" + std::string(64, 'a'));
    const PodContainerCgroup keeper_cgroup(
        cgroup.dir(), "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
                          keeper_systemd + ".slice/cri-containerd-" + std::string(64, 'b') +
                          ".scope");
    const PodContainerCgroup web_cgroup(cgroup.dir(),
                                        "kubepods/pod" + web_uid + "/" + std::string(64, 'c'));
    const PodContainerCgroup server_cgroup(
        cgroup.dir(), "kubepods/burstable/pod" + server_uid + "/" + std::string(64, '9'));
    const PodContainerCgroup exporter_cgroup(
        cgroup.dir(), "kubepods/burstable/pod" + exporter_uid + "/" + std::string(64, '8'));

    // The agent has the kubelet's first answer and NVML's GPUs (its
    // inventory of their UUIDs) before the pods use a GPU.
    const auto started = start_with_gpus(script, 2, kubelet);
    Subprocess& agent = *started;
    ASSERT_FALSE(HasFailure());

    const auto stray = start_in_cgroup(trainer_cgroup.dir(), {gpu_b});
    const auto keeps = start_in_cgroup(keeper_cgroup.dir(), {gpu_b});
    const auto no_gpu = start_in_cgroup(web_cgroup.dir(), {gpu_a});
    const auto by_claim = start_in_cgroup(server_cgroup.dir(), {gpu_b});
    const auto monitor = start_in_cgroup(exporter_cgroup.dir(), {gpu_a, gpu_b});

    // Each detection, whichever of the two the agent wrote first.
    const auto detection = [&](pid_t pid, const std::string& rule) {
        for (const auto& seen : ledger().of(pid)) {
            if (seen["rule"]["id"] == rule) return std::optional<nlohmann::json>(seen);
        }
        return wait_for_detection(agent, pid, rule, 15s);
    };
    const auto outside = detection(stray->pid, "GG-CORR-0033");
    ASSERT_TRUE(outside) << agent.stderr_text();
    const std::string evidence = outside->dump();
    EXPECT_NE(evidence.find("pod ml/trainer took GPU 1:5 (GPU 1); it was given 195:0, 1:7 (the "
                            "kubelet's nvidia.com/gpu devices: " +
                            gpu_uuid(0) + ")"),
              std::string::npos)
        << evidence;
    EXPECT_EQ((*outside)["orchestrator"]["type"], "kubernetes") << evidence;
    EXPECT_EQ((*outside)["orchestrator"]["namespace"], "ml") << evidence;
    EXPECT_EQ((*outside)["orchestrator"]["resource"]["name"], "trainer") << evidence;
    EXPECT_EQ((*outside)["orchestrator"]["resource"]["id"], trainer_uid) << evidence;

    const auto none_given = detection(no_gpu->pid, "GG-CORR-0034");
    ASSERT_TRUE(none_given) << agent.stderr_text();
    EXPECT_EQ((*none_given)["log"]["level"], "error");
    EXPECT_NE(
        none_given->dump().find("pod default/web took GPU 1:7 (GPU 0); it was given none (the "
                                "kubelet's nvidia.com/gpu devices: none)"),
        std::string::npos)
        << none_given->dump();

    // A pod started after the agent's last List (every 60 s here): its
    // process's first GPU use asks the kubelet again and is judged by the
    // answer, not by its environment ("given none") before it.
    const PodResources late{
        "late",
        "ml",
        {ContainerResources{"main", {ResourceDevices{"nvidia.com/gpu", {gpu_uuid(0)}}}}}};
    const std::string late_uid = "3b4c5d6e-7f80-4192-9d2e-3f4a5b6c7d8e";
    kubelet.set_pods({trainer, keeper, web, server, exporter, late});
    pod_directory(late_uid, late);
    const PodContainerCgroup late_cgroup(
        cgroup.dir(), "kubepods/burstable/pod" + late_uid + "/" + std::string(64, 'd'));
    const auto late_stray = start_in_cgroup(late_cgroup.dir(), {gpu_b});
    const auto late_outside = detection(late_stray->pid, "GG-CORR-0033");
    ASSERT_TRUE(late_outside) << agent.stderr_text();
    EXPECT_NE(late_outside->dump().find("pod ml/late took GPU 1:5 (GPU 1)"), std::string::npos)
        << late_outside->dump();
    // Asked at once: the agent's own poll is 60 s away (no labels name the
    // pod for a Get: a List answers).
    EXPECT_GE(kubelet.list_calls(), 2);

    // A pod the kubelet never lists (its socket another kubelet's, say),
    // given GPU 0 by the device plugin's volume-mounts strategy: judged by
    // the mounts under the directory its NVIDIA_VISIBLE_DEVICES names.
    const std::string mounted_uid = "6f708192-a3b4-45c6-8d7e-8f9a0b1c2d3e";
    pod_directory(mounted_uid, PodResources{"mounted", "batch", {ContainerResources{"job", {}}}});
    const PodContainerCgroup mounted_cgroup(
        cgroup.dir(), "kubepods/burstable/pod" + mounted_uid + "/" + std::string(64, '7'));
    const auto mounted = start_with_volume_mounts(mounted_cgroup.dir(), {gpu_uuid(0)}, gpu_b);
    const auto mounted_outside = detection(mounted->pid, "GG-CORR-0033");
    ASSERT_TRUE(mounted_outside) << agent.stderr_text();
    EXPECT_NE(mounted_outside->dump().find(
                  "pod batch/mounted took GPU 1:5 (GPU 1); it was given 195:0, 1:7 "
                  "(NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices (" +
                  gpu_uuid(0) + "))"),
              std::string::npos)
        << mounted_outside->dump();

    // The process on its own GPU: given time to be judged (its open came
    // with the others'), then the whole output.
    std::this_thread::sleep_for(1s);
    expect_whole_output(agent,
                        {{"GG-CORR-0033", stray->pid, "warning"},
                         {"GG-CORR-0034", no_gpu->pid, "error"},
                         {"GG-CORR-0033", late_stray->pid, "warning"},
                         {"GG-CORR-0033", mounted->pid, "warning"}},
                        {stray->pid, keeps->pid, no_gpu->pid, late_stray->pid, by_claim->pid,
                         monitor->pid, mounted->pid});

    // The journal's workload events carry the kubelet's word: replay names
    // the pod alike.
    const auto replayed = replay_journal();
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    EXPECT_NE(replayed.stdout_text.find("pod ml/trainer took GPU 1:5 (GPU 1)"), std::string::npos)
        << replayed.stdout_text;
    EXPECT_EQ(replayed.stdout_text.find("pod ml/keeper"), std::string::npos)
        << replayed.stdout_text;
}

// A partitioned GPU, live: NVML's H100 in MIG mode with two GPU
// instances, their access nodes named by a driver tree of the test's
// (mig-minors under an nvidia-caps major that makes them the test's 1:7
// and 1:5). Two pods, each given one MIG device by its MIG UUID as the
// NVIDIA device plugin's MIG strategies name them: the one that opens the
// other's access node is GG-CORR-0033 naming the pod and the node; the one
// on its own node is silent.
TEST_F(AgentPodTest, a_pod_given_a_mig_slice_that_opens_another_is_named) {
    GG_REQUIRE_PRIVILEGED();
    const std::string backends_tree = use_mig_access_nodes();
    const std::string gi1_node = node_.string(), gi2_node = (dir_ / "gpu1").string();
    auto script = nlohmann::json::parse(two_idle_gpus());
    script["devices"].erase(1);
    auto& gpu = script["devices"][0];
    gpu["mig_mode"] = {1, 1};
    const auto slice = [](int gi, const std::string& uuid) {
        return nlohmann::json{
            {"gpu_instance", gi},
            {"compute_instance", 0},
            {"uuid", uuid},
            {"steps", nlohmann::json::array({{{"memory", {42949672960ull, 0, 42949672960ull}}}})}};
    };
    gpu["mig_instances"] = {slice(1, "MIG-aaaa-1111"), slice(2, "MIG-bbbb-2222")};
    gpu["steps"][0].erase("utilization");  // NOT_SUPPORTED on a MIG GPU
    const auto script_path = dir_ / "nvml.json";
    std::ofstream(script_path) << script.dump();
    use_control_socket();

    const PodResources tenant_a{
        "tenant-a",
        "ml",
        {ContainerResources{"main",
                            {ResourceDevices{"nvidia.com/mig-3g.40gb", {"MIG-aaaa-1111"}}}}}};
    const PodResources tenant_b{
        "tenant-b",
        "ml",
        {ContainerResources{"main",
                            {ResourceDevices{"nvidia.com/mig-3g.40gb", {"MIG-bbbb-2222"}}}}}};
    fs::create_directories(dir_ / "pod-resources");
    gpuguard::testing::FakeKubelet kubelet(socket_.string());
    kubelet.set_pods({tenant_a, tenant_b});
    const std::string a_uid = "4c5d6e7f-8091-42a3-8e4f-5a6b7c8d9e0f";
    const std::string b_uid = "5d6e7f80-91a2-43b4-9f50-6b7c8d9e0f1a";
    pod_directory(a_uid, tenant_a);
    pod_directory(b_uid, tenant_b);
    use_kubelet_and_fake_gpu(backends_tree);

    gpuguard::testing::TestCgroup cgroup("gg-pod-mig");
    ASSERT_EQ(cgroup.error(), "");
    const PodContainerCgroup a_cgroup(
        cgroup.dir(), "kubepods/burstable/pod" + a_uid + "/" + std::string(64, 'e'));
    const PodContainerCgroup b_cgroup(
        cgroup.dir(), "kubepods/burstable/pod" + b_uid + "/" + std::string(64, 'f'));

    const auto started = start_with_gpus(script_path, 1, kubelet);
    Subprocess& agent = *started;
    ASSERT_FALSE(HasFailure());
    // `gpuguard gpus` on the same configuration names each instance's
    // access node by its device number.
    const auto gpus = gpuguard::testing::run_command(
        {"/usr/bin/env", "GPUGUARD_FAKE_NVML_SCRIPT=" + script_path.string(), GPUGUARD_BINARY,
         "gpus", "--json", "--config", config_.string()},
        10s);
    EXPECT_NE(gpus.stdout_text.find("\"gpu_instance_access_node\": \"1:5\""), std::string::npos)
        << gpus.stdout_text << gpus.stderr_text;

    const auto stray = start_in_cgroup(a_cgroup.dir(), {gi1_node, gi2_node});
    const auto keeps = start_in_cgroup(b_cgroup.dir(), {gi2_node});
    const auto outside = wait_for_detection(agent, stray->pid, "GG-CORR-0033", 15s);
    ASSERT_TRUE(outside) << agent.stderr_text();
    EXPECT_NE(outside->dump().find("pod ml/tenant-a took GPU 1:5 (GPU 0's MIG GPU instance 2); it "
                                   "was given 195:0, 1:7 (the "
                                   "kubelet's nvidia.com/gpu devices: MIG-aaaa-1111)"),
              std::string::npos)
        << outside->dump();
    std::this_thread::sleep_for(1s);  // the other pod's open, judged with it
    expect_whole_output(agent, {{"GG-CORR-0033", stray->pid, "warning"}}, {stray->pid, keeps->pid});
}

}  // namespace
