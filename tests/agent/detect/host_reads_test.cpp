// HostReads waiting for the kubelet: a pod's process whose pod the
// kubelet's last answer lacked is read as unresolved at its first GPU use
// and read again once the kubelet has answered since (the lookup that
// missed asked it to). The count of answers is taken before the lookup, so
// an answer that arrives during the lookup (the kubelet's cache refreshes
// on its own thread, and can answer before workload_of returns) still
// counts as "since": with the count taken after it, that pod waited a whole
// poll unjudged (a CI failure of the live pod test under load).
#include "gpuguard/detect/host_reads.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kPid = 42;
constexpr const char* kUid = "5f1c2a3b-0d4e-4f60-8a7b-9c0d1e2f3a4b";

class HostReadsKubeletTest : public ::testing::Test {
  protected:
    HostReadsKubeletTest() : table_(table_options(), [](uint32_t, uint32_t) { return true; }) {
        // The host's root as the agent sees it from its own /proc (1/root).
        const fs::path host = dir_.path() / "proc/1/root";
        fs::create_directories(host / "dev");
        fs::create_symlink("/dev/null", host / "dev/nvidia0");  // 1:3
        fs::create_symlink("/dev/zero", host / "dev/nvidia1");  // 1:5
        const fs::path pod = host / "var/lib/kubelet/pods" / kUid;
        fs::create_directories(pod / "volumes/kubernetes.io~projected/token");
        std::ofstream(pod / "etc-hosts")
            << "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n10.244.1.5\ttrainer-0\n";
        std::ofstream(pod / "volumes/kubernetes.io~projected/token/namespace") << "ml\n";
        const fs::path proc = dir_.path() / "proc" / std::to_string(kPid);
        fs::create_directories(proc);
        std::ofstream(proc / "cgroup") << "0::/kubepods.slice/kubepods-burstable.slice/"
                                          "kubepods-burstable-pod5f1c2a3b_0d4e_4f60_8a7b_"
                                          "9c0d1e2f3a4b.slice/cri-containerd-0123abcd.scope\n";
        // Its environment names both GPUs; the kubelet gave it GPU 1 only.
        std::ofstream(proc / "environ", std::ios::binary)
            << std::string("NVIDIA_VISIBLE_DEVICES=0,1\0PATH=/bin\0", 38);
        table_.apply(Event{kTs, task(), Exec{.filename = "/usr/bin/python3", .argv = {"python3"}}});
    }

    static ProcessTableOptions table_options() {
        ProcessTableOptions options;
        options.read_host = false;
        return options;
    }
    static TaskInfo task() { return TaskInfo{kPid, kPid, 1, 0, 0, 7, "python3"}; }

    // A kubelet whose lookups see `listed_` and count `answers_`; when
    // `answer_during_lookup_`, a lookup that misses is answered at once,
    // before the lookup returns, as the refresh thread can.
    HostReads make_host_reads(std::vector<std::string> infrastructure = {}) {
        HostReadOptions options{.proc_root = (dir_.path() / "proc").string()};
        options.kubelet.infrastructure_namespaces = std::move(infrastructure);
        options.kubelet.gpu_ids = [this](const PodQuery& query) -> std::optional<KubeletGpus> {
            ++lookups_;
            if (listed_ && query.name == "trainer-0") return KubeletGpus{{"1"}, {}};
            if (answer_during_lookup_) {
                listed_ = true;
                ++answers_;
            }
            return std::nullopt;
        };
        options.kubelet.answers = [this] { return answers_.load(); };
        return HostReads(table_, std::move(options));
    }

    static const Workload& workload(const Event& event) { return std::get<Workload>(event.data); }

    static constexpr uint64_t kTs = 1'000'000'000;
    gpuguard::testing::TempDir dir_{"gg-hostreads"};
    ProcessTable table_;
    std::atomic<uint64_t> answers_{1};  // the kubelet answered once, before this pod
    bool listed_ = false;
    bool answer_during_lookup_ = false;
    int lookups_ = 0;
};

