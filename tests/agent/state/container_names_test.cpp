// ContainerNames: each runtime's own state files, as the runtimes write them
// (podman 4.3's bolt_state.db record shape taken from a real container).
#include "gpuguard/state/container_names.h"

#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using gpuguard::testing::TempDir;
namespace fs = std::filesystem;

class ContainerNamesTest : public ::testing::Test {
  protected:
    void write(const fs::path& relative, const std::string& text) {
        fs::create_directories((root_.path() / relative).parent_path());
        std::ofstream(root_.path() / relative, std::ios::binary) << text;
    }
    // A podman config record as bolt_state.db stores it, between other bytes.
    static std::string podman_record(const std::string& id, const std::string& name,
                                     const std::string& labels) {
        return R"({"spec":{"ociVersion":"1.0.2-dev","process":{"args":["/bin/sh","-c","x}{\""]}},"id":")" +
               id + R"(","name":")" + name +
               R"(","rootfsImageID":"ae7dc0360b11190da9213f42c1bcdec13fc303f61ac752b3556160f25bf650f1",)"
               R"("rootfsImageName":"localhost/gg-test-miner:1","labels":)" +
               labels + R"(,"cgroupManager":"cgroupfs"})";
    }

    TempDir root_{"gg-containers"};
    const std::string id_ = std::string(64, 'a');
};

TEST_F(ContainerNamesTest, podman_reads_its_database_record_with_labels) {
    const std::string junk("\x00\x01\x02{\"spec\":broken", 17);
    write("var/lib/containers/storage/libpod/bolt_state.db",
          junk + podman_record(std::string(64, 'b'), "someone-else", "{}") + junk +
              podman_record(id_, "gg-miner",
                            R"({"io.kubernetes.pod.name":"minerpod",)"
                            R"("io.kubernetes.pod.namespace":"ns1",)"
                            R"("io.kubernetes.container.name":"kc"})") +
              junk);
    ContainerNames names(root_.path());
    const ContainerDetails& d = names.details_of(ContainerInfo{"podman", id_});
    EXPECT_EQ(d.name, "gg-miner");
    EXPECT_EQ(d.image, "localhost/gg-test-miner:1");
    EXPECT_EQ(d.image_id, "ae7dc0360b11190da9213f42c1bcdec13fc303f61ac752b3556160f25bf650f1");
    EXPECT_EQ(d.pod_name, "minerpod");
    EXPECT_EQ(d.pod_namespace, "ns1");
    EXPECT_EQ(d.kube_container, "kc");
}

TEST_F(ContainerNamesTest, podman_without_a_database_record_uses_the_storage_list) {
    write(
        "var/lib/containers/storage/overlay-containers/containers.json",
        R"([{"id":")" + id_ +
            R"(","names":["web"],"image":"ffff","metadata":"{\"image-name\":\"docker.io/library/nginx:1\"}"}])");
    ContainerNames names(root_.path());
    const ContainerDetails& d = names.details_of(ContainerInfo{"podman", id_});
    EXPECT_EQ(d.name, "web");
    EXPECT_EQ(d.image, "docker.io/library/nginx:1");
    EXPECT_EQ(d.image_id, "ffff");
    EXPECT_FALSE(d.in_pod());
}

TEST_F(ContainerNamesTest, docker_reads_config_v2_with_labels) {
    write("var/lib/docker/containers/" + id_ + "/config.v2.json",
          R"({"Name":"/trainer","Image":"sha256:1234","Config":{"Image":"pytorch:2",)"
          R"("Labels":{"io.kubernetes.pod.name":"p","io.kubernetes.pod.namespace":"ml",)"
          R"("io.kubernetes.pod.uid":"u-1"}}})");
    ContainerNames names(root_.path());
    const ContainerDetails& d = names.details_of(ContainerInfo{"docker", id_});
    EXPECT_EQ(d.name, "trainer");
    EXPECT_EQ(d.image, "pytorch:2");
    EXPECT_EQ(d.image_id, "sha256:1234");
    EXPECT_EQ(d.pod_name, "p");
    EXPECT_EQ(d.pod_namespace, "ml");
    EXPECT_EQ(d.pod_uid, "u-1");
}

TEST_F(ContainerNamesTest, containerd_reads_cri_annotations_in_any_namespace) {
    write(
        "run/containerd/io.containerd.runtime.v2.task/k8s.io/" + id_ + "/config.json",
        R"({"annotations":{"io.kubernetes.cri.container-type":"container",)"
        R"("io.kubernetes.cri.container-name":"miner","io.kubernetes.cri.image-name":"evil:latest",)"
        R"("io.kubernetes.cri.sandbox-name":"web-7d9","io.kubernetes.cri.sandbox-namespace":"prod",)"
        R"("io.kubernetes.cri.sandbox-uid":"0c7c-11e9"}})");
    ContainerNames names(root_.path());
    const ContainerDetails& d = names.details_of(ContainerInfo{"containerd", id_});
    EXPECT_EQ(d.name, "miner");
    EXPECT_EQ(d.kube_container, "miner");
    EXPECT_EQ(d.image, "evil:latest");
    EXPECT_EQ(d.pod_name, "web-7d9");
    EXPECT_EQ(d.pod_namespace, "prod");
    EXPECT_EQ(d.pod_uid, "0c7c-11e9");
}

TEST_F(ContainerNamesTest, crio_reads_bundle_annotations_and_the_storage_list) {
    write(
        "var/lib/containers/storage/overlay-containers/" + id_ + "/userdata/config.json",
        R"({"annotations":{"io.kubernetes.pod.name":"job-x","io.kubernetes.pod.namespace":"batch",)"
        R"("io.kubernetes.container.name":"worker","io.kubernetes.cri-o.ImageName":"quay.io/w:3"}})");
    write("var/lib/containers/storage/overlay-containers/containers.json",
          R"([{"id":")" + id_ + R"(","names":["k8s_worker_job-x"],"image":"abcd"}])");
    ContainerNames names(root_.path());
    const ContainerDetails& d = names.details_of(ContainerInfo{"cri-o", id_});
    EXPECT_EQ(d.name, "worker") << "the Kubernetes container name first";
    EXPECT_EQ(d.image, "quay.io/w:3");
    EXPECT_EQ(d.image_id, "abcd");
    EXPECT_EQ(d.pod_name, "job-x");
    EXPECT_EQ(d.pod_namespace, "batch");
}

// Cached per id, read again when the runtime's file changes: a container
// removed and another created in its place (or one not written yet).
TEST_F(ContainerNamesTest, cache_follows_the_runtimes_file) {
    const fs::path config = "var/lib/docker/containers/" + id_ + "/config.v2.json";
    ContainerNames names(root_.path());
    EXPECT_TRUE(names.details_of(ContainerInfo{"docker", id_}).empty()) << "not written yet";
    write(config, R"({"Name":"/first","Config":{"Image":"a:1"}})");
    EXPECT_EQ(names.details_of(ContainerInfo{"docker", id_}).name, "first");
    write(config, R"({"Name":"/second","Config":{"Image":"a:1"}})");
    fs::last_write_time(root_.path() / config,
                        fs::last_write_time(root_.path() / config) + std::chrono::seconds(5));
    EXPECT_EQ(names.details_of(ContainerInfo{"docker", id_}).name, "second");
    EXPECT_EQ(names.size(), 1u);
}

// Replay reads no host file: only the journaled container events count.
TEST_F(ContainerNamesTest, replay_knows_only_remembered_containers) {
    write("var/lib/docker/containers/" + id_ + "/config.v2.json", R"({"Name":"/on-disk"})");
    ContainerNames names(root_.path(), /*read_host=*/false);
    EXPECT_TRUE(names.details_of(ContainerInfo{"docker", id_}).empty());
    ContainerDetails journaled;
    journaled.name = "journaled";
    journaled.pod_name = "p";
    names.remember(Container{id_, "docker", journaled});
    EXPECT_EQ(names.details_of(ContainerInfo{"docker", id_}), journaled);
}

}  // namespace
}  // namespace gpuguard::agent