TEST_F(HostReadsKubeletTest, a_pod_the_kubelet_names_during_the_lookup_is_judged_after_it) {
    answer_during_lookup_ = true;
    HostReads host = make_host_reads();
    const auto first = host.workload_of(Event{kTs, task(), Exec{}});
    ASSERT_TRUE(first);
    EXPECT_EQ(workload(*first).pod_name, "trainer-0");
    EXPECT_EQ(workload(*first).unresolved, "the kubelet has not named its pod yet (asked again)");
    // The answer came during the lookup: it is one since, so the pod is read
    // again now, by the kubelet's allocation, not after the next poll.
    const auto after = host.workloads_after_refresh(kTs + 5);
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(after[0].ts_ns, kTs + 5);
    EXPECT_EQ(workload(after[0]).allocation_source, "kubelet");
    EXPECT_EQ(workload(after[0]).allocated, (std::vector<std::string>{"1:5"}));
    EXPECT_EQ(workload(after[0]).unresolved, "");
    EXPECT_TRUE(host.workloads_after_refresh(kTs + 6).empty());  // read once
}

TEST_F(HostReadsKubeletTest, a_pod_waits_for_the_kubelets_next_answer) {
    HostReads host = make_host_reads();
    const auto first = host.workload_of(Event{kTs, task(), Exec{}});
    ASSERT_TRUE(first);
    EXPECT_NE(workload(*first).unresolved, "");
    EXPECT_TRUE(host.workloads_after_refresh(kTs + 1).empty());  // no answer since
    listed_ = true;
    ++answers_;
    const auto after = host.workloads_after_refresh(kTs + 2);
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(workload(after[0]).allocated, (std::vector<std::string>{"1:5"}));
}

// Answered since but still not named (a pod the kubelet cannot place):
// judged by its environment, once.
TEST_F(HostReadsKubeletTest, a_pod_the_next_answer_still_lacks_falls_back_to_its_environment) {
    HostReads host = make_host_reads();
    ASSERT_TRUE(host.workload_of(Event{kTs, task(), Exec{}}));
    ++answers_;
    const auto after = host.workloads_after_refresh(kTs + 2);
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(workload(after[0]).allocation_source, "NVIDIA_VISIBLE_DEVICES");
    EXPECT_EQ(workload(after[0]).allocated, (std::vector<std::string>{"1:3", "1:5"}));
    EXPECT_EQ(workload(after[0]).unresolved, "");
    ++answers_;
    EXPECT_TRUE(host.workloads_after_refresh(kTs + 3).empty());
}

TEST_F(HostReadsKubeletTest, a_process_that_exited_while_waiting_is_dropped) {
    HostReads host = make_host_reads();
    ASSERT_TRUE(host.workload_of(Event{kTs, task(), Exec{}}));
    table_.apply(Event{kTs + 1, task(), Exit{}});
    ++answers_;
    EXPECT_TRUE(host.workloads_after_refresh(kTs + 2).empty());
    EXPECT_EQ(lookups_, 1);
}

// A pod of the GPU infrastructure is not judged by its allocation: nothing
// to wait for.
TEST_F(HostReadsKubeletTest, a_pod_of_the_gpu_infrastructure_does_not_wait) {
    HostReads host = make_host_reads(/*infrastructure=*/{"ml"});
    const auto first = host.workload_of(Event{kTs, task(), Exec{}});
    ASSERT_TRUE(first);
    EXPECT_EQ(workload(*first).allocation_source, kGpuInfrastructureSource);
    EXPECT_NE(workload(*first).unresolved.find("GPU infrastructure"), std::string::npos);
    listed_ = true;
    ++answers_;
    EXPECT_TRUE(host.workloads_after_refresh(kTs + 1).empty());
    EXPECT_EQ(lookups_, 0);
}

// Without a kubelet that has answered (none asked, or none yet), nothing
// waits: the environment is the only word there will be.
TEST_F(HostReadsKubeletTest, without_a_kubelets_answer_nothing_waits) {
    answers_ = 0;
    HostReads host = make_host_reads();
    const auto first = host.workload_of(Event{kTs, task(), Exec{}});
    ASSERT_TRUE(first);
    EXPECT_EQ(workload(*first).allocation_source, "NVIDIA_VISIBLE_DEVICES");
    EXPECT_EQ(workload(*first).unresolved, "");
    ++answers_;
    EXPECT_TRUE(host.workloads_after_refresh(kTs + 1).empty());
}

}  // namespace
}  // namespace gpuguard::agent
